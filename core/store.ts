/**
 * The storage seam of Trailwire. The core talks to persistence only through `TrailwireStore`; each
 * backend (SQLite now, PostgreSQL later) implements it and must pass the one conformance suite in
 * `test/conformance/store.ts`. Methods are async so that networked backends fit the same shape.
 *
 * Rules every implementation follows:
 * - Customer isolation is enforced in the query: every read of customer data takes the customer id
 *   and answers `null` / `[]` for anything that customer does not own.
 * - Lists are keyset pages: ordered by id (or by timestamp then sequence for telemetry), starting
 *   strictly after the given key, at most `limit` rows. The cost of a page must not grow with depth.
 */
import type {
  Audience,
  CargosafeReading,
  CargosafeUnit,
  Customer,
  Device,
  DeviceReading,
  Fleet,
  GpsFix,
  Partner,
  Principal,
  Trailer,
} from './model.ts';
import type { CanonicalTelemetry } from './canonical.ts';

/** A page of an id-ordered list: rows with id strictly greater than `afterId`. */
export interface IdPageQuery<K extends string | number = string> {
  afterId?: K;
  limit: number;
}

/** Active-only filtering for trailers and devices (see `Device` staleness in the README). */
export interface ActiveFilter {
  activeOnly: boolean;
  /** A device that has not reported since this time (epoch ms) counts as inactive. */
  staleBefore: number;
}

/** A page of a time range: `from <= timestamp < to`, ascending, strictly after `after`. */
export interface TimePageQuery {
  from: number;
  to: number;
  after?: TimeKey;
  limit: number;
}

/** The keyset position of a telemetry record: its timestamp, then a store-assigned sequence. */
export interface TimeKey {
  timestamp: number;
  seq: number;
}

/**
 * The keyset position of a fix on a fleet-wide GPS list, which runs trailer by trailer (by id), each
 * trailer's fixes ascending by time: the trailer, then the fix's own key.
 */
export interface FleetTimeKey extends TimeKey {
  trailerId: string;
}

/** A telemetry record with its keyset position. */
export interface Sequenced<T, Key extends TimeKey = TimeKey> {
  key: Key;
  record: T;
}

export interface NewPartner {
  id: string;
  name: string;
  product: string;
  keyHash: string;
  createdAt: number;
}

export interface NewCustomer {
  id: string;
  name: string;
  keyHash: string;
  createdAt: number;
}

export interface NewTrailer {
  id: string;
  fleetId: number | null;
  vin: string;
  unitId: string | null;
  createdAt: number;
}

export interface NewDevice {
  id: string;
  trailerId: string;
  kind: string;
  serial: string;
  position: string | null;
  createdAt: number;
}

export interface NewCargosafeUnit {
  id: string;
  trailerId: string;
  serial: string;
  createdAt: number;
}

/**
 * A persisted JWT signing key and where it is in its life: current (signing) until a newer key is
 * promoted, then retired (still verifying the tokens it signed until they expire), or revoked (it
 * verifies nothing any more).
 */
export interface StoredSigningKey {
  kid: string;
  alg: 'RS256' | 'ES256';
  /** The private key as PKCS#8 PEM; null when it is kept outside the store (`--signing-key-file`). */
  privateKeyPem: string | null;
  /** The public key as SPKI PEM; stored when `privateKeyPem` is null (so every process can verify), else may be omitted. */
  publicKeyPem?: string | null;
  createdAt: number;
  /** When a newer key took over signing; null or absent while the key is current. */
  retiredAt?: number | null;
  /** When the key was revoked; null or absent while it verifies. */
  revokedAt?: number | null;
}

export interface PrincipalStore {
  createPartner(input: NewPartner): Promise<Partner>;
  createCustomer(input: NewCustomer): Promise<Customer>;
  /** The principal of this audience whose current key hashes to `keyHash`, or null. */
  findPrincipalByKeyHash(audience: Audience, keyHash: string): Promise<Principal | null>;
  getPrincipal(audience: Audience, id: string): Promise<Principal | null>;
  /**
   * Replaces the principal's key hash and increments its key version atomically — only while the
   * version is still `expectedVersion`, so of two concurrent rotations with the same token exactly
   * one wins. Answers the new key version, or null when there is no such principal or its version
   * has moved on.
   */
  rotateKey(audience: Audience, id: string, newKeyHash: string, rotatedAt: number, expectedVersion: number): Promise<number | null>;
}

