/**
 * Contract 11 end to end: two real `trailwire serve` processes on one PostgreSQL schema and one
 * Redis prefix serve one fleet. An intake taken by A reaches a LiveFeed subscriber of B and a
 * `GET /api/v1/live` reader of B; a product's per-VIN limit holds across both; and when A is killed (SIGKILL, no shutdown hook) right after its
 * 202s, B processes every payload A acknowledged. Then `serve --workers 2` runs two cluster workers
 * behind one pair of ports, replaces one killed with SIGKILL, and stops them all on SIGTERM (and refuses to, without PostgreSQL and
 * Redis: that case needs neither). Needs `TRAILWIRE_TEST_DATABASE_URL` and
 * `TRAILWIRE_TEST_REDIS_URL`; the schema (`tw_test_<hex>`, dropped at the end) and the Redis prefix
 * (`tw_test_<hex>:`, whose counters expire with their window) are this run's own.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { openStoreBackend } from '../../adapters/server/backends.ts';
import { createTrailwire } from '../../core/trailwire.ts';
import { withCheckDigit } from '../../core/vin.ts';
import { builtInProducts } from '../../products/index.ts';
import { subscribeLiveFeed, type LiveUpdate } from '../../simulator/client/index.ts';
import { startServe, TRAILWIRE_BIN } from '../support/cli.ts';
import { assertAllProcessed } from '../support/intake-status.ts';
import { until } from '../support/until.ts';

const DATABASE_URL = process.env.TRAILWIRE_TEST_DATABASE_URL;
const REDIS_URL = process.env.TRAILWIRE_TEST_REDIS_URL;
const skip =
  DATABASE_URL === undefined ? 'TRAILWIRE_TEST_DATABASE_URL is not set' : REDIS_URL === undefined ? 'TRAILWIRE_TEST_REDIS_URL is not set' : false;

// The command line says everything; a TRAILWIRE_WORKERS of the caller's shell would change what runs.
const env = { ...process.env };
delete env.TRAILWIRE_WORKERS;
const BIN = TRAILWIRE_BIN;
/** The gps-basic limit both processes are started with: per VIN, per hour (so a burst never straddles two windows but by bad luck, which `awayFromWindowEdge` avoids). */
const LIMIT = 5;
const LIMIT_WINDOW_SECONDS = 3600;

interface Serving {
  child: ChildProcess;
  url: string;
  grpc: string;
  workers: number;
  /** The SQLite file, or null with PostgreSQL. */
  db: string | null;
  /** Where the state lives, as printed. */
  store: string;
  stderr: string[];
}

/** A fresh, valid VIN (unique within the run's own schema). */
let vins = 0;
const freshVin = () => withCheckDigit(`1SC000000${String(++vins).padStart(8, '0')}`);


