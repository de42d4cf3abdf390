/**
 * `trailwire/core` (also the package root, `trailwire`): the framework-free core. Start with
 * `createTrailwire({ store })`; the rest is what an integrator, a product author or a backend author
 * needs to call it, extend it, or implement one of its seams (store, window counter, intake queue,
 * live bus, rotation feed). Nothing here imports Koa, gRPC or a database driver. What is not exported here is
 * internal and may change without notice; `test/public-api/` pins what is.
 */

// ── Composition ──────────────────────────────────────────────────────────────────────────────────
/**
 * `createTrailwire(options)` assembles the services over one store (`Trailwire`); `TrailwireOptions`
 * documents every option and its default; `DEFAULT_LIMITS` are the auth/rotate/read limits
 * (`LimitSettings`, each a `LimitSetting` of `requests` per `windowSeconds`).
 */
export { createTrailwire, DEFAULT_LIMITS, type LimitSetting, type LimitSettings, type SigningKeysOptions, type Trailwire, type TrailwireOptions } from './trailwire.ts';

// ── Errors (contract 6) ──────────────────────────────────────────────────────────────────────────
/**
 * `TrailwireError` is the one error class, with a stable `code` (`ErrorCode`, listed in
 * `ERROR_CODES`, each described in `ERROR_DESCRIPTIONS`, mapped to HTTP by `HTTP_STATUS_BY_CODE`
 * and to a problem `type` URI by `problemType`). `isTrailwireError` recognises one from any copy of
 * the package; `invalidField` builds a `validation_failed` error for one field (`FieldError`).
 */
export { ERROR_CODES, ERROR_DESCRIPTIONS, HTTP_STATUS_BY_CODE, invalidField, isTrailwireError, problemType, TrailwireError } from './errors.ts';
export type { ErrorCode, FieldError, TrailwireErrorOptions } from './errors.ts';

// ── Time and ids ─────────────────────────────────────────────────────────────────────────────────
/** Injected time and ids: `systemClock` and `randomIds` are the defaults; `ManualClock` is moved by hand in tests. */
export { type Clock, type IdGenerator, ManualClock, randomIds, systemClock } from './clock.ts';

// ── Domain model and canonical telemetry ─────────────────────────────────────────────────────────
/**
 * The records the read API serves (`Fleet`, `Trailer`, `Device`, `GpsFix`, `Heading`, ...) and
 * `HEADINGS`, the eight cardinal headings in order.
 */
export type * from './model.ts';
export { HEADINGS } from './model.ts';
/**
 * What a product's transform answers: `CanonicalTelemetry` of GPS fixes, device and cargosafe
 * readings. `MAX_READING_LEAD_MS` (5 minutes) is how far after the server's clock a reading may be dated.
 */
export type * from './canonical.ts';
export { MAX_READING_LEAD_MS } from './canonical.ts';

// ── Products (contract 4 and 10) ─────────────────────────────────────────────────────────────────
/**
 * Writing a product: `export default defineProduct<Payload>({ name, description, schema, limit,
 * examples, transform, validate?, readingTimes? })` (`ProductDefinition`, `ProductSchema`,
 * `IntakeLimit`, `ReadingTime`) answers a
 * checked, frozen `Product`; see docs/writing-a-product.md. `checkCanonicalTelemetry` lists what is
 * wrong with a transform's output; `EXAMPLE_VIN` and `EXAMPLE_RECEIVED_AT` are the inputs
 * `defineProduct` and the conformance suite run the examples with; `PRODUCT_NAME_PATTERN` and
 * `MAX_WINDOW_SECONDS` bound names and limit windows; `TEXT_LINE_PATTERN` is the `pattern` of a
 * free-text field (no control characters). Installing products:
 * `createProductRegistry` / `ProductRegistry` (what `Trailwire.products` is), `loadProductModule`
 * (a product module by path or package name), `isProduct`.
 */
