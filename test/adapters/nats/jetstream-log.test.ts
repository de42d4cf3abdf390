/**
 * The JetStream intake log: the log conformance suite on a stream of its own per case (two
 * connections on one stream for the sharing case), then what is JetStream's own — a full stream
 * refuses with a 503 and Retry-After rather than dropping, a present stream or bucket whose settings
 * differ is refused naming the setting, a commit lets the stream forget what it covers, and a lease
 * whose holder stops renewing it passes to another. Needs `TRAILWIRE_TEST_NATS_URL`.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { jetStreamOptionsOfUrl, openJetStreamIntakeLog, resolveJetStreamIntakeLogOptions, type JetStreamIntakeLogOptions } from '../../../adapters/nats/index.ts';
import { isTrailwireError, TrailwireError } from '../../../core/errors.ts';
import { runIntakeLogConformance } from '../../conformance/intake-log.ts';
import { newIntake } from '../../support/fixtures.ts';
import { deleteStreams, freshStream, NATS_SKIP, NATS_URL } from '../../support/nats.ts';
import { until } from '../../support/until.ts';

describe('resolveJetStreamIntakeLogOptions', () => {
  const cases: [string, unknown][] = [
    ['servers', 'http://127.0.0.1:4222'],
    ['partitions', 0],
    ['replicas', 1.5],
    ['leaseTtlMs', 10],
    ['stream', 'a.b'],
  ];
  for (const [field, value] of cases)
    it(`rejects ${field} = ${JSON.stringify(value)}, naming it`, () => {
      assert.throws(
        () => resolveJetStreamIntakeLogOptions({ servers: 'nats://127.0.0.1:4222', [field]: value } as JetStreamIntakeLogOptions),
        (error: unknown) => error instanceof TrailwireError && error.code === 'validation_failed' && error.message.includes(field),
      );
    });
});

describe('JetStream intake log', { skip: NATS_SKIP }, () => {
  const streams: string[] = [];
  const options = (overrides: Partial<JetStreamIntakeLogOptions> = {}): JetStreamIntakeLogOptions => {
    const names = freshStream();
    streams.push(names.stream);
    return { servers: NATS_URL!, ...names, ...overrides };
  };
  after(() => deleteStreams(streams));

  runIntakeLogConformance({
    name: 'jetstream (a stream per case)',
    async openLog() {
      const log = await openJetStreamIntakeLog(options());
      return { log, close: () => log.close() };
    },
    async openSharedLogs() {
      const shared = options();
      const logs = [await openJetStreamIntakeLog(shared), await openJetStreamIntakeLog(shared)] as const;
      return { logs, close: async () => (await logs[0].close(), await logs[1].close()) };
    },
  });

  it('refuses intake with a 503 and Retry-After once the stream is full, keeping what it holds', async () => {
    const log = await openJetStreamIntakeLog(options({ maxMessages: 3 }));
    try {
      const answers = await log.append([newIntake(), newIntake(), newIntake(), newIntake(), newIntake()]);
      assert.equal(answers.filter((answer) => !isTrailwireError(answer)).length, 3, 'three stored');
      const refused = answers.filter(isTrailwireError);
      assert.equal(refused.length, 2);
      for (const error of refused) {
        assert.equal(error.code, 'store_unavailable');
        assert.ok((error.retryAfterSeconds ?? 0) >= 1, 'with Retry-After');
      }
      const partition = log.partitionOf(newIntake().vin);
      const kept = await log.read(partition, 0, 10);
      assert.equal(kept.length, 3, 'nothing old dropped for the new');
      // Committing frees the room.
      await log.commit(partition, kept[2]!.seq);
      assert.deepEqual(await log.pending(), new Array(log.partitions).fill(0), 'the stream forgets what is committed');
      assert.ok(!isTrailwireError((await log.append([newIntake()]))[0]), 'taken again');
    } finally {
      await log.close();
    }
  });

  it('refuses to open on a stream or partition count that differs, naming the setting', async () => {
    const first = options();
    const log = await openJetStreamIntakeLog(first);
    await log.close();
    await assert.rejects(openJetStreamIntakeLog({ ...first, maxBytes: 4096 }), /max_bytes/);
    await assert.rejects(openJetStreamIntakeLog({ ...first, partitions: 8 }), /partitions = 16.*configured for 8/);
    await assert.rejects(openJetStreamIntakeLog({ ...first, leaseTtlMs: 5000 }), /_LEASES has ttl = 10000 ms/);
  });

  it("takes over a partition whose holder stopped renewing its lease (a process that died)", async () => {
    const shared = options({ leaseTtlMs: 1000 });
    const [a, b] = [await openJetStreamIntakeLog(shared), await openJetStreamIntakeLog(shared)];
    try {
      const lease = await a.lease(3);
      assert.ok(lease?.held);
      // A process that died renews nothing: its renewal timer stops with it (here, cleared by hand).
      (a as unknown as { held: Map<number, { timer: NodeJS.Timeout }> }).held.forEach((state) => clearInterval(state.timer));
      assert.equal(await b.lease(3), null, 'still held');
      await until(async () => (await b.lease(3))?.held === true, 'the lease to be taken over once it ran out', 10_000, 100);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe('jetStreamOptionsOfUrl', () => {
  it('reads the servers of a cluster and the settings a URL carries', () => {
    assert.deepEqual(jetStreamOptionsOfUrl('nats://a:4222,b:4222,c:4222?stream=S&replicas=3&partitions=32&max-bytes=1000'), {
      servers: ['nats://a:4222', 'nats://b:4222', 'nats://c:4222'],
      stream: 'S',
      replicas: 3,
      partitions: 32,
      maxBytes: 1000,
    });
    assert.deepEqual(jetStreamOptionsOfUrl('nats://127.0.0.1:4222'), { servers: ['nats://127.0.0.1:4222'] });
  });
  it('refuses an unknown parameter, naming it', () => {
    assert.throws(() => jetStreamOptionsOfUrl('nats://a:4222?replica=3'), /unknown parameter "replica"/);
  });
});
