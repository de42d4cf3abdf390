/**
 * The one conformance suite every `TrailwireStore` must pass (STYLE.md "One conformance suite per
 * interface"), written against the interface only so that SQLite, PostgreSQL and any later backend run
 * the same cases: principals and key rotation; secrets and signing keys, including a race; fleet and
 * trailer provisioning, VIN conflicts and the assignment of a trailer that intake created unassigned;
 * customer isolation through every read method; keyset paging by id and by time, with concurrent inserts
 * between pages; and `applyTelemetry` (unassigned trailers, the latest fix, devices, states, counts,
 * status name and date, idempotent re-application, cargosafe units); and the partner policies (grants
 * and per-partner intake overrides).
 *
 * Each case opens its own store and every record it makes carries fresh ids, so a backend may hand out a
 * new database per case or one shared database. A backend's test file calls
 * `runStoreConformance({ name, openStore, skip })`; `skip` maps a case name to the reason it does not apply.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { type CanonicalCargosafeReading, type CanonicalDeviceReading, type CanonicalTelemetry, MAX_READING_LEAD_MS } from '../../core/canonical.ts';
import { TrailwireError } from '../../core/errors.ts';
import type { Customer, DeviceState, Fleet, GpsFix, Trailer } from '../../core/model.ts';
import type { AppliedTelemetry, TimeKey, TimePageQuery, TrailwireStore } from '../../core/store.ts';

export interface StoreConformanceOptions {
  /** Names the backend in the test report, e.g. `sqlite (temp file)`. */
  name: string;
  /** Opens a ready store; the case closes it. */
  openStore: () => Promise<TrailwireStore>;
  /** Cases that do not apply to this backend: case name -> reason. An unknown case name throws. */
  skip?: Partial<Record<string, string>>;
}

interface StoreCase {
  group: string;
  name: string;
  run: (store: TrailwireStore) => Promise<void>;
}

/** Registers the conformance cases with node:test. */
export function runStoreConformance(options: StoreConformanceOptions): void {
  const names = new Set(STORE_CASES.map((storeCase) => storeCase.name));
  const unknown = Object.keys(options.skip ?? {}).filter((name) => !names.has(name));
  if (unknown.length > 0) {
    throw new Error(`runStoreConformance(${options.name}): skip names unknown cases: ${unknown.join(', ')}`);
  }
  describe(`TrailwireStore conformance: ${options.name}`, () => {
    for (const group of new Set(STORE_CASES.map((storeCase) => storeCase.group))) {
      describe(group, () => {
        for (const storeCase of STORE_CASES.filter((candidate) => candidate.group === group)) {
          const reason = options.skip?.[storeCase.name];
          it(storeCase.name, reason === undefined ? {} : { skip: reason }, async () => {
            const store = await options.openStore();
            try {
              await storeCase.run(store);
            } finally {
              await store.close();
            }
          });
        }
      });
    }
  });
}

// --- fixtures -------------------------------------------------------------------------------------

const T0 = Date.UTC(2026, 0, 1);
const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const ALL_TIME: Omit<TimePageQuery, 'limit'> = { from: 0, to: T0 + 365 * DAY };
const VIN_ALPHABET = '0123456789ABCDEFGHJKLMNPRSTUVWXYZ';
/** Ids compare by UTF-16 code unit (byte order for ASCII; `COLLATE "C"` in PostgreSQL). */
const byCodeUnit = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** A unique, never all-digit id; `label` keeps test failures readable. */
const uid = (label: string): string => `${label}-${randomUUID()}`;

function vin(): string {
  let text = '';
  for (let i = 0; i < 17; i++) text += VIN_ALPHABET[Math.floor(Math.random() * VIN_ALPHABET.length)];
  return text;
}

const OK: DeviceState = { isWarning: false, isFault: false };
const WARNING: DeviceState = { isWarning: true, isFault: false };
const FAULT: DeviceState = { isWarning: false, isFault: true };
/** A device that reports both: it counts as faulted only. */
const WARNING_AND_FAULT: DeviceState = { isWarning: true, isFault: true };

function fix(timestamp: number, lat = 45.5): GpsFix {
  return { timestamp, lat, long: -122.6, speed: 55, heading: 'NE' };
}

function tire(serial: string, timestamp: number, state: DeviceState = OK, position: string | null = 'L1'): CanonicalDeviceReading {
  return { kind: 'tpms', serial, position, timestamp, metrics: { pressurePsi: 100, temperatureC: 30 }, state };
}

function cargo(serial: string, timestamp: number, loadPercent = 40): CanonicalCargosafeReading {
  return { serial, timestamp, doorOpen: false, loadPercent, temperatureC: 4, humidityPercent: 55 };
}

function telemetry(parts: Partial<CanonicalTelemetry>): CanonicalTelemetry {
  return { gps: [], devices: [], cargosafe: [], ...parts };
}

function newCustomer(store: TrailwireStore, createdAt = T0): Promise<Customer> {
  return store.createCustomer({ id: uid('customer'), name: 'Acme Haulage', keyHash: uid('hash'), createdAt });
}

function newFleet(store: TrailwireStore, customerId: string, name = 'North'): Promise<Fleet> {
  return store.createFleet({ customerId, name, createdAt: T0 });
}

function newTrailer(store: TrailwireStore, fleetId: number | null, id = uid('trailer')): Promise<Trailer> {
  return store.createTrailer({ id, fleetId, vin: vin(), unitId: null, createdAt: T0 });
}

/** A customer with one fleet and one trailer in it. */
async function customerWithTrailer(store: TrailwireStore) {
  const customer = await newCustomer(store);
  const fleet = await newFleet(store, customer.id);
  const trailer = await newTrailer(store, fleet.id);
  return { customer, fleet, trailer };
}

function apply(store: TrailwireStore, vinOf: string, at: number, parts: Partial<CanonicalTelemetry>): Promise<AppliedTelemetry> {
  return store.applyTelemetry({ vin: vinOf, at, telemetry: telemetry(parts) });
}

/** Follows id pages of `limit` rows until a short page, asserting that no page exceeds the limit. */
async function allIdPages<K extends string | number, T extends { id: K }>(
  limit: number,
  fetch: (afterId: K | undefined) => Promise<T[]>,
): Promise<T[]> {
  const rows: T[] = [];
  for (let afterId: K | undefined; ; ) {
    const page = await fetch(afterId);
    assert.ok(page.length <= limit, `a page holds at most ${limit} rows`);
    rows.push(...page);
    if (page.length < limit) return rows;
    afterId = page[page.length - 1]!.id;
  }
}

/** Follows time pages of `limit` rows until a short page. */
async function allTimePages<T>(
  limit: number,
  fetch: (after: TimeKey | undefined) => Promise<{ key: TimeKey; record: T }[]>,
): Promise<{ key: TimeKey; record: T }[]> {
  const rows: { key: TimeKey; record: T }[] = [];
  for (let after: TimeKey | undefined; ; ) {
    const page = await fetch(after);
    assert.ok(page.length <= limit, `a page holds at most ${limit} rows`);
    rows.push(...page);
    if (page.length < limit) return rows;
    after = page[page.length - 1]!.key;
  }
}

function assertKeysAscend(keys: TimeKey[]): void {
  for (let i = 1; i < keys.length; i++) {
    const [a, b] = [keys[i - 1]!, keys[i]!];
    assert.ok(a.timestamp < b.timestamp || (a.timestamp === b.timestamp && a.seq < b.seq), `key ${i} follows key ${i - 1}`);
  }
}

async function assertRejectsWith(promise: Promise<unknown>, code: TrailwireError['code']): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof TrailwireError, `a TrailwireError, got ${String(error)}`);
    assert.equal(error.code, code);
    return true;
  });
}

const idOf = <K>(row: { id: K }): K => row.id;
const timestampOf = (row: { record: { timestamp: number } }) => row.record.timestamp;

// --- cases ----------------------------------------------------------------------------------------