export interface SecretStore {
  /** Every signing key ever saved, oldest first. */
  listSigningKeys(): Promise<StoredSigningKey[]>;
  /** Saves a key unless one with the same kid exists. */
  saveSigningKey(key: StoredSigningKey): Promise<void>;
  /**
   * Makes `key` the one that signs: saves it and retires at `at` every other key that is not retired
   * yet, in one transaction (a rotation half done would leave two keys signing). When a key with its
   * kid exists already nothing changes: a retired or revoked key is never brought back.
   */
  promoteSigningKey(key: StoredSigningKey, at: number): Promise<void>;
  /** Revokes at `at` every retired key not revoked yet; answers their kids. The current key stays. */
  revokeRetiredSigningKeys(at: number): Promise<string[]>;
  /**
   * Answers the secret stored under `name`, storing `candidate` first if there is none. Several
   * processes racing here all get the same value (the first one stored).
   */
  getOrCreateSecret(name: string, candidate: string): Promise<string>;
}

/** One change of a fleet import (`AdminService.importTrailers`), as planned against the store. */
export type TrailerImportChange =
  /** A VIN the store does not know: a new trailer in the fleet. */
  | { kind: 'create'; id: string; vin: string; unitId: string | null; active: boolean }
  /** A trailer intake created unassigned, taken into the fleet: only while it is still unassigned. */
  | { kind: 'assign'; trailerId: string; unitId: string | null; active: boolean }
  /** A trailer of the fleet whose unit id or active flag the file changes: only while it is still in the fleet. */
  | { kind: 'update'; trailerId: string; unitId: string | null; active: boolean };

/** Operator-side writes: provisioning fleets and trailers, activating and deactivating. */
export interface FleetAdminStore {
  createFleet(input: { customerId: string; name: string; createdAt: number }): Promise<Fleet>;
  getFleetById(fleetId: number): Promise<Fleet | null>;
  findTrailerByVin(vin: string): Promise<Trailer | null>;
  /** Inserts a trailer; throws `TrailwireError('conflict')` when the VIN already exists. */
  createTrailer(input: NewTrailer): Promise<Trailer>;
  /**
   * Applies a fleet import's changes in one transaction, all or none, and notes each changed trailer
   * in the change feed (`noteTrailerChange`) at `at` in the same transaction. A change whose trailer
   * is no longer as planned (its VIN registered meanwhile, the trailer assigned or moved by another
   * command) is a `conflict`, a fleet that does not exist `not_found`; either way nothing is applied.
   */
  importTrailers(fleetId: number, changes: readonly TrailerImportChange[], at: number): Promise<void>;
  /** Assigns an existing (typically unassigned) trailer to a fleet. */
  assignTrailer(trailerId: string, fleetId: number, unitId: string | null): Promise<Trailer>;
  setTrailerActive(trailerId: string, active: boolean): Promise<boolean>;
  /**
   * Switches a device's operator flag and, in the same transaction, recounts its trailer's device
   * counts and status (`at` becomes the status date if the name changes), so a switched-off faulted
   * device stops faulting its trailer at once. Answers the trailer after the change, or null when
   * there is no such device.
   */
  setDeviceActive(deviceId: string, active: boolean, at: number): Promise<Trailer | null>;
}

/** One operator change of a trailer, as the change feed tells it: the trailer and its fleet as they are now. */
export interface TrailerChange {
  /** The change's place in the feed: increasing, in commit order. */
  seq: number;
  trailer: Trailer;
  fleet: Fleet | null;
}

/** How long the change feed keeps a note: far longer than any serving process takes to read it. */
export const TRAILER_CHANGE_RETENTION_MS = 24 * 60 * 60 * 1000;

/**
 * The operator's changes of trailers (status, fleet, active flag), recorded in the store so that
 * every process sharing it hears of them — a `trailwire` command in one process, the LiveFeed
 * subscribers in another (`core/trailer-changes.ts`). Notes are kept a day.
 */
