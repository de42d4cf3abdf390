/**
 * The PostgreSQL intake log: the shared conformance suite on a schema of its own per case (two
 * pools on one schema for the sharing case), then what is PostgreSQL's own — option validation, its
 * migrations beside the store's, partitions leased by a batch and taken over when the process
 * holding them dies, a batch that waits for an append in flight rather than skip its seq, group
 * commit, the upgrade of a claim-based queue written by the previous version with its payloads and
 * statuses, a lost session that reconnects, enqueues heard by other processes (LISTEN/NOTIFY), the
 * refusal of an isolation level a batch cannot be correct under, the intake worker end to end
 * across two Trailwire processes sharing one store and queue, and the grants checked again at
 * processing (issue 37's late registration). Needs `TRAILWIRE_TEST_DATABASE_URL`; every schema
 * it creates is named `tw_test_<random>` and dropped at the end.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import {
  applyPostgresMigrations,
  INTAKE_PARTITIONS,
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
import type { LiveTrailerEvent } from '../../../core/live-bus.ts';
import { createTrailwire, type Trailwire } from '../../../core/trailwire.ts';
import { builtInProducts } from '../../../products/index.ts';
import { runIntakeQueueConformance } from '../../conformance/intake-queue.ts';
import { INTAKE_TIME, newIntake, uniqueVin } from '../../support/fixtures.ts';
import { assertLateRegistrationRefused } from '../../support/late-registration.ts';
import { RecordingLiveBus } from '../../support/recording-live-bus.ts';
import { until } from '../../support/until.ts';

const DATABASE_URL = process.env.TRAILWIRE_TEST_DATABASE_URL;
const T0 = INTAKE_TIME;

const freshSchema = (): string => `tw_test_${randomBytes(6).toString('hex')}`;

const item = newIntake;

function assertTrailwireError(code: TrailwireError['code']) {
  return (error: unknown): true => {
    assert.ok(error instanceof TrailwireError, `a TrailwireError, got ${String(error)}`);
    assert.equal(error.code, code);
    return true;
  };
}


describe('openPostgresIntakeQueue options', () => {
  const cases: [string, unknown][] = [
    ['onEnqueued', 'wake'],
    ['reconnectDelayMs', -1],
    ['reconnectDelayMs', 1.5],
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
      // The log's functions resolve their tables in their own schema, whatever the caller's search_path.
      const queue = await openPostgresIntakeQueue(store);
      await store.pool.query('SET search_path TO pg_catalog');
      await queue.enqueue(item());
      const batch = await queue.nextBatch(10, T0);
      assert.equal(batch?.entries.length, 1);
      await queue.commitBatch(batch!, new Map(), T0);
      await queue.close();
    } finally {
      await Promise.all(processes.map((process) => process.close()));
      await store.close();
    }
  });

  describe('partitions leased across processes', () => {
    const VIN_A = '1HGCM82633A004352';

    it("a batch's VINs are no other batch's; when its process dies, another process takes them over, the attempt uncounted", async () => {
      const schema = newSchema();
      const [a, b] = [await openProcess(schema), await openProcess(schema)];
      try {
        const first = item({ vin: VIN_A });
        const second = item({ vin: VIN_A });
        await a.queue.enqueue(first);
        const held = await a.queue.nextBatch(10, T0);
        assert.deepEqual(held?.entries.map((entry) => entry.id), [first.id]);
        assert.equal((await b.queue.get(first.id))?.status, 'queued', 'another process cannot tell it is in hand');
        assert.equal((await a.queue.get(first.id))?.status, 'processing', 'the process holding it can');
        await b.queue.enqueue(second);
        assert.equal(await b.queue.nextBatch(10, T0), null, "the VIN's partition is leased: nothing of it for anyone else");

        // A's process dies in the middle of its batch: its connection, and with it the lease, ends.
        const pid = (held as unknown as { client: { processID: number } }).client.processID;
        await admin.query('SELECT pg_terminate_backend($1)', [pid]);
        let taken: Awaited<ReturnType<typeof b.queue.nextBatch>> = null;
        await until(async () => (taken = await b.queue.nextBatch(10, T0)) !== null, 'the lease to end with the connection', 10_000);
        assert.deepEqual(taken!.entries.map((entry) => [entry.id, entry.attempts]), [[first.id, 0], [second.id, 0]], 'all of it, in order, nothing counted');
        await assert.rejects(a.queue.commitBatch(held!, new Map([[held!.entries[0]!.seq, { kind: 'processed' }]]), T0), 'the dead batch cannot commit');
        await b.queue.commitBatch(taken!, new Map(taken!.entries.map((entry) => [entry.seq, { kind: 'processed' }])), T0 + 5);
        assert.deepEqual(pickStatus(await a.queue.get(first.id)), ['processed', 1, T0 + 5]);
        assert.equal(await a.queue.depth(), 0);
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    });

    it('a batch reads at most half the partitions, so that a second process always finds work beside it', async () => {
      const schema = newSchema();
      const [a, b] = [await openProcess(schema), await openProcess(schema)];
      try {
        for (let i = 0; i < 200; i++) await a.queue.enqueue(item({ vin: uniqueVin() }));
        const first = await a.queue.nextBatch(1000, T0);
        const second = await b.queue.nextBatch(1000, T0);
        assert.ok(first && second, 'both processes have a batch at once');
        const partsOf = (batch: typeof first) => new Set((batch as unknown as { plan: { take: Array<{ partition: number }> } }).plan.take.map((row) => row.partition));
        assert.equal(partsOf(first).size, INTAKE_PARTITIONS / 2);
        assert.equal(partsOf(second).size, INTAKE_PARTITIONS / 2);
        assert.equal(first.entries.length + second.entries.length, 200, 'between them, everything');
        await a.queue.abandonBatch(first);
        await b.queue.abandonBatch(second);
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    });
  });

  it('a batch waits for an append still in flight instead of moving the watermark past its seq', async () => {
    const schema = newSchema();
    const a = await openProcess(schema);
    const appender = await admin.connect();
    try {
      const vin = '1HGCM82633A004352';
      // An append that has drawn its seq but not committed (one process's group, slow to commit)...
      await appender.query('BEGIN');
      const early = item({ vin });
      await appender.query(`SELECT * FROM "${schema}".intake_append($1, $2, $3, $4, $5, $6, $7, $8, $9)`, [
        [early.id], [early.partnerId], [early.product], [early.vin], [early.payload], [early.receivedAt], [null], 0, 'unused',
      ]);
      // ...while a later one (a higher seq) commits.
      const late = item({ vin });
      await a.queue.enqueue(late);
      let settled = false;
      const opening = a.queue.nextBatch(10, T0).finally(() => (settled = true));
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(settled, false, 'the batch waits for the append in flight');
      await appender.query('COMMIT');
      const batch = await opening;
      assert.deepEqual(batch?.entries.map((entry) => entry.id), [early.id, late.id], 'both, in seq order: none skipped');
      await a.queue.commitBatch(batch!, new Map(batch!.entries.map((entry) => [entry.seq, { kind: 'processed' }])), T0);
      assert.equal((await a.queue.get(early.id))?.status, 'processed');
    } finally {
      await appender.query('ROLLBACK').catch(() => {});
      appender.release();
      await a.close();
    }
  });

  it('enqueues of one event-loop turn are one append (a group commit); each resolves once it is stored', async () => {
    const schema = newSchema();
    const a = await openProcess(schema);
    try {
      const appends: number[] = [];
      const query = a.pool.query.bind(a.pool);
      a.pool.query = ((config: { name?: string; values?: unknown[][] }, ...rest: unknown[]) => {
        if (config?.name === 'trailwire_queue_append') appends.push(config.values![0]!.length);
        return (query as (...args: unknown[]) => unknown)(config, ...rest);
      }) as typeof a.pool.query;
      const items = Array.from({ length: 50 }, (_, i) => item({ vin: uniqueVin(), idempotencyKey: i < 3 ? 'same' : null }));
      const results = await Promise.all(items.map((entry) => a.queue.enqueue(entry)));
      assert.deepEqual(appends, [48, 1, 1], 'one append for the turn; a repeated key waits for the next group');
      assert.equal(results.filter((result) => result.created).length, 48);
      const stored = await admin.query(`SELECT count(*)::int AS n FROM "${schema}".intake_log`);
      assert.equal(stored.rows[0].n, 48, 'stored before any enqueue resolved');
    } finally {
      await a.close();
    }
  });

  it('upgrades a queue written by the previous version in place: payloads, statuses, keys and order kept', async () => {
    const schema = newSchema();
    const pool = newPool();
    try {
      await applyPostgresMigrations(pool, schema, POSTGRES_QUEUE_COMPONENT, POSTGRES_QUEUE_MIGRATIONS.slice(0, 2));
      const vin = '1HGCM82633A004352';
      const other = '1M8GDM9AXKP042788';
      // status, attempts, next_attempt_at, processed_at, error, claimed_by, idempotency_key
      const rows: [string, string, number, number, number | null, string | null, string | null, string | null][] = [
        ['done', 'processed', 1, T0, T0 + 10, null, null, 'key-1'],
        ['dead', 'failed', 5, T0, T0 + 20, 'poison', null, null],
        ['waiting', 'queued', 2, T0 + 60_000, null, 'transient', null, null],
        ['behind', 'queued', 0, T0, null, null, null, null],
        ['in-hand', 'processing', 1, T0, null, null, 'gone-owner', null],
      ];
      for (const [id, status, attempts, next, processedAt, error, claimedBy, key] of rows) {
        await pool.query(
          `INSERT INTO "${schema}".intake_queue (id, partner_id, product, vin, payload, received_at, idempotency_key, status, attempts,
             next_attempt_at, processed_at, error, claimed_by) VALUES ($1, 'p', 'gps-basic', $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
          [id, id === 'in-hand' ? other : vin, `{"${id}":1}`, T0, key, status, attempts, next, processedAt, error, claimedBy],
        );
      }
      const queue = await openPostgresIntakeQueue({ pool, schema });
      try {
        const record = async (id: string) => {
          const found = await queue.get(id);
          return found && [found.status, found.attempts, found.nextAttemptAt, found.processedAt, found.error, found.payload];
        };
        assert.deepEqual(await record('done'), ['processed', 1, T0, T0 + 10, null, '{"done":1}']);
        assert.deepEqual(await record('dead'), ['failed', 5, T0, T0 + 20, 'poison', '{"dead":1}']);
        assert.deepEqual(await record('waiting'), ['queued', 2, T0 + 60_000, null, 'transient', '{"waiting":1}']);
        assert.deepEqual(await record('behind'), ['queued', 0, T0, null, null, '{"behind":1}']);
        assert.deepEqual(await record('in-hand'), ['queued', 0, T0, null, null, '{"in-hand":1}'], 'the interrupted attempt is not counted');
        assert.equal((await queue.findByIdempotencyKey('p', 'key-1', T0 - 1))?.id, 'done', 'keys keep answering');
        assert.deepEqual((await queue.listFailed(10)).map((failed) => failed.id), ['dead']);
        assert.equal(await queue.depth(), 3);

        const fresh = item({ vin });
        await queue.enqueue(fresh);
        const now = await queue.nextBatch(10, T0 + 1);
        assert.deepEqual(now?.entries.map((entry) => entry.id), ['in-hand'], "the VIN waiting for its retry waits, new payload included; the other VIN goes");
        await queue.commitBatch(now!, new Map([[now!.entries[0]!.seq, { kind: 'processed' }]]), T0 + 2);
        const later = await queue.nextBatch(10, T0 + 60_000);
        assert.deepEqual(later?.entries.map((entry) => entry.id), ['waiting', 'behind', fresh.id], 'then in order, the new payload last');
        await queue.abandonBatch(later!);
      } finally {
        await queue.close();
      }
    } finally {
      await pool.end();
    }
  });

  it("replaces the batch function of the log's first version, and a schema so migrated is refused by that version", async () => {
    const schema = newSchema();
    const pool = newPool();
    try {
      const logVersion = POSTGRES_QUEUE_MIGRATIONS.findIndex((migration) => migration.name === '0003_intake_log') + 1;
      await applyPostgresMigrations(pool, schema, POSTGRES_QUEUE_COMPONENT, POSTGRES_QUEUE_MIGRATIONS.slice(0, logVersion));
      const functions = async () =>
        (await admin.query<{ proname: string }>(
          `SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname LIKE 'intake_%batch%' ORDER BY 1`,
          [schema],
        )).rows.map((row) => row.proname);
      assert.deepEqual(await functions(), ['intake_next_batch']);
      const queue = await openPostgresIntakeQueue({ pool, schema });
      await queue.close();
      assert.deepEqual(await functions(), ['intake_batch_candidates'], 'the policy-deciding function is gone');
      await assert.rejects(applyPostgresMigrations(pool, schema, POSTGRES_QUEUE_COMPONENT, POSTGRES_QUEUE_MIGRATIONS.slice(0, logVersion)), (error: unknown) => {
        assertTrailwireError('internal')(error);
        assert.match((error as Error).message, /0004_intake_batch_reads_candidates/);
        return true;
      });
    } finally {
      await pool.end();
    }
  });

  it("trimming keeps each remaining payload's processed time, and only the batch times still needed", async () => {
    const schema = newSchema();
    const a = await openProcess(schema);
    try {
      const items = [item(), item(), item()];
      for (const [i, entry] of items.entries()) {
        await a.queue.enqueue(entry);
        const batch = await a.queue.nextBatch(10, T0);
        await a.queue.commitBatch(batch!, new Map([[batch!.entries[0]!.seq, { kind: 'processed' }]]), T0 + 10 * (i + 1));
      }
      const batchRows = async () => (await admin.query(`SELECT count(*)::int AS n FROM "${schema}".intake_batches`)).rows[0].n;
      assert.equal(await batchRows(), 3);
      assert.equal(await a.queue.purgeProcessed(T0 + 15, 10), 1);
      assert.equal(await a.queue.get(items[0]!.id), null);
      assert.deepEqual(pickStatus(await a.queue.get(items[1]!.id)), ['processed', 1, T0 + 20]);
      assert.deepEqual(pickStatus(await a.queue.get(items[2]!.id)), ['processed', 1, T0 + 30]);
      assert.equal(await batchRows(), 2, "the first batch's time went with its payload");
      assert.equal(await a.queue.purgeProcessed(T0 + 1000, 10), 2);
      assert.equal(await batchRows(), 1, 'the newest stays');
      const fresh = item();
      await a.queue.enqueue(fresh);
      assert.equal((await a.queue.get(fresh.id))?.status, 'queued');
    } finally {
      await a.close();
    }
  });

  it('a queue whose session is lost reconnects and wakes its worker (notices meanwhile went unheard)', async () => {
    const schema = newSchema();
    let wakes = 0;
    const a = await openProcess(schema, { reconnectDelayMs: 20, onEnqueued: () => wakes++ });
    const b = await openProcess(schema);
    try {
      const pid = (a.queue as unknown as { session: { processID: number } }).session.processID;
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
      await until(() => wakes > 0, 'the reconnect to wake the worker', 10_000);
      const after = wakes;
      await until(async () => {
        await b.queue.enqueue(item({ vin: uniqueVin() }));
        return wakes > after;
      }, 'a notice on the new session', 10_000);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
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
      await until(() => heard.length === 1, 'the first notice', 10_000);
      await writer.queue.enqueue(item({ idempotencyKey: 'k' })); // a replay: nothing stored
      await elsewhere.queue.enqueue(item());
      await writer.queue.enqueue(item());
      // Notices arrive in commit order, so a notice for the replay or the other schema would come first.
      await until(() => heard.length >= 2, 'the second notice', 10_000);
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(heard.length, 2);
    } finally {
      await Promise.all([listener.close(), writer.close(), elsewhere.close()]);
    }
  });

  it('a batch refuses to open under an isolation level where its horizon would not be enough', async () => {
    const schema = newSchema();
    const a = await openProcess(schema);
    try {
      await a.queue.enqueue(item());
      await a.pool.query('SET default_transaction_isolation TO "repeatable read"'); // one of the pool's connections
      await assert.rejects(
        Promise.all(Array.from({ length: 4 }, () => a.queue.nextBatch(10, T0).then((batch) => batch && a.queue.abandonBatch(batch)))),
        /READ COMMITTED/,
      );
    } finally {
      await a.close();
    }
  });

  it('dead-letters a payload accepted before its VIN was registered to a customer that did not grant its partner (issue 37)', async () => {
    const store = await openPostgresStore({ connectionString, schema: newSchema(), poolSize: 4 });
    const queue = await openPostgresIntakeQueue(store);
    const bus = new RecordingLiveBus();
    const events = bus.published;
    const trailwire = await createTrailwire({ store, products: builtInProducts, intakeQueue: queue, live: { bus }, partnerIntake: { requireGrants: true } });
    try {
      // The worker is not started: processing runs when the scenario says.
      await assertLateRegistrationRefused({ trailwire, process: async () => void (await trailwire.intake!.worker!.drainDue()), published: () => events });
    } finally {
      await trailwire.close();
      await queue.close();
    }
  });

  describe('intake worker end to end, two processes on one store and queue', () => {
    const schema = newSchema();

    /** One Trailwire process: its own store pool and queue session on the shared schema, its worker's idle poll ten minutes. */
    async function openTrailwire(): Promise<{ trailwire: Trailwire; queue: PostgresIntakeQueue; events: LiveTrailerEvent[] }> {
      const store = await openPostgresStore({ connectionString, schema, poolSize: 4 });
      let trailwire: Trailwire | undefined;
      const queue = await openPostgresIntakeQueue(store, { onEnqueued: () => trailwire?.intake?.worker!.notify() });
      const bus = new RecordingLiveBus();
      const events = bus.published;
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
        await back.trailwire.intake!.worker!.start();
        await until(backCalls.idle, 'the back worker to finish its first round', 10_000);
        const claims = { aud: 'partners', sub: 'partner-1', scope: 'product:gps-basic', ver: 1 } as never;
        const send = (seconds: number) => {
          const body = { timestamp: 1780315200 + seconds, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 100, bearingDeg: 90 };
          return front.trailwire.intake!.service.accept({ claims, vin, body, rawBody: JSON.stringify(body) });
        };
        const accepted = [];
        for (const seconds of [0, 1, 2, 3]) accepted.push(await send(seconds));
        await until(() => back.trailwire.intake!.worker!.counts.processed === 4, 'the back worker to process all four', 10_000);
        for (const { record } of accepted) assert.equal((await front.queue.get(record.id))?.status, 'processed');
        const latest = await front.trailwire.store.getTrailer(principal.id, trailer.id);
        assert.equal(latest?.telemetry?.timestamp, (1780315200 + 3) * 1000, "the trailer's position is the newest payload's, read by the other process");
        const fixes = await front.trailwire.store.listGps(principal.id, trailer.id, { from: 0, to: Number.MAX_SAFE_INTEGER, limit: 10 });
        assert.equal(fixes.length, 4, 'every payload wrote its GPS fix');
        assert.deepEqual(front.events, [], 'the front process processed nothing');
        // One live update per changed trailer per batch: in order, the last one the newest position.
        const published = back.events.map((event) => event.trailer.telemetry!.timestamp);
        assert.ok(published.length >= 1 && published.length <= 4, `one to four updates (${published.length})`);
        assert.deepEqual(published, [...published].sort((x, y) => x - y), 'in order');
        assert.equal(published.at(-1), (1780315200 + 3) * 1000);
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
  for (const name of ['nextBatch', 'commitBatch', 'abandonBatch', 'purgeProcessed']) {
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

function pickStatus(record: { status: string; attempts: number; processedAt: number | null } | null): unknown[] {
  return [record?.status, record?.attempts, record?.processedAt];
}