describe('several trailwire serve processes on one PostgreSQL and one Redis', { skip }, () => {
  const schema = `tw_test_${randomBytes(6).toString('hex')}`;
  const redisPrefix = `${schema}:`;
  const children: ChildProcess[] = [];
  let partnerKey = '';
  let customerKey = '';
  let trailerId = '';
  let trailerVin = '';
  let a: Serving;
  let b: Serving;

  /** Starts `trailwire serve --json` on this run's schema and prefix; answers once it printed its document. */
  async function serve(extra: string[] = []): Promise<Serving> {
    const args = ['--json', '--port', '0', '--grpc-port', '0', '--host', '127.0.0.1', '--log-level', 'info', '--heartbeat-ms', '200'];
    args.push('--database-url', DATABASE_URL!, '--database-schema', schema, '--redis-url', REDIS_URL!, '--redis-prefix', redisPrefix);
    args.push('--product-limit', `gps-basic=${LIMIT}/${LIMIT_WINDOW_SECONDS}`, ...extra);
    const { child, stderr, document } = await startServe<Omit<Serving, 'child' | 'stderr'>>(args, env, (started) => children.push(started));
    return { child, stderr, ...document };
  }

  async function tokenOf(base: string, audience: 'partners' | 'customers', apiKey: string): Promise<string> {
    const response = await fetch(`${base}/api/v1/${audience}/authenticate`, { method: 'POST', headers: { 'x-api-key': apiKey } });
    assert.equal(response.status, 200, `${audience} authenticate`);
    return ((await response.json()) as { access_token: string }).access_token;
  }

  /** Posts a GPS fix, taken now unless `timestamp` (epoch seconds) says when. */
  function sendGps(base: string, token: string, vin: string, latitude = 41.5, timestamp = Math.floor(Date.now() / 1000)): Promise<Response> {
    return fetch(`${base}/api/v1/telemetry/intake/${vin}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ timestamp, position: { latitude, longitude: -87.6 }, speedKph: 70, bearingDeg: 90 }),
    });
  }

  async function stopped(child: ChildProcess, signal: NodeJS.Signals): Promise<number | null> {
    if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
    const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill(signal);
    return exit;
  }

  before(async () => {
    // Provisioned in-process on the run's schema, as an operator's `trailwire ... create` would.
    const backend = await openStoreBackend({ databaseUrl: DATABASE_URL, databaseSchema: schema });
    const trailwire = await createTrailwire({ store: backend.store, products: builtInProducts });
    try {
      partnerKey = (await trailwire.auth.createPartner({ name: 'Scale-out partner', product: 'gps-basic' })).apiKey;
      const customer = await trailwire.auth.createCustomer({ name: 'Scale-out customer' });
      customerKey = customer.apiKey;
      const fleet = await trailwire.admin.createFleet({ customerId: customer.principal.id, name: 'Scale-out fleet' });
      trailerVin = freshVin();
      trailerId = (await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: trailerVin, unitId: 'SO-1' })).id;
    } finally {
      await trailwire.close();
      await backend.intake.stop();
    }
    [a, b] = await Promise.all([serve(), serve()]);
  });

  after(async () => {
    await Promise.all(children.map((child) => stopped(child, 'SIGKILL')));
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await client.end();
  });

  it('delivers an intake taken by process A to a LiveFeed subscriber of process B', async () => {
    assert.notEqual(a.url, b.url);
    const customerToken = await tokenOf(b.url, 'customers', customerKey);
    const updates: LiveUpdate[] = [];
    let heartbeats = 0;
    const subscription = subscribeLiveFeed(
      { target: b.grpc, token: async () => customerToken, maxReconnects: 0 },
      { onUpdate: (update) => updates.push(update), onHeartbeat: () => heartbeats++ },
    );
    try {
      // The server writes the first heartbeat as it registers the stream with its hub.
      await until(() => heartbeats > 0, 'the first heartbeat from B', 15_000);
      const partnerToken = await tokenOf(a.url, 'partners', partnerKey);
      // A minute old: the next test's fix (taken now) is the trailer's latest without waiting for the clock.
      const response = await sendGps(a.url, partnerToken, trailerVin, 42.25, Math.floor(Date.now() / 1000) - 60);
      assert.equal(response.status, 202);
      await until(() => updates.some((update) => update.trailer.telemetry?.lat === 42.25), 'the update at B', 15_000);
      const update = updates.find((candidate) => candidate.trailer.telemetry?.lat === 42.25)!;
      assert.equal(update.trailer.id, trailerId);
      assert.equal(update.trailer.vin, trailerVin);
      assert.equal(update.trailer.unitId, 'SO-1');
      assert.equal(update.fleetName, 'Scale-out fleet');
    } finally {
      subscription.close();
    }
  });

  it('delivers an intake taken by process A to a GET /api/v1/live reader of process B, as the trailer JSON B reads', async () => {
    const customerToken = await tokenOf(b.url, 'customers', customerKey);
    const controller = new AbortController();
    const response = await fetch(`${b.url}/api/v1/live`, { headers: { authorization: `Bearer ${customerToken}` }, signal: controller.signal });
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^text\/event-stream/);
    let text = '';
    const reading = (async () => {
      try {
        for await (const chunk of response.body!) text += Buffer.from(chunk as Uint8Array).toString('utf8');
      } catch {
        // Aborted below.
      }
    })();
    /** The `data` of every `event: update` read so far. */
    const updates = () =>
      text
        .split('\n\n')
        .filter((block) => block.split('\n').includes('event: update'))
        .map((block) => JSON.parse(block.split('\n').find((line) => line.startsWith('data: '))!.slice(6)));
    try {
      await until(() => text.includes('event: heartbeat'), 'the first heartbeat from B', 15_000);
      const partnerToken = await tokenOf(a.url, 'partners', partnerKey);
      assert.equal((await sendGps(a.url, partnerToken, trailerVin, 43.5)).status, 202);
      await until(() => updates().some((trailer) => trailer.telemetry?.lat === 43.5), 'the update at B', 15_000);
      const { updatedAt, ...update } = updates().find((trailer) => trailer.telemetry?.lat === 43.5);
      const read = await fetch(`${b.url}/api/v1/trailers/${trailerId}`, { headers: { authorization: `Bearer ${customerToken}` } });
      // The stream carries what the read API answers for the trailer (nothing has changed it since), and when the update was made.
      assert.deepEqual(update, await read.json());
      assert.ok(Number.isFinite(Date.parse(updatedAt)), `updatedAt ${updatedAt}`);
    } finally {
      controller.abort();
      await reading;
    }
  });

  it(`holds a product's per-VIN limit across both processes (${LIMIT} per window in all)`, async () => {
    await awayFromWindowEdge(LIMIT_WINDOW_SECONDS);
    const vin = freshVin();
    const tokens = await Promise.all([tokenOf(a.url, 'partners', partnerKey), tokenOf(b.url, 'partners', partnerKey)]);
    const bases = [a.url, b.url];
    // 2 × LIMIT at once, half to each process: each alone would let LIMIT through, so 2 × LIMIT in all.
    const statuses = await Promise.all(
      Array.from({ length: 2 * LIMIT }, async (_, i) => ({ process: i % 2 === 0 ? 'A' : 'B', status: (await sendGps(bases[i % 2]!, tokens[i % 2]!, vin)).status })),
    );
    const accepted = statuses.filter((answer) => answer.status === 202).length;
    assert.equal(accepted, LIMIT, `202s across A and B: ${JSON.stringify(statuses)}`);
    assert.equal(statuses.filter((answer) => answer.status === 429).length, LIMIT);
  });

  it('processes, in the survivor, every payload a SIGKILLed process acknowledged', { timeout: 40_000 }, async () => {
    const token = await tokenOf(a.url, 'partners', partnerKey);
    // LIMIT payloads for each of 8 fresh VINs: all within their limit, several of a VIN in flight at once.
    const burst = Array.from({ length: 8 }, () => freshVin()).flatMap((vin) => Array.from({ length: LIMIT }, (_, i) => ({ vin, latitude: 40 + i / 10 })));
    const acknowledged = await Promise.all(
      burst.map(async ({ vin, latitude }) => {
        const response = await sendGps(a.url, token, vin, latitude);
        assert.equal(response.status, 202);
        return ((await response.json()) as { id: string }).id;
      }),
    );
    await stopped(a.child, 'SIGKILL');

    await assertAllProcessed(b.url, token, acknowledged);
  });

  it('serve --workers 2 runs two workers behind one pair of ports, prints once, and stops them all on SIGTERM', { timeout: 40_000 }, async () => {
    const cluster = await serve(['--workers', '2']);
    // The document names PostgreSQL and Redis as the store (password-free), and no SQLite file.
    assert.equal(cluster.db, null);
    assert.match(cluster.store, /^postgres postgres:\/\/.* \+ redis redis:\/\//);
    assert.equal(cluster.workers, 2);
    const response = await fetch(`${cluster.url}/readyz`);
    assert.equal(response.status, 200);
    const serving = () => cluster.stderr.filter((line) => line.includes('"trailwire worker serving"')).map((line) => JSON.parse(line).pid as number);
    await until(() => serving().length === 2, 'both workers to log that they serve', 15_000);
    const pids = serving();
    assert.equal(new Set(pids).size, 2, 'two worker processes');
    assert.ok(!pids.includes(cluster.child.pid!), 'the workers are not the primary');
    // The LiveFeed port answers too (a worker registered the stream).
    const customerToken = await tokenOf(cluster.url, 'customers', customerKey);
    let heartbeats = 0;
    const subscription = subscribeLiveFeed({ target: cluster.grpc, token: async () => customerToken, maxReconnects: 0 }, { onHeartbeat: () => heartbeats++ });
    try {
      await until(() => heartbeats > 0, 'a heartbeat through the shared gRPC port', 15_000);
    } finally {
      subscription.close();
    }
    // A worker killed outright is replaced (after the first backoff, 1 s), and the crash is logged.
    const logged = (message: string) => cluster.stderr.filter((line) => line.includes(`"${message}"`)).map((line) => JSON.parse(line));
    process.kill(pids[0]!, 'SIGKILL');
    await until(() => logged('worker exited unexpectedly; replacing it').length === 1, 'the crash to be logged', 15_000);
    const [crash] = logged('worker exited unexpectedly; replacing it');
    assert.equal(crash.pid, pids[0]);
    assert.equal(crash.signal, 'SIGKILL');
    assert.equal(crash.restartInMs, 1000);
    assert.equal(crash.level, 50);
    await until(() => logged('worker replaced').length === 1, 'the replacement to serve', 15_000);
    const replacement = logged('worker replaced')[0].pid as number;
    assert.ok(!pids.includes(replacement), 'a new process');
    assert.equal((await fetch(`${cluster.url}/readyz`)).status, 200);
    // A deliberate stop replaces nothing.
    assert.equal(await stopped(cluster.child, 'SIGTERM'), 0);
    for (const pid of [...pids, replacement]) assert.throws(() => process.kill(pid, 0), { code: 'ESRCH' }, `worker ${pid} is gone`);
    assert.equal(logged('worker replaced').length, 1);
    assert.equal(logged('worker exited unexpectedly; replacing it').length, 1);
  });
});

describe('serve --workers', () => {
  it('refuses more than one worker without --database-url and --redis-url, saying why, before forking any', async () => {
    const child = spawn(process.execPath, [BIN, 'serve', '--workers', '2', '--json', '--port', '0', '--grpc-port', '0', '--redis-url', 'redis://127.0.0.1:1'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env,
    });
    let stdout = '';
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk));
    const code = await new Promise((resolve) => child.once('exit', resolve));
    assert.equal(code, 1);
    const { error } = JSON.parse(stdout) as { error: { code: string; message: string } };
    assert.equal(error.code, 'validation_failed');
    assert.match(error.message, /--workers 2 needs --database-url and --redis-url/);
  });
});

/** Waits, if need be, so that what follows starts at least 10 s before the current window of `windowSeconds` ends. */
async function awayFromWindowEdge(windowSeconds: number): Promise<void> {
  const left = windowSeconds * 1000 - (Date.now() % (windowSeconds * 1000));
  if (left < 10_000) await new Promise((resolve) => setTimeout(resolve, left + 100));
}