export interface TrailerChangeStore {
  /** Records that the trailer changed at `at`; drops notes older than `TRAILER_CHANGE_RETENTION_MS` before `at`. */
  noteTrailerChange(trailerId: string, at: number): Promise<void>;
  /** The `seq` of the latest note, 0 when there is none. */
  latestTrailerChange(): Promise<number>;
  /** Notes after `afterSeq`, oldest first, at most `limit`; a note of a trailer that is gone is left out. */
  trailerChangesAfter(afterSeq: number, limit: number): Promise<TrailerChange[]>;
}

/** A customer's trust in a partner (contract 4, "Partner grants"). */
export interface PartnerGrant {
  customerId: string;
  partnerId: string;
  /** When the grant was added (epoch ms). */
  createdAt: number;
}

/** Which grants `listPartnerGrants` answers: one customer's, one partner's, both (one grant or none), or every grant. */
export interface PartnerGrantQuery {
  customerId?: string;
  partnerId?: string;
}

/**
 * The operator's overrides of one partner's intake settings (contract 4): its budget of intake
 * requests per window and its cap on new unassigned VINs per day. A null field keeps the server's
 * default.
 */
export interface PartnerIntakeLimits {
  partnerId: string;
  intake: { requests: number; windowSeconds: number } | null;
  newVinsPerDay: number | null;
  /** When the overrides were last set (epoch ms). */
  updatedAt: number;
}

/**
 * What a partner may send, as the operator set it: the customers' grants and the per-partner
 * overrides. Kept in the store so that every process sharing it (a `trailwire grants add` beside a
 * `serve`) sees the same; serving processes cache it briefly (`core/partner-intake-rules.ts`).
 */
export interface PartnerPolicyStore {
  /**
   * Records that `customerId` grants `partnerId`. Answers false when the grant existed already (it is
   * left as it was); throws `not_found` when the customer or the partner does not exist.
   */
  addPartnerGrant(grant: PartnerGrant): Promise<boolean>;
  /** Removes the grant; answers false when there was none. */
  removePartnerGrant(customerId: string, partnerId: string): Promise<boolean>;
  /** The grants the query names, ordered by customer id, then partner id. Grants are few: a list, not pages. */
  listPartnerGrants(query: PartnerGrantQuery): Promise<PartnerGrant[]>;
  /**
   * Sets the partner's overrides (replacing earlier ones); with both `intake` and `newVinsPerDay`
   * null the partner goes back to the defaults. Throws `not_found` when there is no such partner.
   */
  setPartnerIntakeLimits(limits: PartnerIntakeLimits): Promise<void>;
  /** The partner's overrides, or null when it has none. */
  getPartnerIntakeLimits(partnerId: string): Promise<PartnerIntakeLimits | null>;
  /** Who owns the trailer of `vin`, as intake's grant check needs it: one read, however the trailer is held. */
  vinOwner(vin: string): Promise<VinOwner>;
}

/** Who owns a VIN, as intake needs to know it. */
export interface VinOwner {
  /** Whether the store has a trailer of this VIN (registered or unassigned). */
  known: boolean;
  /** The customer whose fleet holds the trailer; null while it is unknown or unassigned. */
  customerId: string | null;
}