export { checkCanonicalTelemetry } from './canonical.ts';
export {
  createProductRegistry,
  defineProduct,
  EXAMPLE_RECEIVED_AT,
  EXAMPLE_VIN,
  isProduct,
  loadProductModule,
  MAX_WINDOW_SECONDS,
  PRODUCT_NAME_PATTERN,
  ProductRegistry,
  TEXT_LINE_PATTERN,
  type IntakeLimit,
  type LoadProductModuleOptions,
  type Product,
  type ProductDefinition,
  type ProductRegistryOptions,
  type ProductSchema,
  type ReadingTime,
} from './products.ts';
/**
 * Helpers a transform may use: `parseRfc3339` turns an RFC 3339 `date-time` (the strict format product
 * schemas validate with `format: 'date-time'`) into epoch ms; `cardinalHeading` turns degrees into one
 * of `HEADINGS`; `JsonSchema` / `JsonSchemaObject` type schema fragments; `JSON_SCHEMA_DIALECT` is
 * the only `$schema` a product schema may name (draft 2020-12).
 */
export { JSON_SCHEMA_DIALECT, parseRfc3339, type JsonSchema, type JsonSchemaObject } from './json-schema.ts';
export { cardinalHeading } from './canonical.ts';
/** VINs (contract 2): `parseVin` normalises and checks one (400 on a bad one), `vinCheckDigit` and `withCheckDigit` compute position 9. */
export { parseVin, vinCheckDigit, withCheckDigit } from './vin.ts';

// ── Services (what `createTrailwire` assembles; transports call them) ────────────────────────────
/**
 * Tokens and keys: `TokenService` mints and verifies JWTs (`AccessClaims`, `IssuedToken`,
 * `TokenServiceOptions`), `requireAudience` refuses a token of the other audience, `productOfScope`
 * reads a partner token's product; `SigningKeyRing` holds the persisted signing keys and the JWKS
 * (`SigningAlgorithm`: RS256 or ES256); `AuthService` issues, authenticates and rotates API keys
 * (`RotationListener` hears rotations).
 */
export { type AccessClaims, type IssuedToken, productOfScope, requireAudience, TokenService, type TokenServiceOptions } from './tokens.ts';
export { SigningKeyRing, type SigningAlgorithm, type SigningKeyStatus } from './signing-keys.ts';
export { AuthService, type RotationListener } from './auth-service.ts';
/** The customer read API (`ReadService`, `ReadServiceOptions`, `QueryParams`) and the operator's writes (`AdminService`: fleets, trailers, activation). */
export { ReadService, type QueryParams, type ReadServiceOptions } from './read-service.ts';
export { AdminService } from './admin-service.ts';
/** Keyset paging: `CursorCodec` signs `next` tokens; a `Page` is `{ data, next? }` with `take` from 1 to `TAKE_MAX`, `TAKE_DEFAULT` by default. */
export { CursorCodec, type Page, TAKE_DEFAULT, TAKE_MAX } from './paging.ts';
/**
 * Partner intake: `IntakeService` is the accept path (`Accepted`; `IntakeStatusView` is what the
 * status endpoint shows, `IntakeStatusesView` what the bulk status read does), `IntakeWorker`
 * processes the queue (`IntakeWorkerOptions`, defaults in `DEFAULT_INTAKE_WORKER_OPTIONS`).
 */
export { IntakeService, type Accepted, type IntakeStatusesView, type IntakeStatusView } from './intake-service.ts';
export { DEFAULT_INTAKE_WORKER_OPTIONS, IntakeWorker, type IntakeWorkerOptions } from './intake-worker.ts';
/**
 * Live updates: `LiveHub` fans `LiveTrailerEvent`s out per customer to `LiveSink`s (a transport's
 * streams, each a `LiveSubscription`; `LiveHubOptions`, `LiveHubStats`).
 */
export { LiveHub, type LiveHubOptions, type LiveHubStats } from './live-hub.ts';
export type { LiveSink, LiveSubscription } from './live-subscriber.ts';
/** Trailer status (contract 4): `deriveTrailerStatus` applies the Faulted > Warning > OK rule and keeps `statusDate` while the name holds. */
export { deriveTrailerStatus, type TrailerStatus } from './trailer-status.ts';

