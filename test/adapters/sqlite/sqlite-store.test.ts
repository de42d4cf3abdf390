/**
 * The SQLite store: the shared store conformance suite on a fresh temporary file per case, then what is
 * SQLite's own — option validation, connection settings, migrations shared by several components and
 * raced by several processes, two connections on one file, data surviving a reopen, and the query plans
 * behind the promise that a page costs the same however deep it is.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import {
  applyMigrations,
  openSqliteStore,
  STORE_COMPONENT,
  STORE_MIGRATIONS,
  type Migration,
  type SqliteStoreOptions,
} from '../../../adapters/sqlite/index.ts';
import { storeStatementSources } from '../../../adapters/sqlite/sqlite-store.ts';
import { TrailwireError } from '../../../core/errors.ts';
import type { TimeKey } from '../../../core/store.ts';
import { runStoreConformance } from '../../conformance/store.ts';

const directory = mkdtempSync(join(tmpdir(), 'trailwire-sqlite-'));
after(() => rmSync(directory, { recursive: true, force: true }));
let files = 0;
const freshFile = (): string => join(directory, `store-${++files}.db`);

runStoreConformance({ name: 'sqlite (a temporary file per case)', openStore: () => openSqliteStore({ file: freshFile() }) });

const T0 = Date.UTC(2026, 0, 1);
const VIN = '1M8GDM9AXKP042788';

function appliedMigrations(db: Database.Database, component: string): string[] {
  return db
    .prepare<[string], { name: string }>('SELECT name FROM trailwire_migrations WHERE component = ? ORDER BY position')
    .all(component)
    .map((row) => row.name);
}

describe('openSqliteStore options', () => {
  const cases: [string, Partial<Record<keyof SqliteStoreOptions, unknown>>][] = [
    ['file', { file: '' }],
    ['file', { file: 42 }],
    ['durability', { durability: 'disk' }],
    ['busyTimeoutMs', { busyTimeoutMs: -1 }],
    ['busyTimeoutMs', { busyTimeoutMs: 1.5 }],
    ['ids', { ids: 'uuid' }],
  ];
  for (const [field, override] of cases) {
    it(`rejects ${field} = ${JSON.stringify(override[field as keyof SqliteStoreOptions])}, naming the field`, async () => {
      const options = { file: freshFile(), ...override } as SqliteStoreOptions;
      await assert.rejects(openSqliteStore(options), (error: unknown) => {
        assert.ok(error instanceof TrailwireError);
        assert.equal(error.code, 'validation_failed');
        assert.deepEqual(error.errors?.map((fieldError) => fieldError.path), [field]);
        assert.match(error.message, new RegExp(`\\b${field}\\b`));
        return true;
      });
    });
  }

  it('defaults to WAL, synchronous=NORMAL, foreign keys on and a 5 s busy timeout', async () => {
    const store = await openSqliteStore({ file: freshFile() });
    try {
      assert.equal(store.db.pragma('journal_mode', { simple: true }), 'wal');
      assert.equal(store.db.pragma('synchronous', { simple: true }), 1, 'NORMAL');
      assert.equal(store.db.pragma('foreign_keys', { simple: true }), 1);
      assert.equal(store.db.pragma('busy_timeout', { simple: true }), 5000);
    } finally {
      await store.close();
    }
  });

  // An intake batch writes in a savepoint; a savepoint's journal on a temporary file cost ~20 KB of
  // writes per payload. SQLite opens its temporary files as etilqs_*, deleted at once: /proc shows them.
  it('keeps a savepoint\'s journal in memory, never in a temporary file', { skip: !existsSync('/proc/self/fd') && 'needs /proc (Linux)' }, async () => {
    const store = await openSqliteStore({ file: freshFile() });
    const temporaryFiles = () => readdirSync('/proc/self/fd').filter((fd) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`).includes('etilqs');
      } catch {
        return false; // closed since the listing
      }
    }).length;
    try {
      store.db.exec(`CREATE TABLE pages (filler BLOB);
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400) INSERT INTO pages SELECT randomblob(1000) FROM n`);
      const before = temporaryFiles();
      store.db.exec('BEGIN; SAVEPOINT batch; UPDATE pages SET filler = randomblob(1000)');
      try {
        assert.equal(temporaryFiles(), before, 'changing ~400 KB of pages in a savepoint opened a temporary file');
      } finally {
        store.db.exec('RELEASE batch; COMMIT');
      }
    } finally {
      await store.close();
    }
  });

  it('writes a new file in 8 KiB pages, and keeps the page size of a file written before', async () => {
    const fresh = await openSqliteStore({ file: freshFile() });
    assert.equal(fresh.db.pragma('page_size', { simple: true }), 8192);
    await fresh.close();
    const older = freshFile();
    const earlier = new Database(older);
    earlier.pragma('page_size = 4096');
    earlier.exec('CREATE TABLE kept (n INTEGER)');
    earlier.close();
    const reopened = await openSqliteStore({ file: older });
    try {
      assert.equal(reopened.db.pragma('page_size', { simple: true }), 4096);
      const customer = await reopened.createCustomer({ id: 'c-1', name: 'Kept', keyHash: 'h-1', createdAt: T0 });
      assert.equal(customer.name, 'Kept', 'the older file takes the migrations and works');
    } finally {
      await reopened.close();
    }
  });

  it("durability 'power' syncs every commit (synchronous=FULL) and busyTimeoutMs is applied", async () => {
    const store = await openSqliteStore({ file: freshFile(), durability: 'power', busyTimeoutMs: 250 });
    try {
      assert.equal(store.db.pragma('synchronous', { simple: true }), 2, 'FULL');
      assert.equal(store.db.pragma('busy_timeout', { simple: true }), 250);
    } finally {
      await store.close();
    }
  });

  it('creates the parent directory of the file, and accepts :memory:', async () => {
    const file = join(directory, 'nested', 'deeper', 'trailwire.db');
    const store = await openSqliteStore({ file });
    await store.close();
    assert.ok(existsSync(file));
    const memory = await openSqliteStore({ file: ':memory:' });
    try {
      await memory.ping();
      assert.equal(memory.db.memory, true);
    } finally {
      await memory.close();
    }
  });

  it('uses the injected id generator for records that applyTelemetry creates', async () => {
    let next = 0;
    const store = await openSqliteStore({ file: freshFile(), ids: () => `id-${++next}` });
    try {
      const applied = await store.applyTelemetry({
        vin: VIN,
        at: T0,
        telemetry: {
          gps: [],
          devices: [{ kind: 'tpms', serial: 'S1', position: null, timestamp: T0, metrics: {}, state: { isWarning: false, isFault: false } }],
          cargosafe: [],
        },
      });
      assert.equal(applied.trailer.id, 'id-1');
      assert.deepEqual(store.db.prepare('SELECT id FROM devices').pluck().all(), ['id-2']);
    } finally {
      await store.close();
    }
  });

  it('ping fails with unavailable once closed', async () => {
    const store = await openSqliteStore({ file: freshFile() });
    await store.close();
    await assert.rejects(store.ping(), (error: unknown) => error instanceof TrailwireError && error.code === 'unavailable');
  });
});

describe('applyMigrations', () => {
  const first: Migration = { name: '0001_items', up: 'CREATE TABLE items (id INTEGER PRIMARY KEY, label TEXT NOT NULL) STRICT' };
  const second: Migration = {
    name: '0002_seed',
    up: (db) => db.prepare('INSERT INTO items (label) VALUES (?)').run('seeded'),
  };

  it('applies pending migrations once, in order, per component', () => {
    const db = new Database(':memory:');
    try {
      assert.deepEqual(applyMigrations(db, 'queue', [first]), ['0001_items']);
      assert.deepEqual(applyMigrations(db, 'queue', [first]), [], 'nothing twice');
      assert.deepEqual(applyMigrations(db, 'queue', [first, second]), ['0002_seed'], 'only the new one');
      assert.deepEqual(db.prepare('SELECT label FROM items').pluck().all(), ['seeded']);
      assert.deepEqual(applyMigrations(db, STORE_COMPONENT, STORE_MIGRATIONS), STORE_MIGRATIONS.map((m) => m.name));
      assert.deepEqual(appliedMigrations(db, 'queue'), ['0001_items', '0002_seed'], 'components are tracked apart');
    } finally {
      db.close();
    }
  });

  it('refuses a database that holds migrations this code does not know', () => {
    const db = new Database(':memory:');
    try {
      applyMigrations(db, 'queue', [first, second]);
      assert.throws(() => applyMigrations(db, 'queue', [first]), /"0002_seed" of "queue" at position 2/);
      assert.throws(() => applyMigrations(db, 'queue', [{ ...first, name: '0001_renamed' }, second]), /"0001_items"/);
    } finally {
      db.close();
    }
  });

  it('rolls a failing migration back entirely', () => {
    const db = new Database(':memory:');
    try {
      applyMigrations(db, 'queue', [first]);
      const broken: Migration = { name: '0003_broken', up: 'CREATE TABLE more (x); THIS IS NOT SQL' };
      assert.throws(() => applyMigrations(db, 'queue', [first, second, broken]), /syntax error/);
      assert.equal(db.prepare('SELECT count(*) FROM items').pluck().get(), 0, 'the seed of 0002 is undone too');
      assert.equal(db.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'more'").pluck().get(), 0);
      assert.deepEqual(appliedMigrations(db, 'queue'), ['0001_items']);
    } finally {
      db.close();
    }
  });

  it('lets a migration rebuild a table others refer to, and rolls back one that leaves a reference dangling', () => {
    const db = new Database(':memory:');
    db.pragma('foreign_keys = ON');
    try {
      const parents: Migration = {
        name: '0001_parents',
        up: `CREATE TABLE parents (id TEXT PRIMARY KEY) STRICT; CREATE TABLE children (parent TEXT NOT NULL REFERENCES parents (id)) STRICT;
          INSERT INTO parents VALUES ('p'); INSERT INTO children VALUES ('p');`,
      };
      const rebuilt: Migration = {
        name: '0002_rebuild',
        up: `CREATE TABLE parents_next (key INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE) STRICT;
          INSERT INTO parents_next (id) SELECT id FROM parents; DROP TABLE parents; ALTER TABLE parents_next RENAME TO parents;`,
      };
      const dangling: Migration = { name: '0003_dangling', up: "DELETE FROM parents WHERE id = 'p'" };
      assert.deepEqual(applyMigrations(db, 'family', [parents, rebuilt]), ['0001_parents', '0002_rebuild']);
      assert.equal(db.pragma('foreign_keys', { simple: true }), 1, 'enforcement is back on afterwards');
      assert.throws(() => applyMigrations(db, 'family', [parents, rebuilt, dangling]), /left 1 rows of children referring to no parents/);
      assert.deepEqual(appliedMigrations(db, 'family'), ['0001_parents', '0002_rebuild']);
      assert.equal(db.prepare('SELECT count(*) FROM parents').pluck().get(), 1, 'the dangling change is undone');
      assert.equal(db.pragma('foreign_keys', { simple: true }), 1);
    } finally {
      db.close();
    }
  });

  it('rejects a list with an empty or repeated name', () => {
    const db = new Database(':memory:');
    try {
      assert.throws(() => applyMigrations(db, 'queue', [first, first]), /"0001_items" is empty or repeated/);
      assert.throws(() => applyMigrations(db, 'queue', [{ ...first, name: '' }]), /is empty or repeated/);
    } finally {
      db.close();
    }
  });
});

describe('one SQLite file, several connections', () => {
  it('reopening applies no migration again and keeps every record', async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    await store.createCustomer({ id: 'customer-1', name: 'Acme', keyHash: 'hash-1', createdAt: T0 });
    const fleet = await store.createFleet({ customerId: 'customer-1', name: 'North', createdAt: T0 });
    const trailer = await store.createTrailer({ id: 'trailer-1', fleetId: fleet.id, vin: VIN, unitId: null, createdAt: T0 });
    await store.applyTelemetry({
      vin: VIN,
      at: T0,
      telemetry: { gps: [{ timestamp: T0, lat: 1, long: 2, speed: 3, heading: 'N' }], devices: [], cargosafe: [] },
    });
    await store.close();

    const reopened = await openSqliteStore({ file });
    try {
      assert.deepEqual(appliedMigrations(reopened.db, STORE_COMPONENT), STORE_MIGRATIONS.map((m) => m.name));
      assert.deepEqual(applyMigrations(reopened.db, STORE_COMPONENT, STORE_MIGRATIONS), []);
      assert.equal((await reopened.findPrincipalByKeyHash('customers', 'hash-1'))?.id, 'customer-1');
      assert.deepEqual(await reopened.getFleet('customer-1', fleet.id), fleet);
      assert.equal((await reopened.getTrailer('customer-1', trailer.id))?.telemetry?.timestamp, T0);
      const nextFleet = await reopened.createFleet({ customerId: 'customer-1', name: 'South', createdAt: T0 });
      assert.ok(nextFleet.id > fleet.id, 'fleet ids keep growing across reopen');
    } finally {
      await reopened.close();
    }
  });

  it('upgrades a file written before trailer keys in place: fixes, their seqs and cursors, the fleet trigger', async () => {
    const file = freshFile();
    const older = new Database(file);
    applyMigrations(older, STORE_COMPONENT, STORE_MIGRATIONS.filter((m) => m.name < '0004'));
    older.exec(`INSERT INTO customers (id, name, key_hash, created_at) VALUES ('customer-1', 'Acme', 'hash-1', ${T0});
      INSERT INTO fleets (customer_id, name, created_at) VALUES ('customer-1', 'North', ${T0});
      INSERT INTO trailers (id, fleet_id, vin, status_name, status_date, gps_timestamp, gps_lat, gps_long, gps_speed, gps_heading, created_at)
        VALUES ('trailer-b', 1, '${VIN}', 'OK', ${T0}, ${T0 + 1000}, 1, 2, 3, 'N', ${T0}),
               ('trailer-a', NULL, '1HGCM82633A004352', 'OK', ${T0}, NULL, NULL, NULL, NULL, NULL, ${T0});
      INSERT INTO gps_fixes (seq, trailer_id, timestamp, lat, long, speed, heading)
        VALUES (7, 'trailer-b', ${T0}, 1, 1, 0, 'N'), (9, 'trailer-b', ${T0 + 1000}, 1, 2, 3, 'N'), (8, 'trailer-a', ${T0}, 5, 5, 0, 'S');
      INSERT INTO cargosafe_units (id, trailer_id, serial, customer_id, created_at) VALUES ('unit-1', 'trailer-a', 'C1', NULL, ${T0});`);
    older.close();

    const store = await openSqliteStore({ file });
    try {
      assert.deepEqual(store.db.pragma('foreign_key_check'), [], 'every reference resolves');
      const page = (trailerId: string, after?: TimeKey) =>
        store.listGps('customer-1', trailerId, { from: T0, to: T0 + 10_000, after, limit: 10 }).then((fixes) => fixes.map((fix) => [fix.key.seq, fix.record.long]));
      assert.deepEqual(await page('trailer-b'), [[7, 1], [9, 2]], 'the fixes keep their seqs');
      assert.deepEqual(await page('trailer-b', { timestamp: T0, seq: 7 }), [[9, 2]], 'a cursor handed out before still pages');
      assert.equal((await store.getTrailer('customer-1', 'trailer-b'))?.telemetry?.timestamp, T0 + 1000);

      const applied = await store.applyTelemetry({
        vin: VIN,
        at: T0 + 5000,
        telemetry: { gps: [{ timestamp: T0 + 2000, lat: 1, long: 4, speed: 3, heading: 'E' }], devices: [], cargosafe: [] },
      });
      assert.equal(applied.trailer.telemetry?.long, 4, 'a new fix moves the latest into the same trailer');
      assert.deepEqual((await page('trailer-b')).map(([, long]) => long), [1, 2, 4]);
      const created = await store.applyTelemetry({ vin: '2FMDK3GC4BBA12345', at: T0, telemetry: { gps: [{ timestamp: T0, lat: 0, long: 0, speed: 0, heading: 'N' }], devices: [], cargosafe: [] } });
      assert.equal(created.createdTrailer, true);

      await store.assignTrailer('trailer-a', 1, null);
      assert.deepEqual((await store.listCargosafe('customer-1', { limit: 10 })).map((unit) => unit.id), ['unit-1'], 'the fleet trigger was made again');
      assert.deepEqual(await page('trailer-a'), [[8, 5]]);
    } finally {
      await store.close();
    }
  });

  it("a batch write answers a trailer's row as it is now, after another connection or this one changed it", async () => {
    // The processing thread's connection keeps the rows it has seen (trailer-row-cache.ts); the
    // server's main thread assigns and switches trailers on its own connection meanwhile.
    const file = freshFile();
    const [processing, operator] = await Promise.all([openSqliteStore({ file }), openSqliteStore({ file })]);
    try {
      await operator.createCustomer({ id: 'customer-1', name: 'Acme', keyHash: 'hash-1', createdAt: T0 });
      const north = await operator.createFleet({ customerId: 'customer-1', name: 'North', createdAt: T0 });
      const south = await operator.createFleet({ customerId: 'customer-1', name: 'South', createdAt: T0 });
      const trailer = await operator.createTrailer({ id: 'trailer-1', fleetId: north.id, vin: VIN, unitId: 'U-1', createdAt: T0 });
      let second = 0;
      const fix = () => ({ vin: VIN, at: T0 + 60_000, telemetry: { gps: [{ timestamp: T0 + ++second * 1000, lat: second, long: 2, speed: 3, heading: 'N' as const }], devices: [], cargosafe: [] } });
      const applied = async () => (await processing.applyTelemetry(fix())).trailer;

      assert.equal((await applied()).fleetId, north.id);
      assert.equal((await applied()).telemetry?.lat, 2, 'the second fix, from the row the first one left');
      await operator.assignTrailer(trailer.id, south.id, 'U-2');
      const assigned = await applied();
      assert.deepEqual([assigned.fleetId, assigned.unitId, assigned.telemetry?.lat], [south.id, 'U-2', 3], "another connection's assignment is seen");
      await operator.setTrailerActive(trailer.id, false);
      assert.equal((await applied()).active, false);
      await processing.setTrailerActive(trailer.id, true);
      assert.equal((await applied()).active, true, "this connection's own change is seen");
      const late = await processing.applyTelemetry({ vin: VIN, at: T0 + 60_000, telemetry: { gps: [{ timestamp: T0, lat: 99, long: 2, speed: 3, heading: 'N' }], devices: [], cargosafe: [] } });
      assert.equal(late.trailer.telemetry?.lat, 5, 'a late fix leaves the latest one, and the answer says so');
      assert.deepEqual(late.trailer, await operator.getTrailer('customer-1', trailer.id));
      // A row not seen since another connection's change is read before the move, which here changes nothing.
      await operator.assignTrailer(trailer.id, north.id, 'U-3');
      const lateAfterAssign = await processing.applyTelemetry({ vin: VIN, at: T0 + 60_000, telemetry: { gps: [{ timestamp: T0, lat: 98, long: 2, speed: 3, heading: 'N' }], devices: [], cargosafe: [] } });
      assert.deepEqual([lateAfterAssign.trailer.fleetId, lateAfterAssign.trailer.unitId, lateAfterAssign.trailer.telemetry?.lat], [north.id, 'U-3', 5]);
      assert.deepEqual(lateAfterAssign.trailer, await operator.getTrailer('customer-1', trailer.id));
    } finally {
      await Promise.all([processing.close(), operator.close()]);
    }
  });

  it('two handles on one file see each other’s writes', async () => {
    const file = freshFile();
    const [one, two] = await Promise.all([openSqliteStore({ file }), openSqliteStore({ file })]);
    try {
      await one.createCustomer({ id: 'customer-1', name: 'Acme', keyHash: 'hash-1', createdAt: T0 });
      const fleet = await two.createFleet({ customerId: 'customer-1', name: 'North', createdAt: T0 });
      await one.createTrailer({ id: 'trailer-1', fleetId: fleet.id, vin: VIN, unitId: null, createdAt: T0 });
      await assert.rejects(
        two.createTrailer({ id: 'trailer-2', fleetId: fleet.id, vin: VIN, unitId: null, createdAt: T0 }),
        (error: unknown) => error instanceof TrailwireError && error.code === 'conflict',
      );
      const [a, b] = await Promise.all([one.getOrCreateSecret('shared', 'from-one'), two.getOrCreateSecret('shared', 'from-two')]);
      assert.equal(a, b);
      assert.equal((await two.getTrailer('customer-1', 'trailer-1'))?.vin, VIN);
    } finally {
      await Promise.all([one.close(), two.close()]);
    }
  });

  it('processes opening a new file at once migrate it exactly once and agree on a secret', async () => {
    const file = freshFile();
    const adapter = fileURLToPath(new URL('../../../adapters/sqlite/index.ts', import.meta.url));
    // Each child opens the store only when told to, so that all of them race on the migrations.
    const child = `
      import { createInterface } from 'node:readline';
      import { openSqliteStore } from ${JSON.stringify(adapter)};
      const [file, candidate] = process.argv.slice(1);
      const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
      console.log('ready');
      await lines.next();
      const store = await openSqliteStore({ file });
      const secret = await store.getOrCreateSecret('race', candidate);
      await store.createCustomer({ id: candidate, name: candidate, keyHash: candidate, createdAt: 0 });
      await store.close();
      console.log(JSON.stringify({ secret }));
      process.exit(0);
    `;
    const children = Array.from({ length: 4 }, (_, i) =>
      spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', child, file, `candidate-${i}`], {
        stdio: ['pipe', 'pipe', 'inherit'],
      }),
    );
    let ready = 0;
    const outputs = children.map(
      (childProcess) =>
        new Promise<string[]>((resolve, reject) => {
          let text = '';
          childProcess.stdout.on('data', (chunk: Buffer) => {
            const wasReady = text.startsWith('ready\n');
            text += chunk.toString();
            // Release them all together, once the last one is listening.
            if (!wasReady && text.startsWith('ready\n') && ++ready === children.length) {
              for (const other of children) other.stdin.write('go\n');
            }
          });
          childProcess.on('error', reject);
          childProcess.on('exit', (code) => (code === 0 ? resolve(text.trim().split('\n')) : reject(new Error(`child exited with ${code}`))));
        }),
    );
    const secrets = (await Promise.all(outputs)).map((lines) => (JSON.parse(lines.at(-1)!) as { secret: string }).secret);
    assert.equal(new Set(secrets).size, 1, `every process got the same secret: ${secrets.join(', ')}`);

    const db = new Database(file, { readonly: true });
    try {
      assert.deepEqual(appliedMigrations(db, STORE_COMPONENT), STORE_MIGRATIONS.map((m) => m.name), 'each migration recorded once');
      assert.equal(db.prepare('SELECT count(*) FROM customers').pluck().get(), 4, 'every process wrote');
    } finally {
      db.close();
    }
  });
});

describe('query plans', () => {
  // Lists that are small by nature: the signing keys, every grant (the operator's list), and one trailer's devices grouped by state.
  const SMALL_BY_NATURE = new Set(['signingKeys', 'allPartnerGrants', 'retireOtherSigningKeys', 'revokeRetiredSigningKeys', 'deviceStateCounts', 'ping']);

  it('every read is an index search: no table scan, no sort', () => {
    const db = new Database(':memory:');
    try {
      applyMigrations(db, STORE_COMPONENT, STORE_MIGRATIONS);
      const statements = Object.entries(storeStatementSources(db));
      assert.ok(statements.length > 30);
      for (const [name, source] of statements) {
        if (SMALL_BY_NATURE.has(name)) continue;
        const named = [...new Set(source.match(/:\w+/g) ?? [])].map((param) => param.slice(1));
        const positional = (source.match(/\?/g) ?? []).length;
        const explain = db.prepare<unknown[], { detail: string }>(`EXPLAIN QUERY PLAN ${source}`);
        const plan = (named.length > 0 ? explain.all(Object.fromEntries(named.map((param) => [param, 1]))) : explain.all(...Array(positional).fill(1)))
          .map((row) => row.detail);
        for (const step of plan) {
          assert.doesNotMatch(step, /^SCAN |TEMP B-TREE/, `${name}: ${plan.join(' | ')}`);
        }
      }
    } finally {
      db.close();
    }
  });

  it('a deep GPS page costs what the first page costs', async () => {
    // Timing, with a wide margin: a page that walked from `from` to its cursor would take ~100 times
    // longer here than the first page; one that seeks its cursor takes the same time.
    const store = await openSqliteStore({ file: freshFile() });
    try {
      await store.createCustomer({ id: 'customer-1', name: 'Acme', keyHash: 'hash-1', createdAt: T0 });
      const fleet = await store.createFleet({ customerId: 'customer-1', name: 'North', createdAt: T0 });
      await store.createTrailer({ id: 'trailer-1', fleetId: fleet.id, vin: VIN, unitId: null, createdAt: T0 });
      const count = 200_000;
      const gps = Array.from({ length: count }, (_, i) => ({ timestamp: T0 + i * 1000, lat: 1, long: 2, speed: 3, heading: 'N' as const }));
      await store.applyTelemetry({ vin: VIN, at: T0, telemetry: { gps, devices: [], cargosafe: [] } });
      const page = (after?: TimeKey) => store.listGps('customer-1', 'trailer-1', { from: T0, to: T0 + count * 1000, after, limit: 50 });
      const first = await page();
      const deepKey = (await page({ timestamp: T0 + (count - 100) * 1000, seq: 0 }))[0]!.key;
      assert.equal(deepKey.timestamp, T0 + (count - 100) * 1000);
      const median = async (after: TimeKey | undefined) => {
        const times: number[] = [];
        for (let i = 0; i < 15; i++) {
          const start = performance.now();
          await page(after);
          times.push(performance.now() - start);
        }
        return times.sort((a, b) => a - b)[7]!;
      };
      const [shallow, deep] = [await median(first.at(-1)!.key), await median(deepKey)];
      assert.ok(deep < shallow * 10 + 1, `deep page ${deep.toFixed(3)} ms vs first page ${shallow.toFixed(3)} ms`);
      assert.deepEqual((await page(deepKey)).map((row) => row.key.timestamp)[0], deepKey.timestamp + 1000);
    } finally {
      await store.close();
    }
  });
});