/** Customer-scoped reads: each answers only what `customerId` owns. */
export interface FleetReadStore {
  listFleets(customerId: string, page: IdPageQuery<number>): Promise<Fleet[]>;
  getFleet(customerId: string, fleetId: number): Promise<Fleet | null>;
  listTrailers(customerId: string, fleetId: number, page: IdPageQuery & ActiveFilter): Promise<Trailer[]>;
  getTrailer(customerId: string, trailerId: string): Promise<Trailer | null>;
  listGps(customerId: string, trailerId: string, page: TimePageQuery): Promise<Sequenced<GpsFix>[]>;
  listDevices(customerId: string, trailerId: string, page: IdPageQuery & ActiveFilter): Promise<Device[]>;
  /**
   * One device. Pass the same `staleBefore` as the device lists so that its `active` field agrees with
   * `activeOnly` there; without it, only the operator flag decides `active`.
   */
  getDevice(customerId: string, deviceId: string, staleBefore?: number): Promise<Device | null>;
  listDeviceReadings(customerId: string, deviceId: string, page: TimePageQuery): Promise<Sequenced<DeviceReading>[]>;
  listCargosafe(customerId: string, page: IdPageQuery): Promise<CargosafeUnit[]>;
  getCargosafe(customerId: string, unitId: string): Promise<CargosafeUnit | null>;
  listCargosafeReadings(customerId: string, unitId: string, page: TimePageQuery): Promise<Sequenced<CargosafeReading>[]>;
  /**
   * The first trailer of the customer's fleet, by id after `afterTrailerId` ('' = from the first),
   * that has a GPS fix with `from <= timestamp < to`; null when none is left. The fleet-wide GPS list
   * reads trailer by trailer with it and `listGps`, so each step is one index range.
   */
  nextFleetTrailerWithGps(customerId: string, fleetId: number, afterTrailerId: string, range: { from: number; to: number }): Promise<Trailer | null>;
}

/** Which trailers the operator's trailer list holds. */
export type TrailerScope =
  | { kind: 'all' }
  | { kind: 'fleet'; fleetId: number }
  /** The VINs intake met before an operator registered them (contract 4): no fleet yet. */
  | { kind: 'unassigned' };

/** A trailer as the operator's list shows it: the record, and when it last reported anything. */
export interface OperatorTrailer extends Trailer {
  /** The newest timestamp its GPS, devices or cargosafe units reported (epoch ms); null if never. */
  lastSeenAt: number | null;
}

/**
 * The operator's reads (the `trailwire ... list` commands): every customer's records, unlike the
 * customer-scoped `FleetReadStore`, so only the operator's own tools call it — never a transport a
 * customer or partner reaches. Lists are keyset pages by id, as everywhere in the store.
 */
export interface OperatorReadStore {
  listCustomers(page: IdPageQuery): Promise<Customer[]>;
  listPartners(page: IdPageQuery): Promise<Partner[]>;
  /** Every fleet, or only those of `customerId`. */
  listAllFleets(query: IdPageQuery<number> & { customerId?: string }): Promise<Fleet[]>;
  /** Every trailer, those of one fleet, or the unassigned ones. */
  listAllTrailers(query: IdPageQuery & { scope: TrailerScope }): Promise<OperatorTrailer[]>;
  /** One trailer by id, whoever owns it (or none does); null when there is no such trailer. */
  getAnyTrailer(trailerId: string): Promise<OperatorTrailer | null>;
  /** A trailer's devices; `active` is the operator flag alone (staleness is the read API's view). */
  listTrailerDevices(trailerId: string, page: IdPageQuery): Promise<Device[]>;
  /** A trailer's GPS history, whoever owns it — also what intake recorded while it was unassigned. */
  listTrailerGps(trailerId: string, page: TimePageQuery): Promise<Sequenced<GpsFix>[]>;
}

/**
 * The canonical writes of intake payloads (or of demo data). For each batch item the trailer is
 * found by VIN (created unassigned when unknown), GPS fixes are stored and the latest fix moves,
 * devices and cargosafe units are created on first sight, readings are stored, device states are
 * updated, and the trailer's counts and status are recomputed with `deriveTrailerStatus`.
 *
 * Rules every implementation keeps (contract 4):
 * - Readings are unique per (source, timestamp). A second reading of one source at the same instant
 *   replaces the first — last received wins, like a correction — so an identical repeat (a retry
 *   after a crash) changes nothing.
 * - A latest state (the trailer's fix, a device's state, a unit's latest reading) moves to a reading
 *   at or after its own time, never back; and never to a reading dated more than
 *   `MAX_READING_LEAD_MS` after the item's `at`, so a device with a wrong clock cannot freeze it.
 * - The webhook events of the write (`webhookEventsOf`, `core/webhook-events.ts`) go to the outbox of
 *   every endpoint of the trailer's customer that asks for them, in the write's own transaction
 *   (contract 14: a crash after the write cannot lose them).
 */
