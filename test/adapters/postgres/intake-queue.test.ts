/**
 * The PostgreSQL intake queue: the shared conformance suite on a schema of its own per case (two
 * pools on one schema for the sharing case), then what is PostgreSQL's own — option validation, its
 * migrations beside the store's, recovery that takes back only what gone processes left, a lost
 * session that reconnects, enqueues heard by other processes (LISTEN/NOTIFY), the claim's refusal of
 * an isolation level it cannot be correct under, and the intake worker end to end across two
 * Trailwire processes sharing one store and queue. Needs `TRAILWIRE_TEST_DATABASE_URL`; every schema
 * it creates is named `tw_test_<random>` and dropped at the end.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import {
  openPostgresIntakeQueue,
  openPostgresStore,
  POSTGRES_QUEUE_COMPONENT,
  POSTGRES_QUEUE_MIGRATIONS,
  POSTGRES_STORE_COMPONENT,
  POSTGRES_STORE_MIGRATIONS,
  type PostgresIntakeQueue,
  type PostgresIntakeQueueOptions,
} from '../../../adapters/postgres/index.ts';
import { createPostgresPool } from '../../../adapters/postgres/pool.ts';
import { TrailwireError } from '../../../core/errors.ts';
import type { NewIntake } from '../../../core/intake-queue.ts';
import type { LiveTrailerEvent } from '../../../core/live-hub.ts';
import { MemoryLiveBus } from '../../../core/live-hub.ts';
import { createTrailwire, type Trailwire } from '../../../core/trailwire.ts';
import { builtInProducts } from '../../../products/index.ts';
import { runIntakeQueueConformance } from '../../conformance/intake-queue.ts';
import { uniqueVin } from '../../support/fixtures.ts';

const DATABASE_URL = process.env.TRAILWIRE_TEST_DATABASE_URL;
const T0 = Date.UTC(2026, 5, 1);

const freshSchema = (): string => `tw_test_${randomBytes(6).toString('hex')}`;

let next = 0;
const item = (overrides: Partial<NewIntake> = {}): NewIntake => ({
  id: `intake-${++next}`,
  partnerId: 'p',
  product: 'gps-basic',
  vin: '1HGCM82633A004352',
  payload: '{}',
  receivedAt: T0,
  idempotencyKey: null,
  ...overrides,
});

function assertTrailwireError(code: TrailwireError['code']) {
  return (error: unknown): true => {
    assert.ok(error instanceof TrailwireError, `a TrailwireError, got ${String(error)}`);
    assert.equal(error.code, code);
    return true;
  };
}

/** Waits for `condition`, polling: for what another connection does in its own time. */
async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('openPostgresIntakeQueue options', () => {
  const cases: [string, unknown][] = [
    ['onEnqueued', 'wake'],
    ['abandonedCheckMs', 0],
    ['abandonedCheckMs', 1.5],
    ['reconnectDelayMs', -1],
  ];
  for (const [field, value] of cases) {
    it(`rejects ${field} = ${JSON.stringify(value)}, naming the field, before touching the database`, async () => {
      // A pool that cannot connect: a check that queried first would fail differently.
      const pool = createPostgresPool({ connectionString: 'postgres://nobody@127.0.0.1:1/none', poolSize: 1, connectTimeoutMs: 1000 });
      try {
        await assert.rejects(openPostgresIntakeQueue({ pool, schema: 'public' }, { [field]: value } as PostgresIntakeQueueOptions), (error: unknown) => {
          assertTrailwireError('validation_failed')(error);
          assert.deepEqual((error as TrailwireError).errors?.map((fieldError) => fieldError.path), [field]);
          assert.match((error as Error).message, new RegExp(`\\b${field}\\b`));
          return true;
        });
      } finally {
        await pool.end();
      }
    });
  }
});

