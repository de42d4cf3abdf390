/**
 * Resume across processes (issue 32, contract 8 and 11): two real `trailwire serve` processes on
 * one PostgreSQL schema and one Redis prefix. A LiveFeed client and a `GET /api/v1/live` reader are
 * subscribed to process A while partner payloads flow into both processes; A is stopped (a rolling
 * deploy: its streams end UNAVAILABLE), payloads keep flowing into B for 5 s at 500 a second, and
 * then both clients resume on B with the last position each received (`resume_after`,
 * `Last-Event-ID`). Each receives every update published after that position — the Redis stream
 * that is the window, read directly, is the reference — in order, exactly once, without a reset or
 * a snapshot, and then the live updates. Needs `TRAILWIRE_TEST_DATABASE_URL` and
 * `TRAILWIRE_TEST_REDIS_URL`; the schema and the Redis prefix are this run's own.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Agent, request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { Redis } from 'ioredis';
import pg from 'pg';
import { PROTO_LOADER_OPTIONS } from '../../adapters/grpc/proto.ts';
import { openStoreBackend } from '../../adapters/server/backends.ts';
import { comparePositions } from '../../core/live-replay.ts';
import { createTrailwire } from '../../core/trailwire.ts';
import { withCheckDigit } from '../../core/vin.ts';
import { builtInProducts } from '../../products/index.ts';
import * as protoLoader from '@grpc/proto-loader';
import { startServe } from '../support/cli.ts';
import { until } from '../support/until.ts';

const DATABASE_URL = process.env.TRAILWIRE_TEST_DATABASE_URL;
const REDIS_URL = process.env.TRAILWIRE_TEST_REDIS_URL;
const skip =
  DATABASE_URL === undefined ? 'TRAILWIRE_TEST_DATABASE_URL is not set' : REDIS_URL === undefined ? 'TRAILWIRE_TEST_REDIS_URL is not set' : false;

const env = { ...process.env };
delete env.TRAILWIRE_WORKERS;

/** Updates of one client, as its wire carried them. */
interface Heard {
  /** Positions of the updates, in arrival order. */
  updates: string[];
  /** The last position received (of an update or a heartbeat): what a client resumes after. */
  last: string | null;
  /** Kinds other than updates and heartbeats (a reset, a snapshot), which a resume inside the window never sends. */
  others: string[];
  heartbeats: number;
  ended: boolean;
  close(): void;
}

const LiveFeed = (grpc.loadPackageDefinition(protoLoader.loadSync('livefeed/v1/livefeed.proto', PROTO_LOADER_OPTIONS)) as any).livefeed.v1.LiveFeed;

/** A raw LiveFeed subscription (the protocol itself, not the client library): `resume_after` when given. */
function subscribeGrpc(target: string, token: string, resumeAfter?: string): Heard {
  const client = new LiveFeed(target, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
  const metadata = new grpc.Metadata();
  metadata.set('authorization', `Bearer ${token}`);
  const call = client.Subscribe(resumeAfter === undefined ? {} : { resume_after: resumeAfter }, metadata);
  const heard: Heard = {
    updates: [],
    last: null,
    others: [],
    heartbeats: 0,
    ended: false,
    close: () => {
      call.cancel();
      client.close();
    },
  };
  call.on('data', (message: { is_heartbeat: boolean; live_update?: unknown; position?: string; is_snapshot: boolean; snapshot_end: boolean; resume_reset: boolean }) => {
    const position = message.position || null;
    if (message.is_heartbeat) heard.heartbeats++;
    else if (message.resume_reset) heard.others.push('resume-reset');
    else if (message.snapshot_end) heard.others.push('snapshot-end');
    else if (message.is_snapshot) heard.others.push('snapshot');
    else if (message.live_update) heard.updates.push(position!);
    if (position !== null) heard.last = position;
  });
  call.on('error', () => (heard.ended = true));
  return heard;
}

/** A `GET /api/v1/live` reader, resuming with `Last-Event-ID` as EventSource does when given. */
function subscribeSse(base: string, token: string, lastEventId?: string): Heard {
  const controller = new AbortController();
  const heard: Heard = { updates: [], last: null, others: [], heartbeats: 0, ended: false, close: () => controller.abort() };
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
  void (async () => {
    try {
      const response = await fetch(`${base}/api/v1/live`, { headers, signal: controller.signal });
      assert.equal(response.status, 200);
      let buffer = '';
      const decoder = new TextDecoder();
      for await (const chunk of response.body!) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        let split: number;
        while ((split = buffer.indexOf('\n\n')) >= 0) {
          const fields = new Map<string, string>();
          for (const line of buffer.slice(0, split).split('\n')) {
            const colon = line.indexOf(':');
            fields.set(line.slice(0, colon), line.slice(colon + 1).replace(/^ /, ''));
          }
          buffer = buffer.slice(split + 2);
          const event = fields.get('event') ?? 'message';
          const id = fields.get('id') || null;
          if (event === 'update') heard.updates.push(id!);
          else if (event === 'heartbeat') heard.heartbeats++;
          else heard.others.push(event);
          if (id !== null) heard.last = id;
        }
      }
    } catch {
      // Aborted by close(), or the process went away.
    }
    heard.ended = true;
  })();
  return heard;
}