export interface TelemetryWriteStore {
  /** One item, in one transaction. */
  applyTelemetry(item: TelemetryBatch): Promise<AppliedTelemetry>;
  /**
   * Items of many VINs (each VIN's in the order given, as if applied one after another), all in
   * one transaction: all written, or none when it throws. Answers each touched trailer's state
   * after the whole batch, by VIN.
   */
  applyTelemetryBatch(items: readonly TelemetryBatch[]): Promise<Map<string, AppliedTelemetry>>;
}

/** One payload's canonical telemetry for one VIN. */
export interface TelemetryBatch {
  vin: string;
  /** Processing time (epoch ms): the status date when the status changes, and creation times. */
  at: number;
  telemetry: CanonicalTelemetry;
}

export interface AppliedTelemetry {
  /** The trailer after the write. */
  trailer: Trailer;
  /** The trailer's fleet, or null while it is unassigned. */
  fleet: Fleet | null;
  /** Whether the trailer was created by this write (an unknown VIN). */
  createdTrailer: boolean;
  /** Whether the write moved the trailer's status to another name (a `trailer.status_changed` webhook event). */
  statusChanged?: boolean;
}

/** Everything a Trailwire process needs from its store. */
export interface TrailwireStore
  extends PrincipalStore,
    SecretStore,
    FleetAdminStore,
    TrailerChangeStore,
    PartnerPolicyStore,
    FleetReadStore,
    OperatorReadStore,
    TelemetryWriteStore {
  /** The customers' webhook endpoints, their outbox and deliveries (contract 14). */
  readonly webhooks: WebhookStore;
  /** Answers when the store can serve queries (for `/readyz`); throws otherwise. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** The events a webhook endpoint may ask for (contract 14). */
export const WEBHOOK_EVENT_TYPES = ['trailer.updated', 'trailer.status_changed'] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** `active`: delivering; `failing`: a delivery was refused for the whole retry period, nothing is sent until resumed. */
export type WebhookEndpointStatus = 'active' | 'failing';

/** A customer's webhook endpoint, without its signing secret. */
export interface WebhookEndpoint {
  id: string;
  customerId: string;
  url: string;
  events: WebhookEventType[];
  /** The fleets whose trailers it hears of; null: all of the customer's. */
  fleetIds: number[] | null;
  status: WebhookEndpointStatus;
  createdAt: number;
  /** When it became `failing`; null while active. */
  failingSince: number | null;
}

export interface NewWebhookEndpoint extends Omit<WebhookEndpoint, 'status' | 'failingSince'> {
  /** The `whsec_` secret deliveries are signed with (kept: the signature needs it). */
  secret: string;
}

/** One POST to an endpoint (its body holds up to `maxEvents` events), as the deliveries list shows it. */
export interface WebhookDelivery {
  /** The `webhook-id` header: the same on every attempt. */
  id: string;
  endpointId: string;
  createdAt: number;
  eventCount: number;
  state: 'pending' | 'delivered';
  attempts: number;
  /** When the next attempt is due; null once delivered, or while the endpoint is failing. */
  nextAttemptAt: number | null;
  lastAttemptAt: number | null;
  /** The HTTP status of the last attempt; null when it got none (refused, timed out). */
  lastStatus: number | null;
  lastError: string | null;
  deliveredAt: number | null;
}

/** An endpoint the deliverer leased, with what a delivery to it needs. */
export interface WebhookTarget {
  id: string;
  customerId: string;
  url: string;
  secret: string;
}

/** A delivery to send: its id, its body (fixed when it was formed, so a retry sends the same bytes), its attempts so far. */
export interface WebhookSend {
  id: string;
  body: string;
  eventCount: number;
  attempts: number;
  /** When it was formed: the retry period counts from here (or from a resume). */
  createdAt: number;
}

/** How `takeWebhookDelivery` forms a delivery from the outbox. */
export interface WebhookBatching {
  /** Events per delivery, at most. */
  maxEvents: number;
  /** A delivery of fewer events is formed once its oldest event has waited this long (ms). */
  lingerMs: number;
  /** The new delivery's id. */
  newId: () => string;
}

/** What an attempt came to. */
export type WebhookAttemptOutcome =
  | { kind: 'delivered'; at: number; status: number }
  | { kind: 'retry'; at: number; status: number | null; error: string; nextAttemptAt: number }
  /** Refused for the whole retry period: the endpoint becomes `failing`, the delivery stays pending. */
  | { kind: 'failing'; at: number; status: number | null; error: string };

/**
 * Webhook endpoints, their outbox and their deliveries (contract 14). The outbox is filled by the
 * telemetry write itself (`TelemetryWriteStore`: same transaction, so a crash loses nothing); the
 * deliverer (`core/webhook-deliverer.ts`) leases endpoints with due work, one process each, forms a
 * delivery from the oldest events of one, sends it, and settles it. An endpoint has at most one
 * pending delivery, so its events (and each trailer's) go out in order.
 */
export interface WebhookStore {
  /** Saves the endpoint unless its customer has `cap` endpoints already (null then), atomically. */
  createWebhookEndpoint(input: NewWebhookEndpoint, cap: number): Promise<WebhookEndpoint | null>;
  /** The customer's endpoints, ordered by id. */
  listWebhookEndpoints(customerId: string, page: IdPageQuery): Promise<WebhookEndpoint[]>;
  getWebhookEndpoint(customerId: string, endpointId: string): Promise<WebhookEndpoint | null>;
  /** The endpoint with its secret, for a test delivery; null when the customer has no such endpoint. */
  getWebhookTarget(customerId: string, endpointId: string): Promise<WebhookTarget | null>;
  /** Deletes the endpoint with its outbox and deliveries; false when the customer has no such endpoint. */
  deleteWebhookEndpoint(customerId: string, endpointId: string): Promise<boolean>;
  /** The endpoint's deliveries, ordered by id (oldest first); [] when the customer has no such endpoint. */
  listWebhookDeliveries(customerId: string, endpointId: string, page: IdPageQuery): Promise<WebhookDelivery[]>;
  /**
   * Makes a failing endpoint active again at `at`: its pending delivery is due at once and its retry
   * period starts again. Answers the endpoint, or null when the customer has no such endpoint.
   */
  resumeWebhookEndpoint(customerId: string, endpointId: string, at: number): Promise<WebhookEndpoint | null>;
  /**
   * Leases for `leaseMs` up to `limit` active endpoints that have due work (a pending delivery due,
   * or outbox events `batching` would form a delivery of) and no live lease, the least recently
   * leased first. While the lease lasts no other caller gets them.
   */
  claimWebhookEndpoints(owner: string, now: number, leaseMs: number, limit: number, batching: Omit<WebhookBatching, 'newId'>): Promise<WebhookTarget[]>;
  /**
   * The endpoint's pending delivery when it is due; else, when there is none, a new one formed from
   * its oldest outbox events (removed from the outbox in the same transaction); else null.
   */
  takeWebhookDelivery(endpointId: string, now: number, batching: WebhookBatching): Promise<WebhookSend | null>;
  /** Records an attempt of a delivery (and, for `failing`, the endpoint's new status). */
  settleWebhookDelivery(endpointId: string, deliveryId: string, outcome: WebhookAttemptOutcome): Promise<void>;
  /** Ends `owner`'s lease of the endpoint. */
  releaseWebhookEndpoint(endpointId: string, owner: string): Promise<void>;
  /** Deletes delivered deliveries older than `before`, at most `limit`; answers how many. */
  purgeWebhookDeliveries(before: number, limit: number): Promise<number>;
}

/** The calls of `WebhookStore` the deliverer makes: what a backend may run elsewhere (SQLite: on its processing thread). */
export const WEBHOOK_DELIVERY_CALLS = ['claimWebhookEndpoints', 'takeWebhookDelivery', 'settleWebhookDelivery', 'releaseWebhookEndpoint', 'purgeWebhookDeliveries'] as const;

/** Where the deliverer leases endpoints, forms deliveries and records their outcomes. */
export type WebhookDeliveryStore = Pick<WebhookStore, (typeof WEBHOOK_DELIVERY_CALLS)[number]>;