// ── Seams a backend implements ───────────────────────────────────────────────────────────────────
/**
 * The store: `TrailwireStore` and the interfaces it is made of, with their query and row types
 * (every backend passes `test/conformance/store.ts`).
 */
export type * from './store.ts';
/**
 * Windowed limits: a backend implements the counting primitive `WindowCounter` (`MemoryWindowCounter`
 * is the in-process one, `FailoverWindowCounter` counts per process while a shared one is down); the
 * window maths stays in `FixedWindowLimiter` (`FixedWindowLimiterOptions`), which answers a `RateLimitState` (the RateLimit-* headers' data).
 */
export {
  FixedWindowLimiter,
  type FixedWindowLimiterOptions,
  DEFAULT_FAILOVER_RETRY_INTERVAL_MS,
  FailoverWindowCounter,
  type FailoverWindowCounterOptions,
  MemoryWindowCounter,
  type RateLimitState,
  type WindowCounter,
} from './rate-limit.ts';
/**
 * The durable intake queue: `IntakeQueue` (`NewIntake` in, `IntakeRecord`s out, `IntakeOutcome`s
 * settled, `EnqueueResult`), by role — `IntakeAcceptor`, `IntakeOperations`, `IntakeProcessing`
 * (what a worker needs; `ProcessableIntakeQueue` has every role) — a backend's front door
 * (`IntakeBackend`), its states `INTAKE_STATUSES` (`IntakeStatus`) and the idempotency window
 * `IDEMPOTENCY_WINDOW_MS`; every implementation passes `test/conformance/intake-queue.ts`.
 */
export {
  IDEMPOTENCY_WINDOW_MS,
  INTAKE_STATUSES,
  type EnqueueResult,
  type IntakeAcceptor,
  type IntakeBackend,
  type IntakeOperations,
  type IntakeOutcome,
  type IntakeProcessing,
  type IntakeQueue,
  type IntakeRecord,
  type IntakeStatus,
  type NewIntake,
  type ProcessableIntakeQueue,
} from './intake-queue.ts';
/**
 * The log part of the intake queue: `IntakeLog` (append a group, read a partition from a position,
 * commit a position, lease a partition), `LogPosition`, `LoggedIntake`, `PartitionLease`; every
 * implementation passes `test/conformance/intake-log.ts`.
 */
export type { IntakeLog, LoggedIntake, LogPosition, PartitionLease } from './intake-log.ts';
/**
 * The index part, for a log that lives in a log engine: `IntakeIndex` (idempotency keys, positions,
 * a row per payload a batch has been through), and `PartitionedIntakeQueue`, the `IntakeQueue` made
 * of an `IntakeLog` and an `IntakeIndex` (`PartitionedIntakeQueueOptions`).
 */
export type { IndexedIntake, IntakeIndex, KeyHolder, PartitionState } from './intake-index.ts';
export { PartitionedIntakeQueue, type PartitionedIntakeQueueOptions } from './partitioned-intake-queue.ts';
/** The publish/subscribe seam of cross-process notices: a `Channel` of messages (`ChannelListener`); the rotation feed is one. */
export type { Channel, ChannelListener } from './channel.ts';
/** Cross-process fan-out: a `LiveBus` (a channel of live updates per customer) carries events between hubs (`LiveBusListener`); `MemoryLiveBus` is the in-process default. */
export { type LiveBus, type LiveBusListener, type LiveTrailerEvent, MemoryLiveBus } from './live-bus.ts';
/**
 * Key rotations across processes: a `RotationFeed` carries `RotationNotice`s (`RotationNoticeListener`)
 * so every process sharing the store rejects tokens minted before a rotation and ends the customer's
 * streams; `createTrailwire`'s `rotations` option (`RotationOptions`) takes one, in-process by default.
 */
export type { RotationFeed, RotationNotice, RotationNoticeListener, RotationOptions } from './rotation-feed.ts';