describe('a live client resumes on another process', { skip }, () => {
  const schema = `tw_test_${randomBytes(6).toString('hex')}`;
  const redisPrefix = `${schema}:`;
  const children: ChildProcess[] = [];
  const vins = Array.from({ length: 40 }, (_, i) => withCheckDigit(`1RS000000${String(i + 1).padStart(8, '0')}`));
  let partnerKey = '';
  let customerKey = '';
  let redis: Redis;

  async function serve(): Promise<{ child: ChildProcess; url: string; grpc: string }> {
    const args = ['--json', '--port', '0', '--grpc-port', '0', '--host', '127.0.0.1', '--heartbeat-ms', '200'];
    args.push('--database-url', DATABASE_URL!, '--database-schema', schema, '--redis-url', REDIS_URL!, '--redis-prefix', redisPrefix);
    // The test sends about 200 fixes a VIN: the limit is not what it is about.
    args.push('--product-limit', 'gps-basic=100000/3600', '--read-limit', '1000000/60');
    const { child, document } = await startServe(args, env, (started) => children.push(started));
    return { child, ...document };
  }

  async function tokenOf(base: string, audience: 'partners' | 'customers', apiKey: string): Promise<string> {
    const response = await fetch(`${base}/api/v1/${audience}/authenticate`, { method: 'POST', headers: { 'x-api-key': apiKey } });
    assert.equal(response.status, 200, `${audience} authenticate`);
    return ((await response.json()) as { access_token: string }).access_token;
  }

  /** The window itself: every position in the Redis stream after `position`, in order. */
  async function windowAfter(position: string): Promise<string[]> {
    const entries = await redis.xrange(`${redisPrefix}live:window`, `(${position}`, '+');
    return entries.map(([id]) => id);
  }

  let sent = 0;
  const fixEpoch = Math.floor(Date.now() / 1000) - 20_000;
  /**
   * POSTs gps-basic fixes at `perSecond` for `seconds`, round-robin over `bases` and the VINs; each
   * fix is a second later than the one before, so every one moves its trailer. Answers the ids of
   * the 202s.
   */
  async function flow(bases: Array<{ url: string; token: string }>, perSecond: number, seconds: number): Promise<string[]> {
    const ids: Promise<string>[] = [];
    const started = performance.now();
    let due = 0;
    while (performance.now() - started < seconds * 1000) {
      const target = Math.floor(((performance.now() - started) / 1000) * perSecond);
      for (; due < target; due++) {
        const n = sent++;
        const { url, token } = bases[n % bases.length]!;
        const body = JSON.stringify({ timestamp: fixEpoch + n, position: { latitude: 41 + (n % 100) / 1000, longitude: -87.6 }, speedKph: 70, bearingDeg: 90 });
        ids.push(post(`${url}/api/v1/telemetry/intake/${vins[n % vins.length]}`, token, body, n));
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    return Promise.all(ids);
  }

  // A few kept-alive connections, as a partner's uploader has: not a new connection per payload.
  const agent = new Agent({ keepAlive: true, maxSockets: 16 });

  function post(url: string, token: string, body: string, n: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const req = request(url, { method: 'POST', agent, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } });
      req.on('response', (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk));
        res.on('end', () => {
          if (res.statusCode === 202) resolve((JSON.parse(text) as { id: string }).id);
          else reject(new Error(`payload ${n}: ${res.statusCode} ${text}`));
        });
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  function statusOf(base: string, token: string, id: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const req = request(`${base}/api/v1/telemetry/intake/status/${id}`, { agent, headers: { authorization: `Bearer ${token}` } });
      req.on('response', (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk));
        res.on('end', () => (res.statusCode === 200 ? resolve((JSON.parse(text) as { status: string }).status) : reject(new Error(`status of ${id}: ${res.statusCode} ${text}`))));
      });
      req.on('error', reject);
      req.end();
    });
  }

  /** Waits until every acknowledged payload says `processed` (read over the agent's few connections, as `assertAllProcessed` does over many). */
  async function allProcessed(base: string, token: string, ids: readonly string[]): Promise<void> {
    let pending = [...ids];
    await until(async () => {
      const states = await Promise.all(pending.map(async (id) => ({ id, status: await statusOf(base, token, id) })));
      assert.deepEqual(states.filter((state) => state.status === 'failed'), [], 'no acknowledged payload failed');
      pending = states.filter((state) => state.status !== 'processed').map((state) => state.id);
      return pending.length === 0;
    }, 'every acknowledged payload to be processed', 90_000);
  }

  before(async () => {
    const backend = await openStoreBackend({ databaseUrl: DATABASE_URL, databaseSchema: schema });
    const trailwire = await createTrailwire({ store: backend.store, products: builtInProducts });
    try {
      partnerKey = (await trailwire.auth.createPartner({ name: 'Resume partner', product: 'gps-basic' })).apiKey;
      const customer = await trailwire.auth.createCustomer({ name: 'Resume customer' });
      customerKey = customer.apiKey;
      const fleet = await trailwire.admin.createFleet({ customerId: customer.principal.id, name: 'Resume fleet' });
      for (const vin of vins) await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin });
    } finally {
      await trailwire.close();
      await backend.intake.stop();
    }
    redis = new Redis(REDIS_URL!);
  });

  after(async () => {
    await Promise.all(
      children.map((child) => {
        if (child.exitCode !== null || child.signalCode !== null) return undefined;
        const exit = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGKILL');
        return exit;
      }),
    );
    const keys = await redis.keys(`${redisPrefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    agent.destroy();
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await client.end();
  });

  it('A stops; 5 s later the LiveFeed client and the event-stream reader resume on B with their last positions and receive every update they missed, in order, once', { timeout: 120_000 }, async () => {
    const [a, b] = await Promise.all([serve(), serve()]);
    const [customerOnA, customerOnB, partnerOnA, partnerOnB] = await Promise.all([
      tokenOf(a.url, 'customers', customerKey),
      tokenOf(b.url, 'customers', customerKey),
      tokenOf(a.url, 'partners', partnerKey),
      tokenOf(b.url, 'partners', partnerKey),
    ]);
    const grpcOnA = subscribeGrpc(a.grpc, customerOnA);
    const sseOnA = subscribeSse(a.url, customerOnA);
    const grpcHeard: Heard[] = [grpcOnA];
    const sseHeard: Heard[] = [sseOnA];
    try {
      await until(() => grpcOnA.heartbeats > 0 && sseOnA.heartbeats > 0, 'the first heartbeat of both streams of A', 15_000);
      // Updates flow into both processes while the clients listen to A.
      const ids = await flow([{ url: a.url, token: partnerOnA }, { url: b.url, token: partnerOnB }], 500, 1);
      await until(() => grpcOnA.updates.length > 0 && sseOnA.updates.length > 0, 'updates on both streams of A', 30_000);

      // A rolling deploy: A stops, and its streams end.
      const exit = new Promise((resolve) => a.child.once('exit', resolve));
      a.child.kill('SIGTERM');
      await exit;
      await until(() => grpcOnA.ended && sseOnA.ended, 'both streams of A to end', 15_000);
      const lastGrpc = grpcOnA.last!;
      const lastSse = sseOnA.last!;

      // Away for 5 s while updates flow at 500 a second, into B now.
      ids.push(...(await flow([{ url: b.url, token: partnerOnB }], 500, 5)));
      // Everything acknowledged is processed (A's unprocessed payloads by B) before the clients come
      // back, so that what they missed is all in the window when they resume.
      await allProcessed(b.url, partnerOnB, ids);

      const grpcOnB = subscribeGrpc(b.grpc, customerOnB, lastGrpc);
      const sseOnB = subscribeSse(b.url, customerOnB, lastSse);
      grpcHeard.push(grpcOnB);
      sseHeard.push(sseOnB);
      // Then live updates again (one per VIN: a client that keeps up sees each).
      ids.push(...(await flow([{ url: b.url, token: partnerOnB }], 200, 0.2)));
      await allProcessed(b.url, partnerOnB, ids.slice(-40));

      for (const [name, resumed, from] of [['LiveFeed', grpcOnB, lastGrpc], ['event stream', sseOnB, lastSse]] as const) {
        // The window is the reference; the client has caught up once it holds the window's newest position.
        let expected: string[] = [];
        await until(async () => {
          expected = await windowAfter(from);
          return expected.length > 0 && resumed.updates.at(-1) === expected.at(-1);
        }, `the ${name} client on B to catch up with the window`, 30_000);
        // The worker publishes one update per changed trailer per batch: fewer than the payloads.
        assert.ok(expected.length > vins.length, `${name}: the client missed 5 s of updates (${expected.length} in the window after its position)`);
        assert.deepEqual(resumed.updates, expected, `${name}: every update after ${from}, in order, exactly once`);
        assert.deepEqual(resumed.others, [], `${name}: no reset and no snapshot inside the window`);
        const before = name === 'LiveFeed' ? grpcOnA.updates : sseOnA.updates;
        assert.ok(before.every((position) => comparePositions(position, from) <= 0), `${name}: what A delivered ends at the resume position`);
      }
    } finally {
      for (const heard of [...grpcHeard, ...sseHeard]) heard.close();
    }
  });
});