describe('PostgreSQL intake queue', { skip: DATABASE_URL === undefined ? 'TRAILWIRE_TEST_DATABASE_URL is not set' : false }, () => {
  const connectionString = DATABASE_URL!;
  const schemas: string[] = [];
  const admin = new pg.Pool({ connectionString, max: 2 });
  /** A schema name this file drops at the end. */
  const newSchema = (): string => {
    const schema = freshSchema();
    schemas.push(schema);
    return schema;
  };
  const newPool = () => createPostgresPool({ connectionString, poolSize: 4, connectTimeoutMs: 5000 });

  /** A queue on its own pool (a process, in effect) over `schema`; closing it (once or more) ends the pool too. */
  async function openProcess(schema: string, options: PostgresIntakeQueueOptions = {}) {
    const pool = newPool();
    try {
      const queue = await openPostgresIntakeQueue({ pool, schema }, options);
      let closing: Promise<void> | undefined;
      const close = () => (closing ??= queue.close().then(() => pool.end()));
      return { pool, queue, close };
    } catch (error) {
      await pool.end();
      throw error;
    }
  }

  after(async () => {
    for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  });

  runIntakeQueueConformance({
    name: 'postgres (a schema per case)',
    async openQueue() {
      const { queue, close } = await openProcess(newSchema());
      return { queue, close };
    },
    async openSharedQueues() {
      const schema = newSchema();
      const first = await openProcess(schema);
      const second = await openProcess(schema);
      return { queues: [first.queue, second.queue], close: async () => (await first.close(), await second.close()) };
    },
  });

  it("records its migrations under its own component, beside the store's, once when several open at once", async () => {
    const schema = newSchema();
    const store = await openPostgresStore({ connectionString, schema, poolSize: 2 });
    const processes = await Promise.all(Array.from({ length: 3 }, () => openProcess(schema)));
    try {
      const recorded = await admin.query<{ component: string; name: string }>(
        `SELECT component, name FROM "${schema}".trailwire_migrations ORDER BY component, position`,
      );
      assert.deepEqual(recorded.rows, [
        ...POSTGRES_QUEUE_MIGRATIONS.map((migration) => ({ component: POSTGRES_QUEUE_COMPONENT, name: migration.name })),
        ...POSTGRES_STORE_MIGRATIONS.map((migration) => ({ component: POSTGRES_STORE_COMPONENT, name: migration.name })),
      ]);
      // The claim function resolves its tables in its own schema, whatever the caller's search_path.
      const queue = await openPostgresIntakeQueue(store);
      await processes[0]!.queue.enqueue(item());
      await store.pool.query('SET search_path TO pg_catalog');
      assert.equal((await queue.claim(10, T0)).length, 1);
      await queue.close();
    } finally {
      await Promise.all(processes.map((process) => process.close()));
      await store.close();
    }
  });

  describe('recovery across processes', () => {
    it('takes back what its own session and gone sessions left processing, never what a live process holds', async () => {
      const schema = newSchema();
      const [a, b, c] = [await openProcess(schema), await openProcess(schema), await openProcess(schema)];
      try {
        const vins = ['1HGCM82633A004352', '1M8GDM9AXKP042788', '2T1BURHE0JC014709'];
        for (const vin of vins) await a.queue.enqueue(item({ vin }));
        const [heldByA] = await a.queue.claim(1, T0);
        const [heldByB] = await b.queue.claim(1, T0);
        const [heldByC] = await c.queue.claim(1, T0);
        assert.ok(heldByA && heldByB && heldByC);
        assert.equal(await b.queue.recoverInFlight(), 1, "B's start-up takes back its own payload only: A and C are alive");
        assert.equal((await a.queue.get(heldByA.id))?.status, 'processing');
        assert.equal((await a.queue.get(heldByB.id))?.status, 'queued');

        await c.close(); // C's process ends without settling.
        assert.equal((await a.queue.get(heldByC.id))?.status, 'processing', 'nothing is taken back until someone looks');
        assert.equal(await b.queue.recoverInFlight(), 1, "C's payload: its session is gone");
        assert.equal((await a.queue.get(heldByA.id))?.status, 'processing', "A's is still A's");
        assert.deepEqual(pickIds(await b.queue.claim(10, T0)), [heldByB.id, heldByC.id].sort());

        // A's late settle of a payload it still holds counts.
        await a.queue.settle([{ id: heldByA.id, kind: 'processed', at: T0 }]);
        assert.equal((await a.queue.get(heldByA.id))?.status, 'processed');
      } finally {
        await Promise.all([a.close(), b.close(), c.close()]);
      }
    });

    it('a claim takes back, at most every abandonedCheckMs of its clock, what gone sessions left processing', async () => {
      const schema = newSchema();
      const a = await openProcess(schema, { abandonedCheckMs: 1000 });
      const gone = await openProcess(schema);
      try {
        const vin = '1M8GDM9AXKP042788';
        const [first, second] = [item({ vin }), item({ vin })];
        await a.queue.enqueue(first);
        assert.deepEqual(pickIds(await gone.queue.claim(1, T0)), [first.id]);
        await a.queue.enqueue(second);
        assert.deepEqual(await a.queue.claim(10, T0), [], 'the VIN waits for the payload a live session holds');
        await gone.close();
        assert.deepEqual(await a.queue.claim(10, T0 + 999), [], 'and still, once it is gone, until the next look is due');
        const claimed = await a.queue.claim(10, T0 + 1000);
        assert.deepEqual(pickIds(claimed), [first.id, second.id].sort());
        assert.equal(claimed[0]!.attempts, 2, 'the interrupted attempt counts');
      } finally {
        await Promise.all([a.close(), gone.close()]);
      }
    });

    it('a queue whose session is lost claims nothing until it reconnects, and its old claims go to others', async () => {
      const schema = newSchema();
      let wakes = 0;
      const a = await openProcess(schema, { reconnectDelayMs: 20, onEnqueued: () => wakes++ });
      const b = await openProcess(schema);
      try {
        const old = item({ vin: '1M8GDM9AXKP042788' });
        await a.queue.enqueue(old);
        assert.equal((await a.queue.claim(10, T0)).length, 1);
        const before = wakes;
        const pid = (a.queue as unknown as { session: { client: { processID: number } } }).session.client.processID;
        await admin.query('SELECT pg_terminate_backend($1)', [pid]);
        await assert.rejects(
          until(async () => {
            await a.queue.claim(10, T0);
            return false;
          }, 'a claim to fail'),
          assertTrailwireError('unavailable'),
        );
        assert.equal(await b.queue.recoverInFlight(), 1, "the lost session's payload is up for grabs");
        await until(async () => (await a.queue.claim(10, T0).catch(() => null)) !== null, 'A to reconnect');
        assert.ok(wakes > before, 'a reconnect wakes the worker: enqueues meanwhile went unheard');
        assert.deepEqual(pickIds(await b.queue.claim(10, T0)), [], 'A has claimed it again, under its new session');
        assert.equal((await a.queue.get(old.id))?.status, 'processing');
        await a.queue.settle([{ id: old.id, kind: 'processed', at: T0 }]);
        assert.equal((await b.queue.get(old.id))?.status, 'processed');
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    });
  });

  it('tells every process listening on the schema of each stored enqueue, and of nothing else', async () => {
    const schema = newSchema();
    const heard: string[] = [];
    const listener = await openProcess(schema, { onEnqueued: () => heard.push('listener') });
    const writer = await openProcess(schema);
    // Another schema's queue in the same database is not this queue.
    const elsewhere = await openProcess(newSchema());
    try {
      await writer.queue.enqueue(item({ idempotencyKey: 'k' }));
      await until(() => heard.length === 1, 'the first notice');
      await writer.queue.enqueue(item({ idempotencyKey: 'k' })); // a replay: nothing stored
      await elsewhere.queue.enqueue(item());
      await writer.queue.enqueue(item());
      // Notices arrive in commit order, so a notice for the replay or the other schema would come first.
      await until(() => heard.length >= 2, 'the second notice');
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(heard.length, 2);
    } finally {
      await Promise.all([listener.close(), writer.close(), elsewhere.close()]);
    }
  });

  it('a claim walks the queue past more rows than one slice of its walk when a VIN it skips holds them', async () => {
    const schema = newSchema();
    const a = await openProcess(schema);
    const holder = await a.pool.connect();
    try {
      const busy = '1HGCM82633A004352';
      const free = '1FTFW1ET5DFC10312';
      await a.pool.query(
        `INSERT INTO "${schema}".intake_queue (id, partner_id, product, vin, payload, received_at, status, next_attempt_at)
         SELECT 'busy-' || n, 'p', 'gps-basic', $1, '{}', $2, 'queued', $2 FROM generate_series(1, 600) AS n`,
        [busy, T0],
      );
      const last = await a.queue.enqueue(item({ vin: free }));
      // Another process in the middle of its claim of the busy VIN: its rows are skipped, all 600.
      await holder.query('BEGIN');
      await holder.query(`SELECT pg_advisory_xact_lock(hashtextextended('trailwire:intake-vin:' || $1 || ':' || $2, 0))`, [schema, busy]);
      const claimed = await a.queue.claim(64, T0);
      assert.deepEqual(claimed.map((record) => record.id), [last.record.id]);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
      await a.close();
    }
  });

  it('a claim refuses to run under an isolation level where its locks would not be enough', async () => {
    const schema = newSchema();
    const a = await openProcess(schema);
    try {
      await a.queue.enqueue(item());
      await a.pool.query('SET default_transaction_isolation TO "repeatable read"'); // one of the pool's connections
      await assert.rejects(
        Promise.all(Array.from({ length: 4 }, () => a.queue.claim(10, T0))),
        /READ COMMITTED/,
      );
    } finally {
      await a.close();
    }
  });

  describe('intake worker end to end, two processes on one store and queue', () => {
    const schema = newSchema();

    /** One Trailwire process: its own store pool and queue session on the shared schema, its worker's idle poll ten minutes. */
    async function openTrailwire(): Promise<{ trailwire: Trailwire; queue: PostgresIntakeQueue; events: LiveTrailerEvent[] }> {
      const store = await openPostgresStore({ connectionString, schema, poolSize: 4 });
      let trailwire: Trailwire | undefined;
      const queue = await openPostgresIntakeQueue(store, { onEnqueued: () => trailwire?.intake?.worker.notify() });
      const bus = new MemoryLiveBus();
      const events: LiveTrailerEvent[] = [];
      bus.subscribe((event) => events.push(event));
      trailwire = await createTrailwire({ store, products: builtInProducts, intakeQueue: queue, worker: { idlePollMs: 600_000 }, live: { bus } });
      return { trailwire, queue, events };
    }

    it("a payload taken in by one process is processed by the other's worker, woken by the notice, and its data written", async () => {
      const front = await openTrailwire();
      const back = await openTrailwire();
      try {
        const { principal } = await front.trailwire.auth.createCustomer({ name: 'Acme' });
        const fleet = await front.trailwire.admin.createFleet({ customerId: principal.id, name: 'North' });
        const vin = uniqueVin();
        const trailer = await front.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin });
        // Only the back process works; its idle poll is ten minutes, so only a notice wakes it in time.
        // The worker hears a notice only while it waits (one arriving mid-round is dropped), so send
        // once it has finished its first round.
        const backCalls = watchCalls(back.queue);
        await back.trailwire.intake!.worker.start();
        await until(backCalls.idle, 'the back worker to finish its first round');
        const claims = { aud: 'partners', sub: 'partner-1', scope: 'product:gps-basic', ver: 1 } as never;
        const send = (seconds: number) => {
          const body = { timestamp: 1780315200 + seconds, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 100, bearingDeg: 90 };
          return front.trailwire.intake!.service.accept({ claims, vin, body, rawBody: JSON.stringify(body) });
        };
        const accepted = [];
        for (const seconds of [0, 1, 2, 3]) accepted.push(await send(seconds));
        await until(() => back.trailwire.intake!.worker.counts.processed === 4, 'the back worker to process all four');
        for (const { record } of accepted) assert.equal((await front.queue.get(record.id))?.status, 'processed');
        const latest = await front.trailwire.store.getTrailer(principal.id, trailer.id);
        assert.equal(latest?.telemetry?.timestamp, (1780315200 + 3) * 1000, "the trailer's position is the newest payload's, read by the other process");
        const fixes = await front.trailwire.store.listGps(principal.id, trailer.id, { from: 0, to: Number.MAX_SAFE_INTEGER, limit: 10 });
        assert.equal(fixes.length, 4, 'every payload wrote its GPS fix');
        assert.deepEqual(front.events, [], 'the front process processed nothing');
        assert.deepEqual(
          back.events.map((event) => event.trailer.telemetry?.timestamp),
          [0, 1, 2, 3].map((seconds) => (1780315200 + seconds) * 1000),
          'one live update per payload, in order',
        );
      } finally {
        await front.trailwire.close();
        await back.trailwire.close();
        await front.queue.close();
        await back.queue.close();
      }
    });
  });
});

/**
 * Counts the worker's queue calls in flight. Seen from a timer (every promise callback run by then),
 * a worker that has called the queue and has no call pending is waiting for a notice or its poll.
 */
function watchCalls(queue: PostgresIntakeQueue): { idle: () => boolean } {
  let started = 0;
  let pending = 0;
  const watched = queue as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  for (const name of ['claim', 'settle', 'purgeProcessed', 'recoverInFlight']) {
    const original = watched[name]!.bind(queue);
    watched[name] = async (...args) => {
      started++;
      pending++;
      try {
        return await original(...args);
      } finally {
        pending--;
      }
    };
  }
  return { idle: () => started > 0 && pending === 0 };
}

function pickIds(records: readonly { id: string }[]): string[] {
  return records.map((record) => record.id).sort();
}