const STORE_CASES: StoreCase[] = [
  // principals --------------------------------------------------------------------------------------
  {
    group: 'principals',
    name: 'creates partners and customers and finds each by key hash in its own audience only',
    async run(store) {
      const partnerHash = uid('hash');
      const partner = await store.createPartner({ id: uid('partner'), name: 'Tiremetrics', product: 'tpms', keyHash: partnerHash, createdAt: T0 });
      assert.deepEqual(partner, { id: partner.id, name: 'Tiremetrics', product: 'tpms', keyVersion: 1, createdAt: T0, rotatedAt: null });
      const customerHash = uid('hash');
      const customer = await store.createCustomer({ id: uid('customer'), name: 'Acme', keyHash: customerHash, createdAt: T0 + 1 });
      assert.deepEqual(customer, { id: customer.id, name: 'Acme', keyVersion: 1, createdAt: T0 + 1, rotatedAt: null });

      assert.deepEqual(await store.findPrincipalByKeyHash('partners', partnerHash), { audience: 'partners', ...partner });
      assert.deepEqual(await store.findPrincipalByKeyHash('customers', customerHash), { audience: 'customers', ...customer });
      assert.equal(await store.findPrincipalByKeyHash('customers', partnerHash), null);
      assert.equal(await store.findPrincipalByKeyHash('partners', customerHash), null);
      assert.equal(await store.findPrincipalByKeyHash('partners', uid('hash')), null);

      assert.deepEqual(await store.getPrincipal('partners', partner.id), { audience: 'partners', ...partner });
      assert.deepEqual(await store.getPrincipal('customers', customer.id), { audience: 'customers', ...customer });
      assert.equal(await store.getPrincipal('customers', partner.id), null);
      assert.equal(await store.getPrincipal('partners', uid('partner')), null);
    },
  },
  {
    group: 'principals',
    name: 'rotateKey replaces the key hash and increments the key version',
    async run(store) {
      const oldHash = uid('hash');
      const partner = await store.createPartner({ id: uid('partner'), name: 'P', product: 'gps-basic', keyHash: oldHash, createdAt: T0 });
      const newHash = uid('hash');
      assert.equal(await store.rotateKey('partners', partner.id, newHash, T0 + HOUR, 1), 2);
      assert.equal(await store.findPrincipalByKeyHash('partners', oldHash), null, 'the old key no longer matches');
      assert.deepEqual(await store.findPrincipalByKeyHash('partners', newHash), {
        audience: 'partners',
        ...partner,
        keyVersion: 2,
        rotatedAt: T0 + HOUR,
      });
      assert.equal(await store.rotateKey('partners', partner.id, uid('hash'), T0 + 2 * HOUR, 2), 3);
      assert.equal((await store.getPrincipal('partners', partner.id))?.keyVersion, 3);

      const customer = await newCustomer(store);
      assert.equal(await store.rotateKey('customers', customer.id, uid('hash'), T0 + HOUR, 1), 2);
      assert.equal((await store.getPrincipal('customers', customer.id))?.rotatedAt, T0 + HOUR);
      assert.equal((await store.getPrincipal('partners', partner.id))?.keyVersion, 3, 'other principals are untouched');

      assert.equal(await store.rotateKey('customers', uid('customer'), uid('hash'), T0, 1), null, 'unknown principal');
      assert.equal(await store.rotateKey('customers', partner.id, uid('hash'), T0, 1), null, 'a partner id is no customer');
      assert.equal(await store.rotateKey('customers', customer.id, uid('hash'), T0 + HOUR, 1), null, 'a stale expected version loses');
      const racers = await Promise.all([store.rotateKey('customers', customer.id, uid('hash'), T0 + HOUR, 2), store.rotateKey('customers', customer.id, uid('hash'), T0 + HOUR, 2)]);
      assert.deepEqual(racers.sort(), [3, null], 'of two rotations from the same version exactly one wins');
    },
  },
  {
    group: 'principals',
    name: 'a key hash or id already used in an audience is a conflict',
    async run(store) {
      const hash = uid('hash');
      const first = await store.createCustomer({ id: uid('customer'), name: 'A', keyHash: hash, createdAt: T0 });
      await assertRejectsWith(store.createCustomer({ id: uid('customer'), name: 'B', keyHash: hash, createdAt: T0 }), 'conflict');
      await assertRejectsWith(store.createCustomer({ id: first.id, name: 'C', keyHash: uid('hash'), createdAt: T0 }), 'conflict');
      const partnerHash = uid('hash');
      await store.createPartner({ id: uid('partner'), name: 'P', product: 'tpms', keyHash: partnerHash, createdAt: T0 });
      await assertRejectsWith(
        store.createPartner({ id: uid('partner'), name: 'Q', product: 'tpms', keyHash: partnerHash, createdAt: T0 }),
        'conflict',
      );
      assert.equal((await store.findPrincipalByKeyHash('customers', hash))?.id, first.id, 'the first holder keeps its key');
    },
  },

  // secrets -----------------------------------------------------------------------------------------
  {
    group: 'secrets',
    name: 'getOrCreateSecret keeps the first value, also when two callers race',
    async run(store) {
      const name = uid('secret');
      const [a, b] = await Promise.all([store.getOrCreateSecret(name, 'candidate-a'), store.getOrCreateSecret(name, 'candidate-b')]);
      assert.equal(a, b, 'both racers get the same secret');
      assert.ok(a === 'candidate-a' || a === 'candidate-b');
      assert.equal(await store.getOrCreateSecret(name, 'candidate-c'), a, 'a later candidate is ignored');
      assert.equal(await store.getOrCreateSecret(uid('secret'), 'other'), 'other', 'names are independent');
    },
  },
  {
    group: 'secrets',
    name: 'signing keys are saved once per kid and listed oldest first',
    async run(store) {
      const [older, newer] = [uid('kid'), uid('kid')];
      await store.saveSigningKey({ kid: newer, alg: 'ES256', privateKeyPem: 'PEM-NEWER', createdAt: T0 + 1 });
      await store.saveSigningKey({ kid: older, alg: 'RS256', privateKeyPem: 'PEM-OLDER', createdAt: T0 });
      await store.saveSigningKey({ kid: older, alg: 'RS256', privateKeyPem: 'PEM-REPLACED', createdAt: T0 + 2 });
      const mine = (await store.listSigningKeys()).filter((key) => key.kid === older || key.kid === newer);
      const life = { publicKeyPem: null, retiredAt: null, revokedAt: null };
      assert.deepEqual(mine, [
        { kid: older, alg: 'RS256', privateKeyPem: 'PEM-OLDER', createdAt: T0, ...life },
        { kid: newer, alg: 'ES256', privateKeyPem: 'PEM-NEWER', createdAt: T0 + 1, ...life },
      ]);
    },
  },
  {
    group: 'secrets',
    name: 'promoting a signing key retires every other, once; revoking ends only the retired ones',
    async run(store) {
      const [first, second, third] = [uid('kid'), uid('kid'), uid('kid')];
      await store.saveSigningKey({ kid: first, alg: 'RS256', privateKeyPem: 'PEM-1', createdAt: T0 });
      await store.promoteSigningKey({ kid: second, alg: 'RS256', privateKeyPem: 'PEM-2', createdAt: T0 + MINUTE }, T0 + MINUTE);
      // A key kept outside the store: only its public key is stored.
      await store.promoteSigningKey({ kid: third, alg: 'ES256', privateKeyPem: null, publicKeyPem: 'PUBLIC-3', createdAt: T0 + HOUR }, T0 + HOUR);
      // Promoting a key that exists changes nothing: a retired key is never brought back.
      await store.promoteSigningKey({ kid: first, alg: 'RS256', privateKeyPem: 'PEM-1', createdAt: T0 }, T0 + DAY);
      const life = async () =>
        Object.fromEntries(
          (await store.listSigningKeys())
            .filter((key) => [first, second, third].includes(key.kid))
            .map((key) => [key.kid, { retiredAt: key.retiredAt, revokedAt: key.revokedAt, privateKeyPem: key.privateKeyPem, publicKeyPem: key.publicKeyPem }]),
        );
      assert.deepEqual(await life(), {
        [first]: { retiredAt: T0 + MINUTE, revokedAt: null, privateKeyPem: 'PEM-1', publicKeyPem: null },
        [second]: { retiredAt: T0 + HOUR, revokedAt: null, privateKeyPem: 'PEM-2', publicKeyPem: null },
        [third]: { retiredAt: null, revokedAt: null, privateKeyPem: null, publicKeyPem: 'PUBLIC-3' },
      });
      const revoked = await store.revokeRetiredSigningKeys(T0 + 2 * DAY);
      for (const kid of [first, second]) assert.ok(revoked.includes(kid), `${kid} was retired, so it is revoked`);
      assert.ok(!revoked.includes(third), 'the current key is not revoked');
      assert.deepEqual(await store.revokeRetiredSigningKeys(T0 + 3 * DAY), [], 'a revoked key is revoked once');
      assert.equal((await life())[first]!.revokedAt, T0 + 2 * DAY);
    },
  },

  // provisioning ------------------------------------------------------------------------------------
  {
    group: 'provisioning',
    name: 'createFleet gives distinct positive int32 ids that getFleetById finds',
    async run(store) {
      const customer = await newCustomer(store);
      const first = await newFleet(store, customer.id, 'North');
      const second = await newFleet(store, customer.id, 'South');
      for (const fleet of [first, second]) {
        assert.ok(Number.isInteger(fleet.id) && fleet.id >= 1 && fleet.id <= 2 ** 31 - 1, `fleet id ${fleet.id} is a positive int32`);
      }
      assert.notEqual(first.id, second.id);
      assert.deepEqual(second, { id: second.id, customerId: customer.id, name: 'South', createdAt: T0 });
      assert.deepEqual(await store.getFleetById(first.id), first);
      assert.equal(await store.getFleetById(2 ** 31 - 1), null);
    },
  },
  {
    group: 'provisioning',
    name: 'createFleet for an unknown customer is not_found',
    async run(store) {
      await assertRejectsWith(store.createFleet({ customerId: uid('customer'), name: 'Ghost', createdAt: T0 }), 'not_found');
    },
  },
  {
    group: 'provisioning',
    name: 'createTrailer stores an OK, active trailer; a known VIN is a conflict',
    async run(store) {
      const customer = await newCustomer(store);
      const fleet = await newFleet(store, customer.id);
      const input = { id: uid('trailer'), fleetId: fleet.id, vin: vin(), unitId: 'UNIT-7', createdAt: T0 + MINUTE };
      const trailer = await store.createTrailer(input);
      assert.deepEqual(trailer, {
        id: input.id,
        fleetId: fleet.id,
        unitId: 'UNIT-7',
        vin: input.vin,
        active: true,
        statusName: 'OK',
        statusDate: T0 + MINUTE,
        faultedDevices: 0,
        warningDevices: 0,
        telemetry: null,
        createdAt: T0 + MINUTE,
      });
      assert.deepEqual(await store.findTrailerByVin(input.vin), trailer);
      assert.equal(await store.findTrailerByVin(vin()), null);
      await assertRejectsWith(store.createTrailer({ ...input, id: uid('trailer') }), 'conflict');
      await assertRejectsWith(store.createTrailer({ ...input, id: uid('trailer'), vin: vin(), fleetId: 2 ** 31 - 1 }), 'not_found');
      assert.deepEqual(await store.getTrailer(customer.id, trailer.id), trailer, 'the conflict changed nothing');
    },
  },
  {
    group: 'provisioning',
    name: 'assignTrailer brings an unassigned trailer and all its data into a fleet',
    async run(store) {
      const customer = await newCustomer(store);
      const fleet = await newFleet(store, customer.id);
      const unknownVin = vin();
      const applied = await apply(store, unknownVin, T0, {
        gps: [fix(T0 - MINUTE)],
        devices: [tire('S1', T0 - MINUTE, WARNING)],
        cargosafe: [cargo('C1', T0 - MINUTE)],
      });
      const trailerId = applied.trailer.id;
      assert.equal(await store.getTrailer(customer.id, trailerId), null, 'invisible while unassigned');
      assert.deepEqual(await store.listCargosafe(customer.id, { limit: 10 }), []);

      const assigned = await store.assignTrailer(trailerId, fleet.id, 'UNIT-9');
      assert.deepEqual(assigned, { ...applied.trailer, fleetId: fleet.id, unitId: 'UNIT-9' });
      assert.deepEqual(await store.getTrailer(customer.id, trailerId), assigned);
      assert.deepEqual((await store.listTrailers(customer.id, fleet.id, { limit: 10, activeOnly: false, staleBefore: 0 })).map(idOf), [trailerId]);
      assert.deepEqual((await store.listGps(customer.id, trailerId, { ...ALL_TIME, limit: 10 })).map(timestampOf), [T0 - MINUTE]);
      const [device] = await store.listDevices(customer.id, trailerId, { limit: 10, activeOnly: false, staleBefore: 0 });
      assert.equal(device?.serial, 'S1');
      assert.equal((await store.listDeviceReadings(customer.id, device.id, { ...ALL_TIME, limit: 10 })).length, 1);
      const units = await store.listCargosafe(customer.id, { limit: 10 });
      assert.deepEqual(units.map((unit) => unit.serial), ['C1'], "the trailer's cargosafe unit follows it into the fleet");
      assert.equal((await store.getCargosafe(customer.id, units[0]!.id))?.trailerId, trailerId);
      assert.equal((await store.listCargosafeReadings(customer.id, units[0]!.id, { ...ALL_TIME, limit: 10 })).length, 1);

      const applyAgain = await apply(store, unknownVin, T0 + MINUTE, { gps: [fix(T0)] });
      assert.equal(applyAgain.createdTrailer, false);
      assert.deepEqual(applyAgain.fleet, fleet, 'applyTelemetry answers the fleet once assigned');

      await assertRejectsWith(store.assignTrailer(uid('trailer'), fleet.id, null), 'not_found');
      await assertRejectsWith(store.assignTrailer(trailerId, 2 ** 31 - 1, null), 'not_found');
    },
  },
  {
    group: 'provisioning',
    name: 'importTrailers creates, assigns and updates in one transaction, noting each; a change no longer as planned applies nothing',
    async run(store) {
      const customer = await newCustomer(store);
      const fleet = await newFleet(store, customer.id);
      const other = await newFleet(store, customer.id, 'South');
      const kept = await store.createTrailer({ id: uid('trailer'), fleetId: fleet.id, vin: vin(), unitId: 'K-1', createdAt: T0 });
      const unassigned = await apply(store, vin(), T0, { cargosafe: [cargo('C1', T0)] });
      const created = { id: uid('trailer'), vin: vin() };
      const before = await store.latestTrailerChange();
      await store.importTrailers(
        fleet.id,
        [
          { kind: 'create', ...created, unitId: 'N-1', active: false },
          { kind: 'assign', trailerId: unassigned.trailer.id, unitId: 'A-1', active: true },
          { kind: 'update', trailerId: kept.id, unitId: 'K-2', active: false },
        ],
        T0 + HOUR,
      );
      const made = (await store.getTrailer(customer.id, created.id))!;
      assert.deepEqual([made.fleetId, made.vin, made.unitId, made.active, made.statusName], [fleet.id, created.vin, 'N-1', false, 'OK']);
      const assigned = (await store.getTrailer(customer.id, unassigned.trailer.id))!;
      assert.deepEqual([assigned.fleetId, assigned.unitId, assigned.active], [fleet.id, 'A-1', true]);
      assert.equal((await store.listCargosafe(customer.id, { limit: 10 })).length, 1, 'its cargosafe unit follows it to the customer');
      const updated = (await store.getTrailer(customer.id, kept.id))!;
      assert.deepEqual([updated.unitId, updated.active], ['K-2', false]);
      const notes = await store.trailerChangesAfter(before, 10);
      assert.deepEqual(notes.map((note) => note.trailer.id).sort(byCodeUnit), [created.id, unassigned.trailer.id, kept.id].sort(byCodeUnit));

      // Planned against a store that has moved on: all or nothing.
      const late = { id: uid('trailer'), vin: vin() };
      const lateChanges = [
        { kind: 'create', ...late, unitId: null, active: true },
        { kind: 'assign', trailerId: unassigned.trailer.id, unitId: null, active: true },
      ] as const;
      await assertRejectsWith(store.importTrailers(other.id, lateChanges, T0 + 2 * HOUR), 'conflict');
      await assertRejectsWith(store.importTrailers(other.id, [{ kind: 'update', trailerId: kept.id, unitId: null, active: true }], T0 + 2 * HOUR), 'conflict');
      await assertRejectsWith(store.importTrailers(fleet.id, [{ kind: 'create', id: uid('trailer'), vin: created.vin, unitId: null, active: true }], T0 + 2 * HOUR), 'conflict');
      assert.equal(await store.findTrailerByVin(late.vin), null, 'the create before the refused assign was rolled back');
      assert.equal((await store.getTrailer(customer.id, kept.id))?.fleetId, fleet.id);
      assert.equal((await store.trailerChangesAfter(notes.at(-1)!.seq, 10)).length, 0, 'and nothing was noted');
    },
  },
  {
    group: 'provisioning',
    name: 'setTrailerActive and setDeviceActive answer whether the record exists',
    async run(store) {
      const { customer, trailer } = await customerWithTrailer(store);
      assert.equal(await store.setTrailerActive(trailer.id, false), true);
      assert.equal((await store.getTrailer(customer.id, trailer.id))?.active, false);
      assert.equal(await store.setTrailerActive(trailer.id, true), true);
      assert.equal((await store.getTrailer(customer.id, trailer.id))?.active, true);
      assert.equal(await store.setTrailerActive(uid('trailer'), false), false);

      await apply(store, trailer.vin, T0, { devices: [tire('S1', T0)] });
      const [device] = await store.listDevices(customer.id, trailer.id, { limit: 10, activeOnly: false, staleBefore: 0 });
      assert.equal((await store.setDeviceActive(device!.id, false, T0))?.id, trailer.id);
      assert.equal((await store.getDevice(customer.id, device!.id))?.active, false);
      assert.equal(await store.setDeviceActive(uid('device'), false, T0), null);
    },
  },

  // the operator-change feed --------------------------------------------------------------------------
  {
    group: 'operator changes',
    name: 'notes of trailer changes are read in order after a seq, with the trailer and its fleet as they are now',
    async run(store) {
      const { fleet, trailer } = await customerWithTrailer(store);
      const unassigned = await newTrailer(store, null);
      const start = await store.latestTrailerChange();
      assert.ok(Number.isSafeInteger(start) && start >= 0);
      await store.noteTrailerChange(trailer.id, T0);
      await store.setTrailerActive(trailer.id, false);
      await store.noteTrailerChange(unassigned.id, T0 + 1);
      await store.noteTrailerChange(uid('gone-trailer'), T0 + 2);
      const mine = (await store.trailerChangesAfter(start, 100)).filter((change) => [trailer.id, unassigned.id].includes(change.trailer.id));
      assert.deepEqual(
        mine.map((change) => [change.trailer.id, change.fleet?.id ?? null, change.trailer.active]),
        [
          [trailer.id, fleet.id, false],
          [unassigned.id, null, true],
        ],
        'in note order, each trailer as it is now, a note of a trailer that is gone left out',
      );
      assert.ok(mine[0]!.seq > start && mine[1]!.seq > mine[0]!.seq);
      assert.deepEqual(mine[0]!.fleet, fleet);
      assert.ok((await store.latestTrailerChange()) >= mine[1]!.seq);
      const afterFirst = (await store.trailerChangesAfter(mine[0]!.seq, 100)).map((change) => change.trailer.id);
      assert.ok(!afterFirst.includes(trailer.id) && afterFirst.includes(unassigned.id), 'strictly after the seq');
      assert.equal((await store.trailerChangesAfter(start, 1)).length, 1, 'at most limit');
    },
  },
  {
    group: 'operator changes',
    name: 'a note older than a day is dropped when a new one is written',
    async run(store) {
      const { trailer } = await customerWithTrailer(store);
      const start = await store.latestTrailerChange();
      await store.noteTrailerChange(trailer.id, T0 - 2 * DAY);
      await store.noteTrailerChange(trailer.id, T0);
      const mine = (await store.trailerChangesAfter(start, 100)).filter((change) => change.trailer.id === trailer.id);
      assert.equal(mine.length, 1);
    },
  },

  // isolation ---------------------------------------------------------------------------------------
  {
    group: 'isolation',
    name: "a customer reads none of another customer's records through any read method",
    async run(store) {
      const a = await customerWithTrailer(store);
      await apply(store, a.trailer.vin, T0, {
        gps: [fix(T0 - MINUTE)],
        devices: [tire('S1', T0 - MINUTE)],
        cargosafe: [cargo('C1', T0 - MINUTE)],
      });
      const b = await customerWithTrailer(store);
      const [device] = await store.listDevices(a.customer.id, a.trailer.id, { limit: 10, activeOnly: false, staleBefore: 0 });
      const [unit] = await store.listCargosafe(a.customer.id, { limit: 10 });
      assert.ok(device && unit, "customer A reads its own device and unit (the control for what follows)");
      const time = { ...ALL_TIME, limit: 10 };
      const ids = { limit: 10, activeOnly: false, staleBefore: 0 };
      assert.equal((await store.listGps(a.customer.id, a.trailer.id, time)).length, 1);

      assert.deepEqual((await store.listFleets(b.customer.id, { limit: 10 })).map(idOf), [b.fleet.id]);
      assert.equal(await store.getFleet(b.customer.id, a.fleet.id), null);
      assert.deepEqual(await store.listTrailers(b.customer.id, a.fleet.id, ids), []);
      assert.deepEqual(await store.listTrailers(b.customer.id, a.fleet.id, { ...ids, activeOnly: true }), []);
      assert.equal(await store.getTrailer(b.customer.id, a.trailer.id), null);
      assert.deepEqual(await store.listGps(b.customer.id, a.trailer.id, time), []);
      assert.deepEqual(await store.listDevices(b.customer.id, a.trailer.id, ids), []);
      assert.deepEqual(await store.listDevices(b.customer.id, a.trailer.id, { ...ids, activeOnly: true }), []);
      assert.equal(await store.getDevice(b.customer.id, device.id), null);
      assert.equal(await store.getDevice(b.customer.id, device.id, 0), null);
      assert.deepEqual(await store.listDeviceReadings(b.customer.id, device.id, time), []);
      assert.deepEqual(await store.listCargosafe(b.customer.id, { limit: 10 }), []);
      assert.equal(await store.getCargosafe(b.customer.id, unit.id), null);
      assert.deepEqual(await store.listCargosafeReadings(b.customer.id, unit.id, time), []);
      // And nothing of A's through B's own fleet id either.
      assert.deepEqual((await store.listTrailers(b.customer.id, b.fleet.id, ids)).map(idOf), [b.trailer.id]);
    },
  },
  {
    group: 'isolation',
    name: 'an unassigned trailer and its data are visible to no customer',
    async run(store) {
      const a = await customerWithTrailer(store);
      const applied = await apply(store, vin(), T0, {
        gps: [fix(T0)],
        devices: [tire('S1', T0)],
        cargosafe: [cargo('C1', T0)],
      });
      assert.equal(applied.createdTrailer, true);
      assert.equal(applied.fleet, null);
      const time = { ...ALL_TIME, limit: 10 };
      assert.equal(await store.getTrailer(a.customer.id, applied.trailer.id), null);
      assert.deepEqual(await store.listGps(a.customer.id, applied.trailer.id, time), []);
      assert.deepEqual(await store.listDevices(a.customer.id, applied.trailer.id, { limit: 10, activeOnly: false, staleBefore: 0 }), []);
      assert.deepEqual(await store.listCargosafe(a.customer.id, { limit: 10 }), []);
      assert.deepEqual((await store.listTrailers(a.customer.id, a.fleet.id, { limit: 10, activeOnly: false, staleBefore: 0 })).map(idOf), [
        a.trailer.id,
      ]);
    },
  },

  // id paging ---------------------------------------------------------------------------------------
  {
    group: 'id paging',
    name: 'fleets page in id order after afterId, at most limit per page',
    async run(store) {
      const customer = await newCustomer(store);
      const created: Fleet[] = [];
      for (let i = 0; i < 5; i++) created.push(await newFleet(store, customer.id, `Fleet ${i}`));
      const expected = created.map(idOf).sort((x, y) => Number(x) - Number(y));
      const paged = await allIdPages(2, (afterId: number | undefined) => store.listFleets(customer.id, { afterId, limit: 2 }));
      assert.deepEqual(paged.map(idOf), expected);
      assert.deepEqual((await store.listFleets(customer.id, { afterId: expected[1] as number, limit: 10 })).map(idOf), expected.slice(2));
      assert.deepEqual(await store.listFleets(customer.id, { afterId: expected[4] as number, limit: 10 }), []);
      assert.deepEqual(await store.getFleet(customer.id, created[0]!.id), created[0]);
    },
  },
  {
    group: 'id paging',
    name: 'trailers page in id order; activeOnly leaves out deactivated trailers',
    async run(store) {
      const customer = await newCustomer(store);
      const fleet = await newFleet(store, customer.id);
      const other = await newFleet(store, customer.id, 'Other');
      await newTrailer(store, other.id);
      const created: Trailer[] = [];
      for (let i = 0; i < 5; i++) created.push(await newTrailer(store, fleet.id));
      const ids = created.map(idOf).sort(byCodeUnit);
      await store.setTrailerActive(ids[1]!, false);
      await store.setTrailerActive(ids[3]!, false);

      const all = await allIdPages(2, (afterId: string | undefined) => store.listTrailers(customer.id, fleet.id, { afterId, limit: 2, activeOnly: false, staleBefore: 0 }));
      assert.deepEqual(all.map(idOf), ids, 'every trailer of this fleet only, in id order');
      assert.deepEqual(all.map((trailer) => trailer.active), [true, false, true, false, true]);
      const active = await allIdPages(1, (afterId: string | undefined) => store.listTrailers(customer.id, fleet.id, { afterId, limit: 1, activeOnly: true, staleBefore: 0 }));
      assert.deepEqual(active.map(idOf), [ids[0], ids[2], ids[4]]);
    },
  },
  {
    group: 'id paging',
    name: 'devices page in id order; activeOnly and the active field follow the operator flag and staleness',
    async run(store) {
      const { customer, trailer } = await customerWithTrailer(store);
      const staleBefore = T0 - 7 * DAY;
      await apply(store, trailer.vin, T0, {
        devices: [
          tire('fresh', T0 - HOUR),
          tire('stale', staleBefore - 1),
          tire('edge', staleBefore),
          tire('disabled', T0 - HOUR),
          { ...tire('fresh', T0 - HOUR), kind: 'door' },
        ],
      });
      const bySerialKind = new Map(
        (await store.listDevices(customer.id, trailer.id, { limit: 10, activeOnly: false, staleBefore })).map((device) => [
          `${device.kind}/${device.serial}`,
          device,
        ]),
      );
      assert.equal(bySerialKind.size, 5, 'a device per (kind, serial)');
      await store.setDeviceActive(bySerialKind.get('tpms/disabled')!.id, false, T0);

      const all = await allIdPages(2, (afterId: string | undefined) => store.listDevices(customer.id, trailer.id, { afterId, limit: 2, activeOnly: false, staleBefore }));
      assert.deepEqual(all.map(idOf), [...bySerialKind.values()].map(idOf).sort(byCodeUnit));
      const activeByName = Object.fromEntries(all.map((device) => [`${device.kind}/${device.serial}`, device.active]));
      assert.deepEqual(activeByName, {
        'tpms/fresh': true,
        'door/fresh': true,
        'tpms/edge': true,
        'tpms/stale': false,
        'tpms/disabled': false,
      });
      const active = await allIdPages(1, (afterId: string | undefined) => store.listDevices(customer.id, trailer.id, { afterId, limit: 1, activeOnly: true, staleBefore }));
      assert.deepEqual(
        active.map(idOf),
        all.filter((device) => device.active).map(idOf),
        'activeOnly keeps exactly the devices whose active field is true',
      );
      for (const device of all) {
        assert.equal((await store.getDevice(customer.id, device.id, staleBefore))?.active, device.active, `getDevice agrees on ${device.serial}`);
      }
      const stale = bySerialKind.get('tpms/stale')!;
      assert.equal((await store.getDevice(customer.id, stale.id))?.active, true, 'without staleBefore only the operator flag counts');
      assert.deepEqual(await store.listDevices(customer.id, trailer.id, { limit: 10, activeOnly: true, staleBefore: T0 }), []);
    },
  },
  {
    group: 'id paging',
    name: "cargosafe units page in id order across the customer's fleets",
    async run(store) {
      const a = await customerWithTrailer(store);
      const second = await newTrailer(store, (await newFleet(store, a.customer.id, 'Second')).id);
      await apply(store, a.trailer.vin, T0, { cargosafe: [cargo('C1', T0), cargo('C2', T0), cargo('C3', T0)] });
      await apply(store, second.vin, T0, { cargosafe: [cargo('C1', T0), cargo('C4', T0)] });
      const units = await allIdPages(2, (afterId: string | undefined) => store.listCargosafe(a.customer.id, { afterId, limit: 2 }));
      assert.equal(units.length, 5);
      assert.deepEqual(units.map(idOf), units.map(idOf).sort(byCodeUnit));
      assert.deepEqual(units.map((unit) => `${unit.trailerId === second.id ? 2 : 1}/${unit.serial}`).sort(), ['1/C1', '1/C2', '1/C3', '2/C1', '2/C4']);
    },
  },
  {
    group: 'id paging',
    name: 'inserts between id pages never duplicate or skip a record',
    async run(store) {
      const customer = await newCustomer(store);
      const fleet = await newFleet(store, customer.id);
      // Ids chosen so that later inserts land both before and after the cursor.
      const prefix = uid('trailer');
      const idAt = (n: number) => `${prefix}-${String(n).padStart(3, '0')}`;
      const original = [10, 20, 30, 40, 50, 60];
      for (const n of original) await newTrailer(store, fleet.id, idAt(n));
      const page = { limit: 3, activeOnly: false, staleBefore: 0 };

      const first = await store.listTrailers(customer.id, fleet.id, page);
      assert.deepEqual(first.map(idOf), [idAt(10), idAt(20), idAt(30)]);
      await newTrailer(store, fleet.id, idAt(15)); // behind the cursor
      await newTrailer(store, fleet.id, idAt(35)); // ahead of it
      const second = await store.listTrailers(customer.id, fleet.id, { ...page, afterId: first.at(-1)!.id });
      await newTrailer(store, fleet.id, idAt(45)); // behind the cursor again
      await newTrailer(store, fleet.id, idAt(70));
      const rest = await allIdPages(3, (afterId: string | undefined) =>
        store.listTrailers(customer.id, fleet.id, { ...page, afterId: afterId ?? second.at(-1)!.id }),
      );
      const seen = [...first, ...second, ...rest].map(idOf);
      assert.equal(new Set(seen).size, seen.length, 'no duplicates');
      assert.deepEqual(seen, [10, 20, 30, 35, 40, 50, 60, 70].map(idAt), 'every original record once, in order');
    },
  },

  // time paging -------------------------------------------------------------------------------------
  {
    group: 'time paging',
    name: 'nextFleetTrailerWithGps steps through the customer\'s fleet by trailer id, to trailers with a fix in the range only',
    async run(store) {
      const customer = await newCustomer(store);
      const fleet = await newFleet(store, customer.id);
      const other = await newFleet(store, customer.id, 'South');
      const trailers = [];
      for (let i = 0; i < 4; i++) trailers.push(await newTrailer(store, fleet.id));
      const [a, b, quiet, late] = trailers;
      const elsewhere = await newTrailer(store, other.id);
      for (const trailer of [a!, b!, elsewhere]) await apply(store, trailer.vin, T0 + HOUR, { gps: [fix(T0 + MINUTE)] });
      await apply(store, late!.vin, T0 + HOUR, { gps: [fix(T0 + 30 * MINUTE)] });
      const range = { from: T0, to: T0 + 10 * MINUTE };
      const walk = async (customerId: string, fleetId: number, window: { from: number; to: number }) => {
        const ids: string[] = [];
        for (let after = ''; ; ) {
          const next = await store.nextFleetTrailerWithGps(customerId, fleetId, after, window);
          if (next === null) return ids;
          assert.equal(next.fleetId, fleetId);
          ids.push(next.id);
          after = next.id;
        }
      };
      assert.deepEqual(await walk(customer.id, fleet.id, range), [a!.id, b!.id].sort(byCodeUnit), 'no trailer without a fix in the range, none of another fleet');
      assert.deepEqual(await walk(customer.id, fleet.id, { from: T0 + MINUTE + 1, to: T0 + HOUR }), [late!.id], 'from inclusive, to exclusive');
      assert.deepEqual(await walk(customer.id, fleet.id, { from: T0, to: T0 + MINUTE }), [], 'to is exclusive');
      const full = await store.nextFleetTrailerWithGps(customer.id, fleet.id, '', range);
      assert.deepEqual(full, await store.getTrailer(customer.id, full!.id), 'the trailer as getTrailer answers it');
      assert.equal(quiet!.fleetId, fleet.id);
      const stranger = await newCustomer(store);
      assert.equal(await store.nextFleetTrailerWithGps(stranger.id, fleet.id, '', range), null, 'another customer\'s fleet answers nothing');
    },
  },
  {
    group: 'time paging',
    name: 'time pages hold from <= timestamp < to, ascending',
    async run(store) {
      const { customer, trailer } = await customerWithTrailer(store);
      const minutes = [4, 0, 3, 1, 5, 2];
      await apply(store, trailer.vin, T0 + HOUR, {
        gps: minutes.map((m) => fix(T0 + m * MINUTE)),
        devices: minutes.map((m) => tire('S1', T0 + m * MINUTE)),
        cargosafe: minutes.map((m) => cargo('C1', T0 + m * MINUTE)),
      });
      const [device] = await store.listDevices(customer.id, trailer.id, { limit: 1, activeOnly: false, staleBefore: 0 });
      const [unit] = await store.listCargosafe(customer.id, { limit: 1 });
      const window = { from: T0 + MINUTE, to: T0 + 4 * MINUTE, limit: 10 };
      const expected = [1, 2, 3].map((m) => T0 + m * MINUTE);
      const gps = await store.listGps(customer.id, trailer.id, window);
      assert.deepEqual(gps.map(timestampOf), expected, 'gps: from included, to excluded');
      assertKeysAscend(gps.map((row) => row.key));
      assert.deepEqual(gps.map((row) => row.key.timestamp), expected, 'the key carries the timestamp');
      const readings = await store.listDeviceReadings(customer.id, device!.id, window);
      assert.deepEqual(readings.map(timestampOf), expected, 'device readings: same bounds');
      assert.deepEqual(readings[0]?.record, {
        deviceId: device!.id,
        timestamp: T0 + MINUTE,
        metrics: { pressurePsi: 100, temperatureC: 30 },
        state: OK,
      });
      const unitReadings = await store.listCargosafeReadings(customer.id, unit!.id, window);
      assert.deepEqual(unitReadings.map(timestampOf), expected, 'cargosafe readings: same bounds');
      assert.deepEqual(unitReadings[0]?.record, {
        unitId: unit!.id,
        timestamp: T0 + MINUTE,
        doorOpen: false,
        loadPercent: 40,
        temperatureC: 4,
        humidityPercent: 55,
      });
      assert.deepEqual(await store.listGps(customer.id, trailer.id, { from: T0 + 6 * MINUTE, to: T0 + HOUR, limit: 10 }), []);
      assert.deepEqual(await store.listGps(customer.id, trailer.id, { from: T0, to: T0, limit: 10 }), [], 'an empty window');
    },
  },
  {
    group: 'time paging',
    name: 'time pages continue strictly after the given key',
    async run(store) {
      const { customer, trailer } = await customerWithTrailer(store);
      const stamps = Array.from({ length: 7 }, (_, i) => T0 + i * SECOND);
      await apply(store, trailer.vin, T0 + HOUR, {
        gps: stamps.map((t) => fix(t)),
        devices: stamps.map((t) => tire('S1', t)),
        cargosafe: stamps.map((t) => cargo('C1', t)),
      });
      const [device] = await store.listDevices(customer.id, trailer.id, { limit: 1, activeOnly: false, staleBefore: 0 });
      const [unit] = await store.listCargosafe(customer.id, { limit: 1 });
      const lists: Record<string, (page: TimePageQuery) => Promise<{ key: TimeKey; record: { timestamp: number } }[]>> = {
        gps: (page: TimePageQuery) => store.listGps(customer.id, trailer.id, page),
        readings: (page: TimePageQuery) => store.listDeviceReadings(customer.id, device!.id, page),
        cargosafe: (page: TimePageQuery) => store.listCargosafeReadings(customer.id, unit!.id, page),
      };
      for (const [name, list] of Object.entries(lists)) {
        const paged = await allTimePages(3, (after) => list({ ...ALL_TIME, after, limit: 3 }));
        assert.deepEqual(paged.map(timestampOf), stamps, `${name}: every record once, in order`);
        assertKeysAscend(paged.map((row) => row.key));
        const third = paged[2]!.key;
        assert.deepEqual((await list({ ...ALL_TIME, after: third, limit: 2 })).map(timestampOf), stamps.slice(3, 5), `${name}: after excludes its key`);
        assert.deepEqual(await list({ ...ALL_TIME, after: paged.at(-1)!.key, limit: 3 }), [], `${name}: nothing after the last key`);
      }
    },
  },
  {
    group: 'time paging',
    name: 'records of one source share no timestamp: a second reading at the same instant replaces the first',
    async run(store) {
      // Readings are unique per (source, timestamp), so within one list the order of equal
      // timestamps never arises. Last received wins (a correction); an identical repeat changes nothing.
      const { customer, trailer } = await customerWithTrailer(store);
      await apply(store, trailer.vin, T0, { gps: [fix(T0, 10), fix(T0, 20), fix(T0 + SECOND, 30)] });
      await apply(store, trailer.vin, T0, { gps: [fix(T0, 40)] });
      const gps = await store.listGps(customer.id, trailer.id, { ...ALL_TIME, limit: 10 });
      assert.deepEqual(gps.map((row) => row.record.lat), [40, 30]);
      assertKeysAscend(gps.map((row) => row.key));
      await apply(store, trailer.vin, T0, { gps: [fix(T0 + SECOND, 30)] });
      assert.deepEqual(await store.listGps(customer.id, trailer.id, { ...ALL_TIME, limit: 10 }), gps, 'an identical repeat changes nothing');

      await apply(store, trailer.vin, T0, { devices: [tire('A', T0, OK)], cargosafe: [cargo('C1', T0, 10)] });
      await apply(store, trailer.vin, T0, { devices: [tire('A', T0, FAULT)], cargosafe: [cargo('C1', T0, 90)] });
      const [device] = await store.listDevices(customer.id, trailer.id, { limit: 10, activeOnly: false, staleBefore: 0 });
      const readings = await store.listDeviceReadings(customer.id, device!.id, { ...ALL_TIME, limit: 10 });
      assert.deepEqual(readings.map((row) => row.record.state), [FAULT], 'the device reading is replaced');
      assert.deepEqual([device!.state.isFault, (await store.getTrailer(customer.id, trailer.id))?.statusName], [true, 'Faulted'], 'and so is its state');
      const [unit] = await store.listCargosafe(customer.id, { limit: 10 });
      assert.deepEqual(
        (await store.listCargosafeReadings(customer.id, unit!.id, { ...ALL_TIME, limit: 10 })).map((row) => row.record.loadPercent),
        [90],
      );
      assert.equal(unit!.latest?.loadPercent, 90);
    },
  },
  {
    group: 'time paging',
    name: 'inserts between time pages never duplicate or skip a record',
    async run(store) {
      const { customer, trailer } = await customerWithTrailer(store);
      const at = (s: number) => T0 + s * SECOND;
      await apply(store, trailer.vin, T0, { gps: [10, 20, 30, 40, 50].map((s) => fix(at(s))) });
      const page = { ...ALL_TIME, limit: 2 };
      const first = await store.listGps(customer.id, trailer.id, page);
      await apply(store, trailer.vin, T0, { gps: [fix(at(15)), fix(at(25)), fix(at(60))] }); // 15 is behind the cursor
      const rest = await allTimePages(2, (after) => store.listGps(customer.id, trailer.id, { ...page, after: after ?? first.at(-1)!.key }));
      const seen = [...first, ...rest].map(timestampOf);
      assert.equal(new Set(seen).size, seen.length, 'no duplicates');
      assert.deepEqual(seen, [10, 20, 25, 30, 40, 50, 60].map(at), 'every original record once, in order');
    },
  },

  // applyTelemetry ----------------------------------------------------------------------------------
  {
    group: 'applyTelemetry',
    name: 'an unknown VIN creates one unassigned, active, OK trailer',
    async run(store) {
      const unknownVin = vin();
      const first = await apply(store, unknownVin, T0 + MINUTE, {});
      assert.equal(first.createdTrailer, true);
      assert.equal(first.fleet, null);
      assert.deepEqual(first.trailer, {
        id: first.trailer.id,
        fleetId: null,
        unitId: null,
        vin: unknownVin,
        active: true,
        statusName: 'OK',
        statusDate: T0 + MINUTE,
        faultedDevices: 0,
        warningDevices: 0,
        telemetry: null,
        createdAt: T0 + MINUTE,
      });
      assert.doesNotMatch(first.trailer.id, /^\d+$/, 'a trailer id is never all digits');
      const second = await apply(store, unknownVin, T0 + 2 * MINUTE, {});
      assert.equal(second.createdTrailer, false);
      assert.deepEqual(second.trailer, first.trailer);
      assert.deepEqual(await store.findTrailerByVin(unknownVin), first.trailer);

      const known = await customerWithTrailer(store);
      const applied = await apply(store, known.trailer.vin, T0, {});
      assert.equal(applied.createdTrailer, false);
      assert.deepEqual(applied.trailer, known.trailer);
      assert.deepEqual(applied.fleet, known.fleet);
    },
  },
  {
    group: 'applyTelemetry',
    name: "the trailer's latest fix never moves back",
    async run(store) {
      const { customer, trailer } = await customerWithTrailer(store);
      let applied = await apply(store, trailer.vin, T0 + HOUR, { gps: [fix(T0 + 2 * MINUTE, 2), fix(T0 + 3 * MINUTE, 3), fix(T0 + MINUTE, 1)] });
      assert.deepEqual(applied.trailer.telemetry, fix(T0 + 3 * MINUTE, 3), 'the newest fix of the batch, wherever it sits');
      applied = await apply(store, trailer.vin, T0 + HOUR, { gps: [fix(T0, 0)] });
      assert.deepEqual(applied.trailer.telemetry, fix(T0 + 3 * MINUTE, 3), 'an older fix is stored but does not move it back');
      applied = await apply(store, trailer.vin, T0 + HOUR, { gps: [fix(T0 + 3 * MINUTE, 99)] });
      assert.equal(applied.trailer.telemetry?.lat, 99, 'a second fix at the same instant replaces it (last received wins)');
      applied = await apply(store, trailer.vin, T0 + HOUR, { gps: [fix(T0 + 9 * MINUTE, 9)] });
      assert.deepEqual(applied.trailer.telemetry, fix(T0 + 9 * MINUTE, 9));
      assert.deepEqual((await store.getTrailer(customer.id, trailer.id))?.telemetry, fix(T0 + 9 * MINUTE, 9));
      assert.equal((await store.listGps(customer.id, trailer.id, { ...ALL_TIME, limit: 10 })).length, 5);
    },
  },
  {
    group: 'applyTelemetry',
    name: "a device is created once per trailer, kind and serial, and only newer readings move its state",
    async run(store) {
      const { customer, trailer } = await customerWithTrailer(store);
      const other = await newTrailer(store, trailer.fleetId);
      await apply(store, trailer.vin, T0 + HOUR, { devices: [tire('S1', T0 + 10 * MINUTE, WARNING, 'L1')] });
      await apply(store, other.vin, T0 + HOUR, { devices: [tire('S1', T0, OK)] });
      await apply(store, trailer.vin, T0 + 2 * HOUR, { devices: [tire('S1', T0 + 5 * MINUTE, FAULT, 'R1')] });
      const devices = await store.listDevices(customer.id, trailer.id, { limit: 10, activeOnly: false, staleBefore: 0 });
      assert.equal(devices.length, 1, 'one device for the serial on this trailer');
      const device = devices[0]!;
      assert.doesNotMatch(device.id, /^\d+$/, 'a device id is never all digits');
      assert.deepEqual(device, {
        id: device.id,
        trailerId: trailer.id,
        kind: 'tpms',
        serial: 'S1',
        position: 'L1',
        active: true,
        state: WARNING,
        lastSeenAt: T0 + 10 * MINUTE,
        createdAt: T0 + HOUR,
      });
      const readings = await store.listDeviceReadings(customer.id, device.id, { ...ALL_TIME, limit: 10 });
      assert.deepEqual(
        readings.map((row) => [row.record.timestamp, row.record.state]),
        [
          [T0 + 5 * MINUTE, FAULT],
          [T0 + 10 * MINUTE, WARNING],
        ],
        'the late reading is stored in its place',
      );
      await apply(store, trailer.vin, T0 + 3 * HOUR, { devices: [tire('S1', T0 + 20 * MINUTE, OK, 'R2')] });
      const moved = await store.getDevice(customer.id, device.id, 0);
      assert.deepEqual([moved?.state, moved?.lastSeenAt, moved?.position], [OK, T0 + 20 * MINUTE, 'R2']);
      assert.equal((await store.listDevices(customer.id, other.id, { limit: 10, activeOnly: false, staleBefore: 0 })).length, 1);
    },
  },
  {
    group: 'applyTelemetry',
    name: 'status name and counts follow the device states; the status date moves only with the name',
    async run(store) {
      const { customer, trailer } = await customerWithTrailer(store);
      const step = async (at: number, devices: CanonicalDeviceReading[]) => (await apply(store, trailer.vin, at, { devices })).trailer;
      const summary = (t: Trailer) => [t.statusName, t.statusDate, t.faultedDevices, t.warningDevices];

      assert.deepEqual(summary(await step(T0 + 1, [tire('A', T0 + 1), tire('B', T0 + 1)])), ['OK', T0, 0, 0], 'still OK: date kept');
      assert.deepEqual(summary(await step(T0 + 2, [tire('A', T0 + 2, WARNING)])), ['Warning', T0 + 2, 0, 1]);
      assert.deepEqual(summary(await step(T0 + 3, [tire('B', T0 + 3, WARNING)])), ['Warning', T0 + 2, 0, 2], 'same name: same date');
      assert.deepEqual(summary(await step(T0 + 4, [tire('A', T0 + 4, WARNING_AND_FAULT)])), ['Faulted', T0 + 4, 1, 1], 'a faulted device counts once, as faulted');
      assert.deepEqual(summary(await step(T0 + 5, [tire('C', T0 + 5, FAULT)])), ['Faulted', T0 + 4, 2, 1]);
      assert.deepEqual(summary(await step(T0 + 6, [tire('A', T0 + 6), tire('C', T0 + 6)])), ['Warning', T0 + 6, 0, 1]);
      assert.deepEqual(summary(await step(T0 + 7, [tire('B', T0 + 7)])), ['OK', T0 + 7, 0, 0]);
      assert.deepEqual(summary(await step(T0 + 8, [tire('B', T0 + 1, FAULT)])), ['OK', T0 + 7, 0, 0], 'an old reading changes no state');
      const stored = await store.getTrailer(customer.id, trailer.id);
      assert.deepEqual(summary(stored!), ['OK', T0 + 7, 0, 0]);
    },
  },
  {
    group: 'applyTelemetry',
    name: 'devices switched off by the operator are not counted',
    async run(store) {
      const { customer, trailer } = await customerWithTrailer(store);
      await apply(store, trailer.vin, T0 + 1, { devices: [tire('A', T0 + 1, FAULT), tire('B', T0 + 1, WARNING)] });
      const devices = await store.listDevices(customer.id, trailer.id, { limit: 10, activeOnly: false, staleBefore: 0 });
      const switched = await store.setDeviceActive(devices.find((device) => device.serial === 'A')!.id, false, T0 + 5);
      // The switch recounts at once: the faulted device no longer counts, the date is the switch's.
      assert.deepEqual([switched?.statusName, switched?.faultedDevices, switched?.warningDevices, switched?.statusDate], ['Warning', 0, 1, T0 + 5]);
      const after = await apply(store, trailer.vin, T0 + 6, { devices: [tire('B', T0 + 6, WARNING)] });
      assert.deepEqual([after.trailer.statusName, after.trailer.faultedDevices, after.trailer.warningDevices, after.trailer.statusDate], ['Warning', 0, 1, T0 + 5]);
    },
  },
  {
    group: 'applyTelemetry',
    name: 'a reading dated beyond the allowed lead is stored but never becomes a latest state',
    async run(store) {
      const { customer, trailer } = await customerWithTrailer(store);
      const at = T0 + HOUR;
      const beyond = at + MAX_READING_LEAD_MS + SECOND;
      let applied = await apply(store, trailer.vin, at, { gps: [fix(beyond, 1)], devices: [tire('A', beyond, FAULT)], cargosafe: [cargo('C1', beyond, 77)] });
      assert.equal(applied.trailer.telemetry, null, 'a fix from the future is not the latest');
      assert.equal(applied.trailer.statusName, 'OK', "a device reading from the future does not set the device's state");
      const [unit] = await store.listCargosafe(customer.id, { limit: 10 });
      assert.equal(unit?.latest ?? null, null, "nor a unit's latest reading");
      assert.equal((await store.listGps(customer.id, trailer.id, { ...ALL_TIME, limit: 10 })).length, 1, 'the reading itself is kept');
      applied = await apply(store, trailer.vin, at, { gps: [fix(at + MAX_READING_LEAD_MS, 2)] });
      assert.deepEqual(applied.trailer.telemetry, fix(at + MAX_READING_LEAD_MS, 2), 'exactly the allowed lead is fine');
      applied = await apply(store, trailer.vin, at + 2 * MINUTE, { gps: [fix(at + 2 * MINUTE, 3)] });
      assert.equal(applied.trailer.telemetry?.lat, 2, 'and it still never moves back');
    },
  },
  {
    group: 'applyTelemetry',
    name: "applyTelemetryBatch writes many VINs in one go, each in order, and answers each trailer's state after it",
    async run(store) {
      const { customer, trailer } = await customerWithTrailer(store);
      const unknownVin = vin();
      const gpsOnlyVin = vin();
      const item = (vinOf: string, parts: Partial<CanonicalTelemetry>) => ({ vin: vinOf, at: T0 + HOUR, telemetry: telemetry(parts) });
      const applied = await store.applyTelemetryBatch([
        item(trailer.vin, { gps: [fix(T0 + MINUTE, 1)] }),
        item(gpsOnlyVin, { gps: [fix(T0 + 2 * MINUTE, 8)] }),
        item(unknownVin, { gps: [fix(T0 + MINUTE, 5)] }),
        item(gpsOnlyVin, { gps: [fix(T0 + MINUTE, 9)] }),
        item(trailer.vin, { gps: [fix(T0 + 2 * MINUTE, 2)], devices: [tire('A', T0 + 2 * MINUTE, WARNING)] }),
        item(trailer.vin, { gps: [fix(T0 + 2 * MINUTE, 3)] }),
        item(unknownVin, { devices: [tire('B', T0, FAULT)] }),
      ]);
      assert.deepEqual([...applied.keys()].sort(), [trailer.vin, unknownVin, gpsOnlyVin].sort(), 'one answer per VIN');
      const known = applied.get(trailer.vin)!;
      assert.deepEqual([known.createdTrailer, known.trailer.telemetry, known.trailer.statusName, known.fleet?.id], [false, fix(T0 + 2 * MINUTE, 3), 'Warning', trailer.fleetId]);
      const created = applied.get(unknownVin)!;
      assert.deepEqual([created.createdTrailer, created.fleet, created.trailer.telemetry?.lat, created.trailer.statusName], [true, null, 5, 'Faulted']);
      assert.deepEqual((await store.listGps(customer.id, trailer.id, { ...ALL_TIME, limit: 10 })).map((row) => row.record.lat), [1, 3]);
      assert.deepEqual(await store.findTrailerByVin(unknownVin), created.trailer);
      // A trailer created with fixes alone: its newest fix, whatever the order they came in.
      const gpsOnly = applied.get(gpsOnlyVin)!;
      assert.deepEqual([gpsOnly.createdTrailer, gpsOnly.fleet, gpsOnly.trailer.telemetry, gpsOnly.trailer.statusName], [true, null, fix(T0 + 2 * MINUTE, 8), 'OK']);
      assert.deepEqual(await store.findTrailerByVin(gpsOnlyVin), gpsOnly.trailer);
      assert.deepEqual(await store.applyTelemetryBatch([]), new Map());

      // All or nothing: an item that cannot be written fails the batch, and nothing of it stays.
      const otherVin = vin();
      const unwritable = { ...tire('C', T0, OK), metrics: { pressurePsi: 10n as unknown as number } };
      await assert.rejects(store.applyTelemetryBatch([item(otherVin, { gps: [fix(T0, 7)] }), item(trailer.vin, { devices: [unwritable] })]));
      assert.equal(await store.findTrailerByVin(otherVin), null, 'the first item is rolled back too');
      assert.equal((await store.getTrailer(customer.id, trailer.id))?.telemetry?.lat, 3);
    },
  },
  {
    group: 'applyTelemetry',
    name: 'applying the same batch twice changes nothing the second time',
    async run(store) {
      const { customer, trailer } = await customerWithTrailer(store);
      const parts = {
        gps: [fix(T0 + MINUTE), fix(T0 + 2 * MINUTE)],
        devices: [tire('A', T0 + MINUTE, WARNING), tire('A', T0 + 2 * MINUTE, FAULT), tire('B', T0 + MINUTE)],
        cargosafe: [cargo('C1', T0 + MINUTE, 10), cargo('C1', T0 + 2 * MINUTE, 20)],
      };
      const snapshot = async () => {
        const devices = await store.listDevices(customer.id, trailer.id, { limit: 10, activeOnly: false, staleBefore: 0 });
        const units = await store.listCargosafe(customer.id, { limit: 10 });
        return {
          trailer: await store.getTrailer(customer.id, trailer.id),
          gps: await store.listGps(customer.id, trailer.id, { ...ALL_TIME, limit: 10 }),
          devices,
          readings: await Promise.all(devices.map((device) => store.listDeviceReadings(customer.id, device.id, { ...ALL_TIME, limit: 10 }))),
          units,
          unitReadings: await Promise.all(units.map((unit) => store.listCargosafeReadings(customer.id, unit.id, { ...ALL_TIME, limit: 10 }))),
        };
      };
      const first = await apply(store, trailer.vin, T0 + HOUR, parts);
      assert.deepEqual([first.trailer.statusName, first.trailer.statusDate], ['Faulted', T0 + HOUR]);
      const before = await snapshot();
      const second = await apply(store, trailer.vin, T0 + 2 * HOUR, parts);
      assert.equal(second.createdTrailer, false);
      assert.deepEqual(second.trailer, first.trailer, 'status date included');
      assert.deepEqual(await snapshot(), before);
      assert.equal(before.gps.length, 2);
      assert.deepEqual(before.readings.map((rows) => rows.length).sort(), [1, 2]);
      assert.equal(before.unitReadings[0]?.length, 2);
    },
  },
  {
    group: 'applyTelemetry',
    name: 'cargosafe units are created once per trailer and serial and keep their latest reading',
    async run(store) {
      const { customer, trailer } = await customerWithTrailer(store);
      await apply(store, trailer.vin, T0 + HOUR, { cargosafe: [cargo('C1', T0 + 2 * MINUTE, 20), cargo('C1', T0 + MINUTE, 10)] });
      let [unit] = await store.listCargosafe(customer.id, { limit: 10 });
      assert.doesNotMatch(unit!.id, /^\d+$/, 'a cargosafe id is never all digits');
      assert.deepEqual(unit, {
        id: unit!.id,
        trailerId: trailer.id,
        serial: 'C1',
        active: true,
        lastSeenAt: T0 + 2 * MINUTE,
        latest: { unitId: unit!.id, timestamp: T0 + 2 * MINUTE, doorOpen: false, loadPercent: 20, temperatureC: 4, humidityPercent: 55 },
        createdAt: T0 + HOUR,
      });
      await apply(store, trailer.vin, T0 + 2 * HOUR, { cargosafe: [cargo('C1', T0, 5)] });
      assert.equal((await store.getCargosafe(customer.id, unit!.id))?.latest?.loadPercent, 20, 'an older reading does not replace the latest');
      await apply(store, trailer.vin, T0 + 3 * HOUR, { cargosafe: [{ ...cargo('C1', T0 + 3 * MINUTE, 30), doorOpen: true }, cargo('C2', T0, 1)] });
      [unit] = (await store.listCargosafe(customer.id, { limit: 10 })).filter((candidate) => candidate.serial === 'C1');
      assert.deepEqual([unit?.latest?.loadPercent, unit?.latest?.doorOpen, unit?.lastSeenAt], [30, true, T0 + 3 * MINUTE]);
      assert.deepEqual(
        (await store.listCargosafeReadings(customer.id, unit!.id, { ...ALL_TIME, limit: 10 })).map((row) => row.record.loadPercent),
        [5, 10, 20, 30],
      );
      assert.equal((await store.listCargosafe(customer.id, { limit: 10 })).length, 2, 'a second serial is a second unit');
    },
  },

  // operator reads ---------------------------------------------------------------------------------
  // The store may be shared with other cases (one PostgreSQL schema), so each case looks only at its own rows.
  {
    group: 'operator reads',
    name: 'listCustomers and listPartners page through every principal in id order',
    async run(store) {
      const customers = [await newCustomer(store, T0), await newCustomer(store, T0 + 1), await newCustomer(store, T0 + 2)];
      const partners = [
        await store.createPartner({ id: uid('partner'), name: 'Tiremetrics', product: 'tpms', keyHash: uid('hash'), createdAt: T0 }),
        await store.createPartner({ id: uid('partner'), name: 'Geo Co', product: 'gps-basic', keyHash: uid('hash'), createdAt: T0 + 1 }),
      ];
      const listedCustomers = await allIdPages(2, (afterId: string | undefined) => store.listCustomers({ afterId, limit: 2 }));
      const listedPartners = await allIdPages(2, (afterId: string | undefined) => store.listPartners({ afterId, limit: 2 }));
      for (const listed of [listedCustomers, listedPartners])
        assert.deepEqual(listed.map(idOf), listed.map(idOf).sort(byCodeUnit), 'in id order, without repeats across pages');
      const mine = <T extends { id: string }>(listed: T[], made: T[]) => listed.filter((row) => made.some((own) => own.id === row.id));
      assert.deepEqual(mine(listedCustomers, customers), [...customers].sort((a, b) => byCodeUnit(a.id, b.id)));
      assert.deepEqual(mine(listedPartners, partners), [...partners].sort((a, b) => byCodeUnit(a.id, b.id)));
      assert.ok(!listedCustomers.some((row) => 'keyHash' in row || 'key_hash' in row), 'no key hash leaves the store');
    },
  },
  {
    group: 'operator reads',
    name: "listAllFleets answers every customer's fleets, or one customer's",
    async run(store) {
      const [acme, globex] = [await newCustomer(store), await newCustomer(store)];
      const acmeFleets = [await newFleet(store, acme.id, 'North'), await newFleet(store, acme.id, 'South')];
      const globexFleet = await newFleet(store, globex.id, 'East');
      const all = await allIdPages(2, (afterId: number | undefined) => store.listAllFleets({ afterId, limit: 2 }));
      assert.deepEqual(all.map(idOf), all.map(idOf).sort((a, b) => a - b));
      assert.deepEqual(
        all.filter((fleet) => [acme.id, globex.id].includes(fleet.customerId)),
        [...acmeFleets, globexFleet].sort((a, b) => a.id - b.id),
      );
      assert.deepEqual(await allIdPages(1, (afterId: number | undefined) => store.listAllFleets({ customerId: acme.id, afterId, limit: 1 })), acmeFleets);
      assert.deepEqual(await store.listAllFleets({ customerId: uid('customer'), limit: 10 }), []);
    },
  },
  {
    group: 'operator reads',
    name: 'listAllTrailers answers every trailer, one fleet\'s, or the unassigned VINs, each with when it last reported',
    async run(store) {
      const { fleet, trailer: registered } = await customerWithTrailer(store);
      const second = await newTrailer(store, fleet.id);
      // Intake meets two VINs nobody registered: one with GPS and a later tire reading, one with a cargosafe unit only.
      const gpsAndTire = (await apply(store, vin(), T0 + HOUR, { gps: [fix(T0 + MINUTE)], devices: [tire('S1', T0 + 5 * MINUTE)] })).trailer;
      const cargoOnly = (await apply(store, vin(), T0 + HOUR, { cargosafe: [cargo('C1', T0 + 2 * MINUTE)] })).trailer;

      const unassigned = await allIdPages(1, (afterId: string | undefined) => store.listAllTrailers({ scope: { kind: 'unassigned' }, afterId, limit: 1 }));
      assert.ok(unassigned.every((trailer) => trailer.fleetId === null), 'only trailers without a fleet');
      const mine = unassigned.filter((trailer) => [gpsAndTire.id, cargoOnly.id].includes(trailer.id));
      assert.deepEqual(
        mine,
        [
          { ...gpsAndTire, lastSeenAt: T0 + 5 * MINUTE },
          { ...cargoOnly, lastSeenAt: T0 + 2 * MINUTE },
        ].sort((a, b) => byCodeUnit(a.id, b.id)),
      );

      const inFleet = await allIdPages(1, (afterId: string | undefined) => store.listAllTrailers({ scope: { kind: 'fleet', fleetId: fleet.id }, afterId, limit: 1 }));
      assert.deepEqual(inFleet, [registered, second].map((trailer) => ({ ...trailer, lastSeenAt: null })).sort((a, b) => byCodeUnit(a.id, b.id)));
      assert.deepEqual(await store.listAllTrailers({ scope: { kind: 'fleet', fleetId: 2 ** 31 - 1 }, limit: 10 }), []);

      const all = await allIdPages(2, (afterId: string | undefined) => store.listAllTrailers({ scope: { kind: 'all' }, afterId, limit: 2 }));
      assert.deepEqual(all.map(idOf), all.map(idOf).sort(byCodeUnit));
      for (const trailer of [registered, second, gpsAndTire, cargoOnly]) assert.ok(all.some((row) => row.id === trailer.id), `${trailer.id} is listed`);

      // Assigned, a VIN leaves the unassigned list and joins its fleet's, its history with it.
      const assigned = await store.assignTrailer(gpsAndTire.id, fleet.id, 'TR-9');
      const unassignedAfter = await allIdPages(50, (afterId: string | undefined) => store.listAllTrailers({ scope: { kind: 'unassigned' }, afterId, limit: 50 }));
      assert.ok(!unassignedAfter.some((trailer) => trailer.id === gpsAndTire.id));
      assert.ok(unassignedAfter.some((trailer) => trailer.id === cargoOnly.id));
      const fleetAfter = await store.listAllTrailers({ scope: { kind: 'fleet', fleetId: fleet.id }, limit: 10 });
      assert.deepEqual(fleetAfter.find((trailer) => trailer.id === gpsAndTire.id), { ...assigned, lastSeenAt: T0 + 5 * MINUTE });
    },
  },
  {
    group: 'operator reads',
    name: 'getAnyTrailer answers a trailer whoever owns it, an unassigned one, or null',
    async run(store) {
      const { trailer } = await customerWithTrailer(store);
      assert.deepEqual(await store.getAnyTrailer(trailer.id), { ...trailer, lastSeenAt: null });
      const unassigned = (await apply(store, vin(), T0 + HOUR, { gps: [fix(T0), fix(T0 + MINUTE)] })).trailer;
      assert.deepEqual(await store.getAnyTrailer(unassigned.id), { ...unassigned, lastSeenAt: T0 + MINUTE });
      assert.equal(await store.getAnyTrailer(uid('trailer')), null);
    },
  },
  {
    group: 'operator reads',
    name: "listTrailerDevices shows the operator flag as active; listTrailerGps pages a trailer's fixes, assigned or not",
    async run(store) {
      const unassigned = (
        await apply(store, vin(), T0 + DAY, {
          gps: [fix(T0), fix(T0 + MINUTE), fix(T0 + 2 * MINUTE)],
          devices: [tire('S1', T0, WARNING), tire('S2', T0), tire('S3', T0)],
        })
      ).trailer;
      const devices = await allIdPages(2, (afterId: string | undefined) => store.listTrailerDevices(unassigned.id, { afterId, limit: 2 }));
      assert.deepEqual(devices.map((device) => device.serial).sort(), ['S1', 'S2', 'S3']);
      assert.deepEqual(devices.map(idOf), devices.map(idOf).sort(byCodeUnit));
      const s2 = devices.find((device) => device.serial === 'S2')!;
      await store.setDeviceActive(s2.id, false, T0 + DAY);
      const after = await store.listTrailerDevices(unassigned.id, { limit: 10 });
      assert.deepEqual(
        after.map((device) => [device.serial, device.active, device.state, device.lastSeenAt]).sort(),
        [
          ['S1', true, WARNING, T0],
          ['S2', false, OK, T0],
          ['S3', true, OK, T0],
        ],
        'a device that last reported long ago still shows the operator flag (staleness is the read API\'s view)',
      );
      assert.deepEqual(await store.listTrailerDevices(uid('trailer'), { limit: 10 }), []);

      const fixes = await allTimePages(2, (afterKey) => store.listTrailerGps(unassigned.id, { ...ALL_TIME, after: afterKey, limit: 2 }));
      assert.deepEqual(fixes.map(timestampOf), [T0, T0 + MINUTE, T0 + 2 * MINUTE]);
      assertKeysAscend(fixes.map((row) => row.key));
      assert.deepEqual(fixes[1]!.record, fix(T0 + MINUTE));
      assert.deepEqual(
        (await store.listTrailerGps(unassigned.id, { from: T0 + MINUTE, to: T0 + 2 * MINUTE, limit: 10 })).map(timestampOf),
        [T0 + MINUTE],
        'from inclusive, to exclusive',
      );
    },
  },

  // lifecycle ---------------------------------------------------------------------------------------
  {
    group: 'lifecycle',
    name: 'ping answers on an open store and close can be called twice',
    async run(store) {
      await store.ping();
      await store.close();
      await store.close();
    },
  },

  // partner policies (issue 29) ---------------------------------------------------------------------
  {
    group: 'partner policies',
    name: 'grants are added once, listed by customer, partner or both in id order, and removed',
    async run(store) {
      const customer = await newCustomer(store);
      const other = await newCustomer(store);
      const partners = await Promise.all(
        ['a', 'b'].map((label) => store.createPartner({ id: uid(`partner-${label}`), name: label, product: 'gps-basic', keyHash: uid('hash'), createdAt: T0 })),
      );
      const [first, second] = [...partners].sort((x, y) => byCodeUnit(x.id, y.id));
      assert.equal(await store.addPartnerGrant({ customerId: customer.id, partnerId: second!.id, createdAt: T0 }), true);
      assert.equal(await store.addPartnerGrant({ customerId: customer.id, partnerId: first!.id, createdAt: T0 + 1 }), true);
      assert.equal(await store.addPartnerGrant({ customerId: customer.id, partnerId: first!.id, createdAt: T0 + 2 }), false, 'a second add changes nothing');
      assert.equal(await store.addPartnerGrant({ customerId: other.id, partnerId: first!.id, createdAt: T0 + 3 }), true);

      assert.deepEqual(await store.listPartnerGrants({ customerId: customer.id }), [
        { customerId: customer.id, partnerId: first!.id, createdAt: T0 + 1 },
        { customerId: customer.id, partnerId: second!.id, createdAt: T0 },
      ]);
      const [before, after] = [customer, other].sort((x, y) => byCodeUnit(x.id, y.id));
      assert.deepEqual(
        (await store.listPartnerGrants({ partnerId: first!.id })).map((grant) => grant.customerId),
        [before!.id, after!.id],
      );
      assert.deepEqual(await store.listPartnerGrants({ customerId: other.id, partnerId: first!.id }), [
        { customerId: other.id, partnerId: first!.id, createdAt: T0 + 3 },
      ]);
      assert.deepEqual(await store.listPartnerGrants({ customerId: other.id, partnerId: second!.id }), []);
      const all = await store.listPartnerGrants({});
      const mine = all.filter((grant) => grant.customerId === customer.id || grant.customerId === other.id);
      assert.equal(mine.length, 3);
      const keys = all.map((grant) => `${grant.customerId}\u0000${grant.partnerId}`);
      assert.deepEqual(keys, [...keys].sort(byCodeUnit), 'every grant, by customer then partner');

      assert.equal(await store.removePartnerGrant(customer.id, second!.id), true);
      assert.equal(await store.removePartnerGrant(customer.id, second!.id), false);
      assert.deepEqual((await store.listPartnerGrants({ customerId: customer.id })).map((grant) => grant.partnerId), [first!.id]);
    },
  },
  {
    group: 'partner policies',
    name: 'a grant names an existing customer and partner',
    async run(store) {
      const customer = await newCustomer(store);
      const partner = await store.createPartner({ id: uid('partner'), name: 'p', product: 'gps-basic', keyHash: uid('hash'), createdAt: T0 });
      await assertRejectsWith(store.addPartnerGrant({ customerId: uid('customer'), partnerId: partner.id, createdAt: T0 }), 'not_found');
      await assertRejectsWith(store.addPartnerGrant({ customerId: customer.id, partnerId: uid('partner'), createdAt: T0 }), 'not_found');
      assert.deepEqual(await store.listPartnerGrants({ customerId: customer.id }), []);
    },
  },
  {
    group: 'partner policies',
    name: "a partner's intake overrides are set, replaced, read and cleared",
    async run(store) {
      const partner = await store.createPartner({ id: uid('partner'), name: 'p', product: 'gps-basic', keyHash: uid('hash'), createdAt: T0 });
      assert.equal(await store.getPartnerIntakeLimits(partner.id), null);
      const both = { partnerId: partner.id, intake: { requests: 100, windowSeconds: 60 }, newVinsPerDay: 0, updatedAt: T0 };
      await store.setPartnerIntakeLimits(both);
      assert.deepEqual(await store.getPartnerIntakeLimits(partner.id), both);
      const capOnly = { partnerId: partner.id, intake: null, newVinsPerDay: 25, updatedAt: T0 + 1 };
      await store.setPartnerIntakeLimits(capOnly);
      assert.deepEqual(await store.getPartnerIntakeLimits(partner.id), capOnly, 'replaced, not merged');
      await store.setPartnerIntakeLimits({ partnerId: partner.id, intake: null, newVinsPerDay: null, updatedAt: T0 + 2 });
      assert.equal(await store.getPartnerIntakeLimits(partner.id), null, 'back to the defaults');
      await assertRejectsWith(store.setPartnerIntakeLimits({ partnerId: uid('partner'), intake: { requests: 1, windowSeconds: 1 }, newVinsPerDay: null, updatedAt: T0 }), 'not_found');
      await assertRejectsWith(store.setPartnerIntakeLimits({ partnerId: uid('partner'), intake: null, newVinsPerDay: null, updatedAt: T0 }), 'not_found');
    },
  },
  {
    group: 'partner policies',
    name: 'owners and grants asked side by side (as intake asks them, in one turn) each answer their own',
    async run(store) {
      const customers = [await newCustomer(store), await newCustomer(store)];
      const partner = await store.createPartner({ id: uid('partner'), name: 'p', product: 'gps-basic', keyHash: uid('hash'), createdAt: T0 });
      await store.addPartnerGrant({ customerId: customers[0]!.id, partnerId: partner.id, createdAt: T0 });
      const fleet = await newFleet(store, customers[0]!.id);
      const assigned = await newTrailer(store, fleet.id);
      const unassigned = await newTrailer(store, null);
      const unknown = vin();
      assert.deepEqual(await Promise.all([assigned.vin, unknown, unassigned.vin, assigned.vin].map((each) => store.vinOwner(each))), [
        { known: true, customerId: customers[0]!.id },
        { known: false, customerId: null },
        { known: true, customerId: null },
        { known: true, customerId: customers[0]!.id },
      ]);
      const [granted, none, again] = await Promise.all([customers[0]!.id, customers[1]!.id, customers[0]!.id].map((customerId) => store.listPartnerGrants({ customerId })));
      assert.deepEqual(granted, [{ customerId: customers[0]!.id, partnerId: partner.id, createdAt: T0 }]);
      assert.deepEqual(none, []);
      assert.deepEqual(again, granted);
      assert.notEqual(again, granted, 'each caller its own list');
    },
  },
  {
    group: 'partner policies',
    name: "a VIN's owner: unknown, unassigned, then the customer of the fleet it is assigned to",
    async run(store) {
      const customer = await newCustomer(store);
      const fleet = await newFleet(store, customer.id);
      assert.deepEqual(await store.vinOwner(vin()), { known: false, customerId: null });
      const trailer = await newTrailer(store, null);
      assert.deepEqual(await store.vinOwner(trailer.vin), { known: true, customerId: null });
      await store.assignTrailer(trailer.id, fleet.id, 'T-1');
      assert.deepEqual(await store.vinOwner(trailer.vin), { known: true, customerId: customer.id });
    },
  },
  {
    group: 'webhooks',
    name: "an endpoint is created under its customer's cap, read, listed by id, and deleted; another customer sees none of it",
    async run(store) {
      const customer = await newCustomer(store);
      const other = await newCustomer(store);
      const fleet = await newFleet(store, customer.id);
      const endpoint = (id: string, fleetIds: number[] | null = null) =>
        ({ id, customerId: customer.id, url: `https://hooks.example.com/${id}`, events: ['trailer.updated' as const], fleetIds, secret: `whsec_${id}`, createdAt: T0 });
      const [b, a, c] = [uid('b-hook'), uid('a-hook'), uid('c-hook')];
      const created = await store.webhooks.createWebhookEndpoint(endpoint(b, [fleet.id]), 2);
      assert.deepEqual(created, { id: b, customerId: customer.id, url: `https://hooks.example.com/${b}`, events: ['trailer.updated'], fleetIds: [fleet.id], status: 'active', createdAt: T0, failingSince: null });
      assert.ok(await store.webhooks.createWebhookEndpoint(endpoint(a), 2));
      assert.equal(await store.webhooks.createWebhookEndpoint(endpoint(c), 2), null, 'over the cap: nothing saved');
      assert.deepEqual((await store.webhooks.listWebhookEndpoints(customer.id, { limit: 10 })).map((e) => e.id), [a, b].sort(byCodeUnit));
      assert.deepEqual((await store.webhooks.listWebhookEndpoints(customer.id, { afterId: [a, b].sort(byCodeUnit)[0], limit: 10 })).map((e) => e.id), [[a, b].sort(byCodeUnit)[1]]);
      assert.deepEqual(await store.webhooks.getWebhookEndpoint(customer.id, b), created);
      assert.deepEqual(await store.webhooks.getWebhookTarget(customer.id, b), { id: b, customerId: customer.id, url: created!.url, secret: `whsec_${b}` });
      assert.equal(await store.webhooks.getWebhookEndpoint(other.id, b), null);
      assert.equal(await store.webhooks.getWebhookTarget(other.id, b), null);
      assert.deepEqual(await store.webhooks.listWebhookEndpoints(other.id, { limit: 10 }), []);
      assert.equal(await store.webhooks.deleteWebhookEndpoint(other.id, b), false);
      assert.equal(await store.webhooks.deleteWebhookEndpoint(customer.id, b), true);
      assert.equal(await store.webhooks.getWebhookEndpoint(customer.id, b), null);
      assert.ok(await store.webhooks.createWebhookEndpoint(endpoint(c), 2), 'a deleted endpoint frees its place under the cap');
    },
  },
  {
    group: 'webhooks',
    name: 'the telemetry write puts its events in the outbox of the endpoints that ask for them, in order; a delivery is formed, retried, delivered, and failing until resumed',
    async run(store) {
      const { customer, fleet, trailer } = await customerWithTrailer(store);
      const otherFleet = await newFleet(store, customer.id, 'South');
      const stranger = await customerWithTrailer(store);
      const hook = async (customerId: string, events: ('trailer.updated' | 'trailer.status_changed')[], fleetIds: number[] | null) =>
        (await store.webhooks.createWebhookEndpoint({ id: uid('hook'), customerId, url: 'https://hooks.example.com/x', events, fleetIds, secret: 'whsec_x', createdAt: T0 }, 10))!;
      const all = await hook(customer.id, ['trailer.updated', 'trailer.status_changed'], null);
      const statusOnly = await hook(customer.id, ['trailer.status_changed'], [fleet.id]);
      const elsewhere = await hook(customer.id, ['trailer.updated', 'trailer.status_changed'], [otherFleet.id]);
      const strangers = await hook(stranger.customer.id, ['trailer.updated', 'trailer.status_changed'], null);

      const first = await apply(store, trailer.vin, T0 + MINUTE, { gps: [fix(T0 + MINUTE - SECOND)] });
      assert.equal(first.statusChanged, false);
      const faulted = await apply(store, trailer.vin, T0 + 2 * MINUTE, { devices: [tire(uid('tire'), T0 + 2 * MINUTE - SECOND, FAULT)] });
      assert.equal(faulted.statusChanged, true);
      await apply(store, trailer.vin, T0 + 3 * MINUTE, { gps: [fix(T0 + 3 * MINUTE - SECOND, 46)] });

      const batching = { maxEvents: 100, lingerMs: 0 };
      let n = 0;
      const newId = () => `msg_${String(++n).padStart(4, '0')}_${randomUUID()}`;
      const now = T0 + 4 * MINUTE;
      const claimed = await store.webhooks.claimWebhookEndpoints('owner-1', now, MINUTE, 10, batching);
      assert.deepEqual(claimed.map((target) => target.id).sort(byCodeUnit), [all.id, statusOnly.id].sort(byCodeUnit), 'only endpoints with events, and only these');
      assert.deepEqual(await store.webhooks.claimWebhookEndpoints('owner-2', now, MINUTE, 10, batching), [], 'leased: no other owner gets them');
      assert.equal(elsewhere.id !== strangers.id, true);

      const send = (await store.webhooks.takeWebhookDelivery(all.id, now, { ...batching, newId }))!;
      const events = JSON.parse(send.body).events as Array<{ type: string; timestamp: string; data: { id: string; status: { name: string }; telemetry: { lat: number } } }>;
      assert.deepEqual(
        events.map((event) => [event.type, event.timestamp, event.data.id, event.data.status.name]),
        [
          ['trailer.updated', new Date(T0 + MINUTE).toISOString(), trailer.id, 'OK'],
          ['trailer.updated', new Date(T0 + 2 * MINUTE).toISOString(), trailer.id, 'Faulted'],
          ['trailer.status_changed', new Date(T0 + 2 * MINUTE).toISOString(), trailer.id, 'Faulted'],
          ['trailer.updated', new Date(T0 + 3 * MINUTE).toISOString(), trailer.id, 'Faulted'],
        ],
      );
      assert.equal(events[3]!.data.telemetry.lat, 46);
      assert.deepEqual({ ...send, body: undefined }, { id: send.id, body: undefined, eventCount: 4, attempts: 0, createdAt: now });
      assert.deepEqual(await store.webhooks.takeWebhookDelivery(all.id, now, { ...batching, newId }), send, 'taken again before it is settled (a crash): the same delivery, no new one');
      const statusSend = (await store.webhooks.takeWebhookDelivery(statusOnly.id, now, { ...batching, newId }))!;
      assert.deepEqual(JSON.parse(statusSend.body).events.map((event: { type: string }) => event.type), ['trailer.status_changed']);
      await store.webhooks.settleWebhookDelivery(statusOnly.id, statusSend.id, { kind: 'delivered', at: now, status: 204 });

      // A failed attempt: due again at its time, the same id and body.
      await store.webhooks.settleWebhookDelivery(all.id, send.id, { kind: 'retry', at: now, status: 503, error: 'answered 503', nextAttemptAt: now + MINUTE });
      await store.webhooks.releaseWebhookEndpoint(all.id, 'owner-2');
      assert.deepEqual(await store.webhooks.claimWebhookEndpoints('owner-2', now + SECOND, MINUTE, 10, batching), [], "another owner's release does not end the lease");
      await store.webhooks.releaseWebhookEndpoint(all.id, 'owner-1');
      await store.webhooks.releaseWebhookEndpoint(statusOnly.id, 'owner-1');
      assert.deepEqual(await store.webhooks.claimWebhookEndpoints('owner-2', now + SECOND, MINUTE, 10, batching), [], 'a retry waits for its time');
      assert.deepEqual((await store.webhooks.claimWebhookEndpoints('owner-2', now + MINUTE, MINUTE, 10, batching)).map((t) => t.id), [all.id]);
      const again = (await store.webhooks.takeWebhookDelivery(all.id, now + MINUTE, { ...batching, newId }))!;
      assert.deepEqual([again.id, again.body, again.attempts], [send.id, send.body, 1]);
      assert.deepEqual(
        (await store.webhooks.listWebhookDeliveries(customer.id, all.id, { limit: 10 })).map((d) => [d.id, d.state, d.attempts, d.lastStatus, d.lastError, d.nextAttemptAt, d.eventCount]),
        [[send.id, 'pending', 1, 503, 'answered 503', now + MINUTE, 4]],
      );
      assert.deepEqual(await store.webhooks.listWebhookDeliveries(stranger.customer.id, all.id, { limit: 10 }), [], "another customer's endpoint lists nothing");

      // Refused for the whole retry period: the endpoint is failing and is claimed no more, until resumed.
      await store.webhooks.settleWebhookDelivery(all.id, send.id, { kind: 'failing', at: now + 2 * MINUTE, status: null, error: 'timed out' });
      await store.webhooks.releaseWebhookEndpoint(all.id, 'owner-2');
      assert.deepEqual((await store.webhooks.getWebhookEndpoint(customer.id, all.id))!.status, 'failing');
      assert.deepEqual(await store.webhooks.claimWebhookEndpoints('owner-3', now + HOUR, MINUTE, 10, batching), [], 'a failing endpoint is not claimed');
      const resumed = (await store.webhooks.resumeWebhookEndpoint(customer.id, all.id, now + HOUR))!;
      assert.deepEqual([resumed.status, resumed.failingSince], ['active', null]);
      assert.equal(await store.webhooks.resumeWebhookEndpoint(stranger.customer.id, all.id, now + HOUR), null);
      assert.deepEqual((await store.webhooks.claimWebhookEndpoints('owner-3', now + HOUR, MINUTE, 10, batching)).map((t) => t.id), [all.id]);
      const resent = (await store.webhooks.takeWebhookDelivery(all.id, now + HOUR, { ...batching, newId }))!;
      assert.deepEqual([resent.id, resent.createdAt], [send.id, now + HOUR], 'the retry period starts again at the resumption');
      await store.webhooks.settleWebhookDelivery(all.id, send.id, { kind: 'delivered', at: now + HOUR, status: 200 });
      const [delivered] = await store.webhooks.listWebhookDeliveries(customer.id, all.id, { limit: 10 });
      assert.deepEqual([delivered!.state, delivered!.attempts, delivered!.deliveredAt, delivered!.nextAttemptAt, delivered!.lastError], ['delivered', 3, now + HOUR, null, null]);
      assert.equal(await store.webhooks.takeWebhookDelivery(all.id, now + HOUR, { ...batching, newId }), null, 'nothing left in its outbox');
      await store.webhooks.purgeWebhookDeliveries(now + HOUR, 1000);
      assert.equal((await store.webhooks.listWebhookDeliveries(customer.id, all.id, { limit: 10 })).length, 1, 'kept until older than the cut');
      assert.ok((await store.webhooks.purgeWebhookDeliveries(now + HOUR + 1, 1000)) >= 1);
      assert.deepEqual(await store.webhooks.listWebhookDeliveries(customer.id, all.id, { limit: 10 }), []);
    },
  },
  {
    group: 'webhooks',
    name: 'a delivery holds at most maxEvents, and fewer only once the oldest has waited lingerMs; a lease lapses',
    async run(store) {
      const { customer, trailer } = await customerWithTrailer(store);
      const endpoint = (await store.webhooks.createWebhookEndpoint({ id: uid('hook'), customerId: customer.id, url: 'https://hooks.example.com/x', events: ['trailer.updated'], fleetIds: null, secret: 'whsec_x', createdAt: T0 }, 10))!;
      for (let i = 1; i <= 5; i++) await apply(store, trailer.vin, T0 + i * SECOND, { gps: [fix(T0 + i * SECOND)] });
      const newId = () => uid('msg');
      const lingering = { maxEvents: 10, lingerMs: MINUTE };
      assert.deepEqual(await store.webhooks.claimWebhookEndpoints('a', T0 + 30 * SECOND, MINUTE, 10, lingering), [], 'five events, the oldest 29 s old: not yet');
      assert.equal(await store.webhooks.takeWebhookDelivery(endpoint.id, T0 + 30 * SECOND, { ...lingering, newId }), null);
      assert.equal((await store.webhooks.claimWebhookEndpoints('a', T0 + 30 * SECOND, MINUTE, 10, { maxEvents: 5, lingerMs: MINUTE })).length, 1, 'a full delivery goes at once');
      assert.equal((await store.webhooks.claimWebhookEndpoints('b', T0 + 30 * SECOND + MINUTE - 1, MINUTE, 10, lingering)).length, 0, 'leased');
      assert.equal((await store.webhooks.claimWebhookEndpoints('b', T0 + 30 * SECOND + MINUTE, MINUTE, 10, lingering)).length, 1, 'the lease lapsed');
      const first = (await store.webhooks.takeWebhookDelivery(endpoint.id, T0 + 2 * MINUTE, { maxEvents: 3, lingerMs: MINUTE, newId }))!;
      assert.equal(first.eventCount, 3);
      await store.webhooks.settleWebhookDelivery(endpoint.id, first.id, { kind: 'delivered', at: T0 + 2 * MINUTE, status: 204 });
      const second = (await store.webhooks.takeWebhookDelivery(endpoint.id, T0 + 2 * MINUTE, { maxEvents: 3, lingerMs: MINUTE, newId }))!;
      assert.equal(second.eventCount, 2);
      const times = [...JSON.parse(first.body).events, ...JSON.parse(second.body).events].map((event: { data: { telemetry: { timestamp: string } } }) => event.data.telemetry.timestamp);
      assert.deepEqual(times, [1, 2, 3, 4, 5].map((i) => new Date(T0 + i * SECOND).toISOString()), 'in write order, each once');
    },
  },
];
