/**
 * The PostgreSQL store: the shared store conformance suite on a schema of its own, then what is
 * PostgreSQL's own — option validation, migrations raced by several stores and refusing unknown
 * history, several stores (processes, in effect) on one schema seeing each other's writes and taking
 * turns on one trailer, a batch of a hundred thousand fixes, and the query plans behind the promises
 * that a time page costs the same however deep it is and that a batch's owners are read through the
 * VIN index, statistics or not. Needs `TRAILWIRE_TEST_DATABASE_URL`; every schema it creates is
 * named `tw_test_<random>` and dropped at the end.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import {
  applyPostgresMigrations,
  openPostgresStore,
  POSTGRES_STORE_COMPONENT,
  POSTGRES_STORE_MIGRATIONS,
  type PostgresMigration,
  type PostgresStore,
  type PostgresStoreOptions,
} from '../../../adapters/postgres/index.ts';
import { createPostgresPool } from '../../../adapters/postgres/pool.ts';
import { storeStatements } from '../../../adapters/postgres/postgres-store.ts';
import type { CanonicalDeviceReading } from '../../../core/canonical.ts';
import { TrailwireError } from '../../../core/errors.ts';
import type { GpsFix } from '../../../core/model.ts';
import type { TimeKey } from '../../../core/store.ts';
import { runStoreConformance } from '../../conformance/store.ts';
import { uniqueVin } from '../../support/fixtures.ts';

const DATABASE_URL = process.env.TRAILWIRE_TEST_DATABASE_URL;
const T0 = Date.UTC(2026, 0, 1);
const VIN = '1M8GDM9AXKP042788';

const freshSchema = (): string => `tw_test_${randomBytes(6).toString('hex')}`;

function assertTrailwireError(code: TrailwireError['code']) {
  return (error: unknown): true => {
    assert.ok(error instanceof TrailwireError, `a TrailwireError, got ${String(error)}`);
    assert.equal(error.code, code);
    return true;
  };
}

describe('openPostgresStore options', () => {
  const cases: [string, Partial<Record<keyof PostgresStoreOptions, unknown>>][] = [
    ['connectionString', { connectionString: '' }],
    ['connectionString', { connectionString: 'mysql://localhost/test' }],
    ['schema', { schema: 'Trailwire' }],
    ['schema', { schema: 'tw; DROP TABLE x' }],
    ['schema', { schema: 'x'.repeat(64) }],
    ['poolSize', { poolSize: 0 }],
    ['poolSize', { poolSize: 2.5 }],
    ['connectTimeoutMs', { connectTimeoutMs: -1 }],
    ['ids', { ids: 'uuid' }],
  ];
  for (const [field, override] of cases) {
    it(`rejects ${field} = ${JSON.stringify(override[field as keyof PostgresStoreOptions])}, naming the field, before connecting`, async () => {
      // The URL points nowhere: a check that connected first would fail differently.
      const options = { connectionString: 'postgres://nobody@127.0.0.1:1/none', ...override } as PostgresStoreOptions;
      await assert.rejects(openPostgresStore(options), (error: unknown) => {
        assertTrailwireError('validation_failed')(error);
        assert.deepEqual((error as TrailwireError).errors?.map((fieldError) => fieldError.path), [field]);
        assert.match((error as Error).message, new RegExp(`\\b${field}\\b`));
        return true;
      });
    });
  }
});

describe('PostgreSQL store', { skip: DATABASE_URL === undefined ? 'TRAILWIRE_TEST_DATABASE_URL is not set' : false }, () => {
  const connectionString = DATABASE_URL!;
  const schemas: string[] = [];
  const admin = new pg.Pool({ connectionString, max: 2 });
  /** A schema name this file drops at the end. */
  const newSchema = (): string => {
    const schema = freshSchema();
    schemas.push(schema);
    return schema;
  };
  const open = (schema: string, options: Partial<PostgresStoreOptions> = {}): Promise<PostgresStore> =>
    openPostgresStore({ connectionString, schema, poolSize: 4, ...options });

  after(async () => {
    for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  });

  // One schema for the whole suite: every case makes records with fresh ids (see the suite's header).
  const conformanceSchema = newSchema();
  runStoreConformance({ name: 'postgres (one schema for the suite)', openStore: () => open(conformanceSchema) });

  describe('migrations', () => {
    it('creates the schema and records each store migration once when several stores open it at once', async () => {
      const schema = newSchema();
      const stores = await Promise.all(Array.from({ length: 4 }, () => open(schema, { poolSize: 1 })));
      try {
        const recorded = await admin.query<{ component: string; name: string }>(
          `SELECT component, name FROM "${schema}".trailwire_migrations ORDER BY component, position`,
        );
        assert.deepEqual(
          recorded.rows,
          POSTGRES_STORE_MIGRATIONS.map((migration) => ({ component: POSTGRES_STORE_COMPONENT, name: migration.name })),
        );
        const customer = await stores[0]!.createCustomer({ id: 'c-1', name: 'Acme', keyHash: 'h-1', createdAt: T0 });
        for (const store of stores) assert.deepEqual(await store.getPrincipal('customers', 'c-1'), { audience: 'customers', ...customer });
      } finally {
        await Promise.all(stores.map((store) => store.close()));
      }
    });

    it('applies only what is pending, in order, per component; a failing migration leaves nothing behind', async () => {
      const schema = newSchema();
      const pool = createPostgresPool({ connectionString, poolSize: 2, connectTimeoutMs: 5000 });
      try {
        const first: PostgresMigration = { name: '0001_notes', up: 'CREATE TABLE notes (id INTEGER PRIMARY KEY)' };
        const second: PostgresMigration = {
          name: '0002_note_text',
          up: async (client) => {
            await client.query('ALTER TABLE notes ADD COLUMN body TEXT');
          },
        };
        assert.deepEqual(await applyPostgresMigrations(pool, schema, 'notes', [first]), ['0001_notes']);
        assert.deepEqual(await applyPostgresMigrations(pool, schema, 'notes', [first]), [], 'nothing pending');
        assert.deepEqual(await applyPostgresMigrations(pool, schema, 'notes', [first, second]), ['0002_note_text']);
        const otherFirst: PostgresMigration = { name: '0001_notes', up: 'CREATE TABLE other_notes (id INTEGER PRIMARY KEY)' };
        assert.deepEqual(await applyPostgresMigrations(pool, schema, 'other', [otherFirst]), ['0001_notes'], 'another component keeps its own history');

        const broken: PostgresMigration = { name: '0003_broken', up: 'ALTER TABLE notes ADD COLUMN extra TEXT; SELECT * FROM missing_table' };
        await assert.rejects(applyPostgresMigrations(pool, schema, 'notes', [first, second, broken]), /missing_table/);
        const columns = await pool.query(
          `SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'notes' ORDER BY column_name`,
          [schema],
        );
        assert.deepEqual(columns.rows.map((row) => row.column_name), ['body', 'id'], 'the failed migration changed nothing');
        const names = await pool.query(`SELECT name FROM "${schema}".trailwire_migrations WHERE component = 'notes' ORDER BY position`);
        assert.deepEqual(names.rows.map((row) => row.name), ['0001_notes', '0002_note_text']);
      } finally {
        await pool.end();
      }
    });

    it('refuses a schema holding a migration this version does not know', async () => {
      const schema = newSchema();
      const store = await open(schema);
      await store.close();
      await admin.query(
        `INSERT INTO "${schema}".trailwire_migrations (component, position, name, applied_at) VALUES ('store', ${POSTGRES_STORE_MIGRATIONS.length}, '9999_from_the_future', 0)`,
      );
      await assert.rejects(open(schema), (error: unknown) => {
        assertTrailwireError('internal')(error);
        assert.match((error as Error).message, /9999_from_the_future/);
        return true;
      });
    });
  });

  describe('several stores on one schema', () => {
    const schema = newSchema();
    let a: PostgresStore;
    let b: PostgresStore;
    before(async () => {
      [a, b] = await Promise.all([open(schema), open(schema)]);
    });
    after(async () => {
      await Promise.all([a.close(), b.close()]);
    });

    it("each sees the other's writes", async () => {
      const customer = await a.createCustomer({ id: 'acme', name: 'Acme', keyHash: 'acme-key', createdAt: T0 });
      assert.deepEqual(await b.findPrincipalByKeyHash('customers', 'acme-key'), { audience: 'customers', ...customer });
      const fleet = await b.createFleet({ customerId: customer.id, name: 'North', createdAt: T0 });
      const trailer = await a.createTrailer({ id: 'trailer-1', fleetId: fleet.id, vin: VIN, unitId: null, createdAt: T0 });
      await b.applyTelemetry({ vin: VIN, at: T0, telemetry: { gps: [fix(T0 + 1)], devices: [], cargosafe: [] } });
      assert.deepEqual((await a.getTrailer(customer.id, trailer.id))?.telemetry, fix(T0 + 1));
      await assert.rejects(b.createTrailer({ id: 'trailer-2', fleetId: fleet.id, vin: VIN, unitId: null, createdAt: T0 }), assertTrailwireError('conflict'));
      assert.equal(await a.getOrCreateSecret('shared', 'from-a'), 'from-a');
      assert.equal(await b.getOrCreateSecret('shared', 'from-b'), 'from-a');
    });

    it('writes of one unknown VIN racing from both create exactly one trailer', async () => {
      const vin = '2M8GDM9AXKP042789';
      const results = await Promise.all(
        Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? a : b).applyTelemetry({ vin, at: T0, telemetry: { gps: [fix(T0 + i)], devices: [], cargosafe: [] } })),
      );
      assert.equal(new Set(results.map((result) => result.trailer.id)).size, 1, 'one trailer');
      assert.equal(results.filter((result) => result.createdTrailer).length, 1, 'created by exactly one write');
      const stored = await admin.query(`SELECT count(*)::int AS n FROM "${schema}".gps_fixes WHERE trailer_id = $1`, [results[0]!.trailer.id]);
      assert.equal(stored.rows[0].n, 8, 'every write kept its fix');
      assert.equal((await a.findTrailerByVin(vin))?.telemetry?.timestamp, T0 + 7, 'the latest fix is the newest of all writes');
    });

    it("concurrent writes to one trailer take turns: the counts include every write's devices", async () => {
      const vin = '3M8GDM9AXKP042780';
      const faulted = (serial: string): CanonicalDeviceReading => ({
        kind: 'tpms',
        serial,
        position: null,
        timestamp: T0,
        metrics: { pressurePsi: 60 },
        state: { isWarning: false, isFault: true },
      });
      await a.applyTelemetry({ vin, at: T0, telemetry: { gps: [], devices: [], cargosafe: [] } });
      await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          (i % 2 === 0 ? a : b).applyTelemetry({ vin, at: T0 + i, telemetry: { gps: [], devices: [faulted(`S${i}`)], cargosafe: [] } }),
        ),
      );
      const trailer = await b.findTrailerByVin(vin);
      assert.deepEqual([trailer?.statusName, trailer?.faultedDevices, trailer?.warningDevices], ['Faulted', 12, 0]);
    });

    it('devices switched off on one store while the other writes faults to the same trailer leave counts that match the devices', async () => {
      const customer = await a.createCustomer({ id: 'switcher', name: 'Switcher', keyHash: 'switcher-key', createdAt: T0 });
      const fleet = await a.createFleet({ customerId: customer.id, name: 'Switch', createdAt: T0 });
      const vin = '5M8GDM9AXKP042781';
      const trailer = await a.createTrailer({ id: 'switch-trailer', fleetId: fleet.id, vin, unitId: null, createdAt: T0 });
      const faulted = (serial: string, timestamp: number): CanonicalDeviceReading => ({
        kind: 'tpms',
        serial,
        position: null,
        timestamp,
        metrics: { pressurePsi: 60 },
        state: { isWarning: false, isFault: true },
      });
      await a.applyTelemetry({ vin, at: T0, telemetry: { gps: [], devices: ['A0', 'A1', 'A2', 'A3', 'A4', 'A5'].map((serial) => faulted(serial, T0)), cargosafe: [] } });
      const existing = await a.listDevices(customer.id, trailer.id, { limit: 50, activeOnly: false, staleBefore: 0 });
      await Promise.all([
        // Switches and writes interleave on the trailer's row lock; none may deadlock or count stale rows.
        ...existing.map((device, i) => (i % 2 === 0 ? a : b).setDeviceActive(device.id, false, T0 + 1)),
        ...Array.from({ length: 6 }, (_, i) =>
          (i % 2 === 0 ? b : a).applyTelemetry({ vin, at: T0 + 1, telemetry: { gps: [], devices: [faulted(`B${i}`, T0 + 1), faulted(`A${i}`, T0 + 1)], cargosafe: [] } }),
        ),
      ]);
      const after = await b.getTrailer(customer.id, trailer.id);
      const devices = await b.listDevices(customer.id, trailer.id, { limit: 50, activeOnly: true, staleBefore: 0 });
      assert.deepEqual(devices.map((device) => device.serial).sort(), ['B0', 'B1', 'B2', 'B3', 'B4', 'B5']);
      assert.deepEqual([after?.statusName, after?.faultedDevices, after?.warningDevices], ['Faulted', 6, 0]);
    });

    it('a cargosafe unit created while its trailer is being assigned follows the trailer into the fleet', async () => {
      const customer = await a.createCustomer({ id: 'racer', name: 'Racer', keyHash: 'racer-key', createdAt: T0 });
      const fleet = await a.createFleet({ customerId: customer.id, name: 'Race', createdAt: T0 });
      for (let round = 0; round < 20; round++) {
        const vin = `4M8GDM9AXKP${String(round).padStart(6, '0')}`;
        const { trailer } = await a.applyTelemetry({ vin, at: T0, telemetry: { gps: [], devices: [], cargosafe: [] } });
        const cargo = { serial: `C-${round}`, timestamp: T0, doorOpen: false, loadPercent: 10, temperatureC: 4, humidityPercent: 50 };
        await Promise.all([
          b.applyTelemetry({ vin, at: T0, telemetry: { gps: [], devices: [], cargosafe: [cargo] } }),
          a.assignTrailer(trailer.id, fleet.id, null),
        ]);
      }
      const units = await a.listCargosafe(customer.id, { limit: 50 });
      assert.deepEqual(units.map((unit) => unit.serial).sort(), Array.from({ length: 20 }, (_, round) => `C-${round}`).sort());
    });

    it('batches of many VINs, known and unknown, overlapping in opposite orders, all commit (no deadlock)', async () => {
      const vins = Array.from({ length: 12 }, (_, i) => `6M8GDM9AXKP${String(i).padStart(6, '0')}`);
      await a.applyTelemetryBatch(vins.slice(0, 6).map((vin) => ({ vin, at: T0, telemetry: { gps: [], devices: [], cargosafe: [] } })));
      const batchOf = (order: string[], second: number) =>
        order.map((vin) => ({ vin, at: T0 + 60_000, telemetry: { gps: [fix(T0 + second * 1000)], devices: [], cargosafe: [] } }));
      await Promise.all(
        Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? a : b).applyTelemetryBatch(batchOf(i % 2 === 0 ? vins : [...vins].reverse(), i))),
      );
      const stored = await admin.query(
        `SELECT count(*)::int AS n FROM "${schema}".gps_fixes g JOIN "${schema}".trailers t ON t.id = g.trailer_id WHERE t.vin = ANY($1)`,
        [vins],
      );
      assert.equal(stored.rows[0].n, 8 * vins.length, 'every batch wrote every fix');
      const trailers = await admin.query(`SELECT count(*)::int AS n FROM "${schema}".trailers WHERE vin = ANY($1)`, [vins]);
      assert.equal(trailers.rows[0].n, vins.length, 'each unknown VIN created once');
    });

    it("a batch's round trips to the database do not grow with its size", async () => {
      const statementsFor = async (items: number) => {
        const batch = Array.from({ length: items }, (_, i) => ({
          vin: `7M8GDM9AXKP${String(items).padStart(3, '0')}${String(i % (items / 2)).padStart(3, '0')}`,
          at: T0 + 60_000,
          telemetry: {
            gps: [fix(T0 + i * 1000)],
            devices: [{ kind: 'tpms', serial: `S${i % 3}`, position: null, timestamp: T0 + i, metrics: { pressurePsi: 60 }, state: { isWarning: i % 2 === 0, isFault: false } }],
            cargosafe: [{ serial: 'C1', timestamp: T0 + i, doorOpen: false, loadPercent: i, temperatureC: 4, humidityPercent: 50 }],
          },
        }));
        let queries = 0;
        // Counts the statements sent on the connections the store takes from its pool meanwhile.
        const connect = a.pool.connect.bind(a.pool);
        a.pool.connect = (async () => {
          const client = await connect();
          const { query, release } = client;
          // The probe for webhook endpoints runs at most once a second whatever the batch's size (its
          // answer is kept that long), so whether it falls into one of the two batches is the clock's doing.
          const counts = (statement: unknown) => !/webhook_endpoints LIMIT 1/.test((statement as { text?: string })?.text ?? String(statement));
          client.query = ((...args: unknown[]) => (counts(args[0]) && queries++, (query as (...a: unknown[]) => unknown).apply(client, args))) as typeof client.query;
          client.release = (error?: Error | boolean) => {
            Object.assign(client, { query, release });
            return release.call(client, error);
          };
          return client;
        }) as typeof a.pool.connect;
        try {
          const applied = await a.applyTelemetryBatch(batch);
          assert.equal(applied.size, items / 2);
        } finally {
          a.pool.connect = connect as typeof a.pool.connect;
        }
        return queries;
      };
      const small = await statementsFor(2);
      assert.ok(small >= 10 && small <= 16, `a batch of every kind of record takes a handful of statements (${small})`);
      assert.equal(await statementsFor(200), small, 'a hundred times the items, the same statements');
    });
  });

  describe("intake's lookups", () => {
    it("the owners and grants asked in one turn take one statement each, whatever their number (issue 41)", async () => {
      const store = await open(conformanceSchema);
      const partner = await store.createPartner({ id: randomUUID(), name: 'p', product: 'gps-basic', keyHash: randomUUID(), createdAt: T0 });
      const customerIds: string[] = [];
      const vins: string[] = [];
      for (let i = 0; i < 5; i++) {
        const customer = await store.createCustomer({ id: randomUUID(), name: `c${i}`, keyHash: randomUUID(), createdAt: T0 });
        await store.addPartnerGrant({ customerId: customer.id, partnerId: partner.id, createdAt: T0 });
        const fleet = await store.createFleet({ customerId: customer.id, name: 'f', createdAt: T0 });
        for (let j = 0; j < 4; j++)
          vins.push((await store.createTrailer({ id: randomUUID(), fleetId: fleet.id, vin: uniqueVin(), unitId: null, createdAt: T0 })).vin);
        customerIds.push(customer.id);
      }
      let queries = 0;
      const query = store.pool.query.bind(store.pool);
      store.pool.query = ((...args: Parameters<typeof query>) => (queries++, query(...args))) as typeof store.pool.query;
      try {
        const owners = await Promise.all(vins.map((vin) => store.vinOwner(vin)));
        assert.deepEqual(owners.map((owner) => owner.customerId), customerIds.flatMap((id) => [id, id, id, id]));
        assert.equal(queries, 1, `the owners of ${vins.length} VINs in one statement`);
        const grants = await Promise.all(customerIds.map((customerId) => store.listPartnerGrants({ customerId })));
        assert.deepEqual(grants.map((list) => list.map((grant) => grant.customerId)), customerIds.map((id) => [id]));
        assert.equal(queries, 2, `the grants of ${customerIds.length} customers in one statement`);
      } finally {
        store.pool.query = query as typeof store.pool.query;
        await store.close();
      }
    });

    it("the owners of a processing batch's hundreds of VINs are read through the VIN index, the table never analyzed (issue 41)", async () => {
      const schema = newSchema();
      const store = await open(schema);
      const customer = await store.createCustomer({ id: randomUUID(), name: 'c', keyHash: randomUUID(), createdAt: T0 });
      const fleet = await store.createFleet({ customerId: customer.id, name: 'f', createdAt: T0 });
      // 5,000 trailers written at once and no ANALYZE: what a bulk import leaves before autovacuum.
      await store.pool.query(
        `INSERT INTO "${schema}".trailers (id, fleet_id, vin, status_name, status_date, created_at)
         SELECT 'trailer-' || g, $1, 'VIN' || lpad(g::text, 14, '0'), 'OK', 0, 0 FROM generate_series(1, 5000) AS g`,
        [fleet.id],
      );
      const vins = Array.from({ length: 300 }, (_, i) => `VIN${String(1 + i * 16).padStart(14, '0')}`);
      try {
        assert.deepEqual(new Set((await Promise.all(vins.map((vin) => store.vinOwner(vin)))).map((owner) => owner.customerId)), new Set([customer.id]));
        const statement = storeStatements(schema).vinOwners;
        const [{ 'QUERY PLAN': [plan] }] = (await store.pool.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${statement.text}`, [vins])).rows;
        const scans = planNodes(plan.Plan).filter((node) => node['Relation Name'] === 'trailers');
        assert.equal(scans.length, 1);
        assert.match(scans[0]!['Node Type'], /Index|Bitmap Heap/, `the VIN index, got ${scans[0]!['Node Type']}`);
        const rowsRead = scans[0]!['Actual Rows'] + (scans[0]!['Rows Removed by Filter'] ?? 0);
        assert.ok(rowsRead <= 300, `300 VINs read ${rowsRead} trailers`);
      } finally {
        await store.close();
      }
    });
  });

  it("a page of the trailer change feed is one statement, however many changes it holds (issue 41)", async () => {
    const store = await open(conformanceSchema);
    const customer = await store.createCustomer({ id: randomUUID(), name: 'c', keyHash: randomUUID(), createdAt: T0 });
    const fleet = await store.createFleet({ customerId: customer.id, name: 'f', createdAt: T0 });
    const after = await store.latestTrailerChange();
    const trailers: Array<{ id: string; vin: string }> = [];
    for (let i = 0; i < 6; i++) {
      const trailer = await store.createTrailer({ id: randomUUID(), fleetId: i % 2 === 0 ? fleet.id : null, vin: uniqueVin(), unitId: null, createdAt: T0 });
      await store.noteTrailerChange(trailer.id, T0 + i);
      trailers.push(trailer);
    }
    let queries = 0;
    const query = store.pool.query.bind(store.pool);
    store.pool.query = ((...args: Parameters<typeof query>) => (queries++, query(...args))) as typeof store.pool.query;
    try {
      const changes = (await store.trailerChangesAfter(after, 100)).filter((change) => trailers.some((trailer) => trailer.id === change.trailer.id));
      assert.equal(queries, 1);
      assert.deepEqual(changes.map((change) => [change.trailer.vin, change.fleet?.id ?? null]), trailers.map((trailer, i) => [trailer.vin, i % 2 === 0 ? fleet.id : null]));
      assert.deepEqual(changes[0]!.fleet, fleet);
    } finally {
      store.pool.query = query as typeof store.pool.query;
      await store.close();
    }
  });

  describe('large batches and deep pages', () => {
    const schema = newSchema();
    const FIXES = 100_000;
    let store: PostgresStore;
    let customerId: string;
    let trailerId: string;
    before(async () => {
      store = await open(schema);
      const customer = await store.createCustomer({ id: 'big', name: 'Big Fleet', keyHash: 'big-key', createdAt: T0 });
      const fleet = await store.createFleet({ customerId: customer.id, name: 'All', createdAt: T0 });
      const trailer = await store.createTrailer({ id: 'big-trailer', fleetId: fleet.id, vin: VIN, unitId: null, createdAt: T0 });
      [customerId, trailerId] = [customer.id, trailer.id];
    });
    after(() => store.close());

    it('applies 100,000 fixes in one batch, and the same batch again adds nothing', async () => {
      // Newest first, so the latest fix has to be found, not just taken from the end.
      const gps = Array.from({ length: FIXES }, (_, i) => fix(T0 + (FIXES - i) * 1000, i % 90));
      // Processed as the newest fix is taken: none of them lies in the future.
      const at = T0 + FIXES * 1000;
      const applied = await store.applyTelemetry({ vin: VIN, at, telemetry: { gps, devices: [], cargosafe: [] } });
      assert.deepEqual(applied.trailer.telemetry, gps[0]);
      await store.applyTelemetry({ vin: VIN, at, telemetry: { gps, devices: [], cargosafe: [] } });
      const count = await store.pool.query(`SELECT count(*)::int AS n FROM "${schema}".gps_fixes`);
      assert.equal(count.rows[0].n, FIXES);
      const firstPage = await store.listGps(customerId, trailerId, { from: 0, to: T0 * 2, limit: 3 });
      assert.deepEqual(firstPage.map((row) => row.record), gps.slice(-3).reverse(), 'ascending by timestamp');
    });

    it('a deep time page seeks the index at its cursor: it reads about as many rows as it returns', async () => {
      await store.pool.query(`ANALYZE "${schema}".gps_fixes`);
      const deep = await store.listGps(customerId, trailerId, { from: 0, to: T0 * 2, limit: 1, after: await keyAt(FIXES - 100) });
      assert.equal(deep.length, 1);
      const statement = storeStatements(schema).customerGps;
      // [trailer, customer, afterTimestamp, afterSeq, to, limit], as the store passes them.
      const values = [trailerId, customerId, deep[0]!.key.timestamp, deep[0]!.key.seq, T0 * 2, 50];
      const client = await store.pool.connect();
      try {
        // The store's statements are named, so after a few runs PostgreSQL may plan them once for any
        // parameters (a generic plan); both that plan and one made for these values must seek.
        for (const mode of ['force_custom_plan', 'force_generic_plan']) {
          await client.query(`SET plan_cache_mode = ${mode}`);
          await client.query(`PREPARE tw_deep_page (text, text, bigint, bigint, bigint, bigint) AS ${statement.text}`);
          try {
            const args = values.map((value) => (typeof value === 'string' ? client.escapeLiteral(value) : String(value))).join(', ');
            const [{ 'QUERY PLAN': [plan] }] = (await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE tw_deep_page (${args})`)).rows;
            const scans = planNodes(plan.Plan).filter((node) => node['Relation Name'] === 'gps_fixes');
            assert.equal(scans.length, 1, mode);
            const scan = scans[0]!;
            assert.match(scan['Node Type'], /Index/, `${mode}: an index scan, got ${scan['Node Type']}`);
            assert.match(String(scan['Index Cond']), /"?timestamp"? >=/, `${mode}: the cursor's timestamp bounds the index scan`);
            const rowsRead = scan['Actual Rows'] + (scan['Rows Removed by Filter'] ?? 0) + (scan['Rows Removed by Index Recheck'] ?? 0);
            assert.ok(rowsRead <= 52, `${mode}: a 50-row page 99,900 rows deep read ${rowsRead} rows`);
          } finally {
            await client.query('DEALLOCATE tw_deep_page');
          }
        }
      } finally {
        await client.query('RESET plan_cache_mode').catch(() => {});
        client.release();
      }
    });

    async function keyAt(index: number): Promise<TimeKey> {
      const row = await store.pool.query(`SELECT timestamp, seq FROM "${schema}".gps_fixes ORDER BY timestamp OFFSET $1 LIMIT 1`, [index]);
      return { timestamp: row.rows[0].timestamp, seq: row.rows[0].seq };
    }
  });

  describe('lifecycle', () => {
    it('ping after close is unavailable; BIGINT columns come back as numbers', async () => {
      const store = await open(conformanceSchema);
      await store.ping();
      const { rows } = await store.pool.query('SELECT 9007199254740991::bigint AS big');
      assert.equal(rows[0].big, Number.MAX_SAFE_INTEGER);
      await assert.rejects(store.pool.query('SELECT 9007199254740993::bigint AS big'), /does not fit/);
      await store.close();
      await assert.rejects(store.ping(), assertTrailwireError('unavailable'));
    });
  });
});

function fix(timestamp: number, lat = 45.5): GpsFix {
  return { timestamp, lat, long: -122.6, speed: 55, heading: 'NE' };
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Cond'?: string;
  'Actual Rows': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

function planNodes(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(planNodes)];
}
