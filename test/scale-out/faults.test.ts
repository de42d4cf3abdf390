/**
 * Issue 28 for real: one `trailwire serve` on a private PostgreSQL cluster and a private Redis
 * (`test/support/private-services.ts`: their own ports and folders, never the machine's shared
 * ones), under a steady intake load from several clients, while each dependency is killed and
 * started again. What an operator and a partner rely on:
 * - never a 500; every refusal a 503 with `Retry-After`; no request left hanging;
 * - Redis killed: intake keeps answering 202 (limits fall back to per-process windows), reads and
 *   authenticate keep working, `/readyz` stays 200, a live subscriber of the process still gets its
 *   updates, and `trailwire_dependency_up{dependency="redis"}` says 0, then 1;
 * - PostgreSQL stopped ~10 s: refusals are 503 `store_unavailable`, `/readyz` is 503 naming `store`
 *   during the outage and 200 after;
 * - after each restart, at least 90 % of the requests sent in the next 5 s answer 202;
 * - every payload answered 202 ends `processed`.
 * Skipped, saying why, where redis-server or the PostgreSQL server binaries are missing.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { openStoreBackend } from '../../adapters/server/backends.ts';
import { createTrailwire } from '../../core/trailwire.ts';
import { withCheckDigit } from '../../core/vin.ts';
import { builtInProducts } from '../../products/index.ts';
import { runTrailwire, TRAILWIRE_BIN } from '../support/cli.ts';
import { missingBinaries, PrivatePostgres, PrivateRedis } from '../support/private-services.ts';

const skip = missingBinaries();
const SCHEMA = 'tw_faults';
/** Concurrent intake clients. */
const CLIENTS = 6;
/** A client gives up on a request after this long: an answer later than that is a hang. */
const HANG_MS = 15_000;

interface Answer {
  sentAt: number;
  answeredAt: number;
  status: number;
  retryAfter: string | null;
  code?: string;
  id?: string;
}

/** Starts `trailwire serve --json` on the run's schema; answers once it printed its document (rejects, with its stderr, if it exits first). */
async function serve(extra: string[], stderr: string[]): Promise<{ child: ChildProcess; url: string }> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('TRAILWIRE_')));
  const args = [TRAILWIRE_BIN, 'serve', '--json', '--port', '0', '--grpc-port', '0', '--host', '127.0.0.1', '--log-level', 'info', '--heartbeat-ms', '1000'];
  args.push('--database-schema', SCHEMA, '--product-limit', 'gps-basic=100000/60', ...extra);
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
  createInterface({ input: child.stderr! }).on('line', (line) => stderr.push(line));
  const exited = new Promise<never>((_resolve, reject) =>
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}; stderr:\n${stderr.join('\n')}`))),
  );
  const printed = (async () => {
    for await (const line of createInterface({ input: child.stdout! })) return JSON.parse(line) as { url: string };
    throw new Error('serve printed nothing');
  })();
  try {
    return { child, url: (await Promise.race([printed, exited])).url };
  } finally {
    exited.catch(() => {});
  }
}

async function killed(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exit = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exit;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('one trailwire serve riding through Redis and PostgreSQL outages under intake load', { skip, timeout: 180_000 }, () => {
  let redis: PrivateRedis;
  let postgres: PrivatePostgres;
  let child: ChildProcess;
  const stderr: string[] = [];
  let url = '';
  let partnerKey = '';
  let customerKey = '';
  let trailerVin = '';
  let fleetId = 0;
  let partnerToken = '';
  const answers: Answer[] = [];
  let loading = false;
  let load: Promise<void> = Promise.resolve();

  async function tokenOf(audience: 'partners' | 'customers', apiKey: string): Promise<string> {
    const response = await fetch(`${url}/api/v1/${audience}/authenticate`, { method: 'POST', headers: { 'x-api-key': apiKey } });
    assert.equal(response.status, 200, `${audience} authenticate answered ${response.status}`);
    return ((await response.json()) as { access_token: string }).access_token;
  }

  async function postGps(vin: string, latitude = 41.5): Promise<Answer> {
    const sentAt = Date.now();
    try {
      const response = await fetch(`${url}/api/v1/telemetry/intake/${vin}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${partnerToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ timestamp: Math.floor(Date.now() / 1000), position: { latitude, longitude: -87.6 }, speedKph: 70, bearingDeg: 90 }),
        signal: AbortSignal.timeout(HANG_MS),
      });
      const body = (await response.json()) as { id?: string; type?: string };
      return {
        sentAt,
        answeredAt: Date.now(),
        status: response.status,
        retryAfter: response.headers.get('retry-after'),
        code: body.type?.split('/').pop(),
        id: response.status === 202 ? body.id : undefined,
      };
    } catch {
      return { sentAt, answeredAt: Date.now(), status: 0, retryAfter: null };
    }
  }

  /** CLIENTS loops posting to 300 VINs until `loading` is false. */
  function startLoad(): void {
    loading = true;
    const vins = Array.from({ length: 300 }, (_, i) => withCheckDigit(`1FT000000${String(i).padStart(8, '0')}`));
    load = Promise.all(
      Array.from({ length: CLIENTS }, async (_, client) => {
        for (let i = client; loading; i += CLIENTS) {
          answers.push(await postGps(vins[i % vins.length]!));
          // A steady load, not a flood: about 25 requests a second per client.
          await sleep(40);
        }
      }),
    ).then(() => {});
  }

  async function stopLoad(): Promise<void> {
    loading = false;
    await load;
  }

  const between = (from: number, to: number) => answers.filter((answer) => answer.sentAt >= from && answer.sentAt < to);
  const share202 = (list: Answer[]) => list.filter((answer) => answer.status === 202).length / Math.max(1, list.length);
  /** `{"202": n, "503 store_unavailable": m, ...}` of a list of answers. */
  const summary = (list: Answer[]) => {
    const counts: Record<string, number> = {};
    for (const answer of list) {
      const key = `${answer.status}${answer.code && answer.status !== 202 ? ` ${answer.code}` : ''}`;
      counts[key] = (counts[key] ?? 0) + 1;
    }
    return JSON.stringify(counts);
  };

  async function readyz(): Promise<{ status: number; detail: string }> {
    const response = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(HANG_MS) });
    const body = (await response.json()) as { detail?: string; status?: string };
    return { status: response.status, detail: body.detail ?? String(body.status) };
  }

  async function dependencyUp(dependency: string): Promise<number> {
    const text = await (await fetch(`${url}/metrics`)).text();
    const line = text.split('\n').find((candidate) => candidate.startsWith(`trailwire_dependency_up{dependency="${dependency}"}`));
    assert.ok(line, `the metric trailwire_dependency_up{dependency="${dependency}"} is served`);
    return Number(line.split(' ').pop());
  }

  before(async () => {
    [redis, postgres] = await Promise.all([PrivateRedis.start(), PrivatePostgres.start()]);
    // Provisioned in-process, as an operator's `trailwire ... create` would.
    const backend = await openStoreBackend({ databaseUrl: postgres.url, databaseSchema: SCHEMA });
    const trailwire = await createTrailwire({ store: backend.store, products: builtInProducts });
    try {
      partnerKey = (await trailwire.auth.createPartner({ name: 'Faults partner', product: 'gps-basic' })).apiKey;
      const customer = await trailwire.auth.createCustomer({ name: 'Faults customer' });
      customerKey = customer.apiKey;
      const fleet = await trailwire.admin.createFleet({ customerId: customer.principal.id, name: 'Faults fleet' });
      fleetId = fleet.id;
      trailerVin = withCheckDigit('1FX00000000000001');
      await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: trailerVin, unitId: 'F-1' });
    } finally {
      await trailwire.close();
      await backend.intake.stop();
    }
    ({ child, url } = await serve(['--database-url', postgres.url, '--redis-url', redis.url, '--startup-timeout', '20'], stderr));
    partnerToken = await tokenOf('partners', partnerKey);
  });

  after(async () => {
    loading = false;
    await load;
    if (child) await killed(child);
    await redis?.kill();
    postgres?.destroy();
  });

  it('Redis killed: intake keeps answering 202, reads, authenticate and /readyz keep working, local live updates flow, and limits are shared again after', async () => {
    const customerToken = await tokenOf('customers', customerKey);
    // A live reader of this process, to see that its own updates still reach it while Redis is down.
    const controller = new AbortController();
    const live = await fetch(`${url}/api/v1/live`, { headers: { authorization: `Bearer ${customerToken}` }, signal: controller.signal });
    assert.equal(live.status, 200);
    let text = '';
    const reading = (async () => {
      try {
        for await (const chunk of live.body!) text += Buffer.from(chunk as Uint8Array).toString('utf8');
      } catch {
        // Aborted at the end.
      }
    })();
    try {
      startLoad();
      await sleep(1500);
      assert.equal(await dependencyUp('redis'), 1);
      const killedAt = Date.now();
      await redis.kill();
      await sleep(1500);
      // While Redis is down: not a refusal anywhere.
      assert.equal((await readyz()).status, 200, '/readyz stays 200: Redis down refuses nothing');
      assert.equal(await dependencyUp('redis'), 0);
      assert.ok((await tokenOf('customers', customerKey)).length > 0, 'authenticate works');
      const read = await fetch(`${url}/api/v1/trailers?take=1`.replace('trailers?', `trailers/${encodeURIComponent('x')}?`), { headers: { authorization: `Bearer ${customerToken}` } });
      assert.notEqual(read.status, 500);
      assert.ok(read.status < 500, `a read answers (${read.status})`);
      const liveAnswer = await postGps(trailerVin, 44.25);
      assert.equal(liveAnswer.status, 202);
      const deadline = Date.now() + 5000;
      while (!text.includes('44.25') && Date.now() < deadline) await sleep(50);
      assert.ok(text.includes('44.25'), 'a live reader of the process that took the payload gets its update while Redis is down');
      await sleep(2000);
      const restartedAt = Date.now();
      await redis.restart();
      await sleep(5000);
      const down = between(killedAt, restartedAt);
      const afterRestart = between(restartedAt, restartedAt + 5000);
      await stopLoad();
      console.log(`redis: down ${restartedAt - killedAt} ms: ${summary(down)}; 5 s after restart: ${summary(afterRestart)}`);
      assert.ok(down.length > 50, `steady load while Redis is down (${down.length} requests)`);
      assert.equal(share202(down), 1, `every intake while Redis is down answered 202: ${summary(down)}`);
      assert.ok(share202(afterRestart) >= 0.9, `≥ 90 % 202 in the 5 s after the restart: ${summary(afterRestart)}`);
      assert.equal(await dependencyUp('redis'), 1, 'the gauge says Redis is back');
      const warnings = stderr.filter((line) => line.includes('redis is down'));
      assert.equal(warnings.length, 1, 'one warning for the outage, not one per request');
      assert.ok(stderr.some((line) => line.includes('redis is back')), 'and one line when it is back');
    } finally {
      controller.abort();
      await reading;
    }
  });

  it('PostgreSQL stopped ~10 s: 503 store_unavailable with Retry-After, never a 500 nor a hang; /readyz honest; back by itself', async () => {
    const readiness: { at: number; status: number; detail: string }[] = [];
    let polling = true;
    const poll = (async () => {
      while (polling) {
        readiness.push({ at: Date.now(), ...(await readyz()) });
        await sleep(250);
      }
    })();
    startLoad();
    await sleep(1500);
    const customerToken = await tokenOf('customers', customerKey);
    const stoppedAt = Date.now();
    postgres.stop('immediate');
    await sleep(1000);
    // Authenticate and reads are refused the same way as intake.
    for (const [what, request] of [
      ['authenticate', () => fetch(`${url}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'x-api-key': customerKey } })],
      ['a read', () => fetch(`${url}/api/v1/trailers/${fleetId}`, { headers: { authorization: `Bearer ${customerToken}` } })],
    ] as const) {
      const response = await request();
      assert.equal(response.status, 503, `${what} while the database is down`);
      assert.match(response.headers.get('retry-after') ?? '', /^\d+$/);
      assert.equal(response.headers.get('content-type'), 'application/problem+json');
    }
    await sleep(9000);
    const startedAt = Date.now();
    await postgres.restart();
    const restartedAt = Date.now();
    await sleep(5000);
    await stopLoad();
    await sleep(500);
    polling = false;
    await poll;
    const down = between(stoppedAt + 500, startedAt);
    const afterRestart = between(restartedAt, restartedAt + 5000);
    console.log(
      `postgres: stopped ${startedAt - stoppedAt} ms (start took ${restartedAt - startedAt} ms): ${summary(down)}; 5 s after restart: ${summary(afterRestart)}; slowest answer ${Math.max(...answers.map((answer) => answer.answeredAt - answer.sentAt))} ms`,
    );
    assert.ok(down.length > 20, `steady load while PostgreSQL is down (${down.length} requests)`);
    assert.ok(down.some((answer) => answer.status === 503), 'intake is refused while the database is down');
    for (const answer of down.filter((candidate) => candidate.status !== 202)) {
      assert.equal(answer.status, 503, `a refusal is a 503: ${summary(down)}`);
      assert.equal(answer.code, 'store-unavailable', 'the problem type is store_unavailable');
      assert.match(answer.retryAfter ?? '', /^\d+$/, 'with Retry-After');
    }
    assert.ok(share202(afterRestart) >= 0.9, `≥ 90 % 202 in the 5 s after the restart: ${summary(afterRestart)}`);
    const outage = readiness.filter((entry) => entry.at > stoppedAt + 1000 && entry.at < startedAt);
    assert.ok(outage.length > 0 && outage.every((entry) => entry.status === 503 && entry.detail.includes('store')), `/readyz 503 naming the store during the outage: ${JSON.stringify(outage.slice(0, 3))}`);
    assert.deepEqual(await readyz(), { status: 200, detail: 'ready' }, '/readyz 200 after');
  });

  it('never answered 500 nor left a request hanging, and processed every payload it answered 202', { timeout: 60_000 }, async () => {
    assert.deepEqual(answers.filter((answer) => answer.status === 500 || answer.status === 0), [], 'no 500, no hang');
    for (const answer of answers.filter((candidate) => candidate.status === 503)) assert.match(answer.retryAfter ?? '', /^\d+$/);
    const accepted = answers.filter((answer) => answer.status === 202).map((answer) => answer.id!);
    assert.ok(accepted.length > 200);
    const backend = await openStoreBackend({ databaseUrl: postgres.url, databaseSchema: SCHEMA });
    try {
      const deadline = Date.now() + 40_000;
      let pending = accepted;
      while (pending.length > 0 && Date.now() < deadline) {
        const records = await Promise.all(pending.map(async (id) => ({ id, record: await backend.intake.queue.get(id) })));
        assert.deepEqual(records.filter(({ record }) => record === null).map(({ id }) => id), [], 'every payload answered 202 is in the log');
        assert.deepEqual(records.filter(({ record }) => record!.status === 'failed').map(({ id }) => id), [], 'none failed');
        pending = records.filter(({ record }) => record!.status !== 'processed').map(({ id }) => id);
        if (pending.length > 0) await sleep(250);
      }
      console.log(`processed: ${accepted.length - pending.length} of ${accepted.length} payloads answered 202`);
      assert.deepEqual(pending, [], 'every payload answered 202 was processed');
    } finally {
      await backend.store.close().catch(() => {});
      await backend.intake.stop().catch(() => {});
    }
  });

  it('serve started while PostgreSQL is down says so, waits, and serves once it is up', { timeout: 90_000 }, async () => {
    await killed(child);
    postgres.stop('fast');
    const lines: string[] = [];
    const starting = serve(['--database-url', postgres.url, '--redis-url', redis.url, '--startup-timeout', '60'], lines);
    // Node's start and the server's imports come first: seconds on a busy machine.
    const deadline = Date.now() + 30_000;
    while (!lines.some((line) => line.includes('cannot be reached')) && Date.now() < deadline) await sleep(50);
    assert.ok(lines.some((line) => line.includes('PostgreSQL at') && line.includes('cannot be reached')), `a clear message while waiting: ${lines.join('\n')}`);
    await postgres.restart();
    const late = await starting;
    try {
      assert.equal((await fetch(`${late.url}/readyz`)).status, 200);
    } finally {
      await killed(late.child);
    }
  });

  it('serve gives up on an unreachable dependency after --startup-timeout: exit 1, the reason, no stack trace', { timeout: 30_000 }, async () => {
    await redis.kill();
    const result = await runTrailwire(['serve', '--port', '0', '--grpc-port', '0', '--database-url', postgres.url, '--database-schema', SCHEMA, '--redis-url', redis.url, '--startup-timeout', '2']);
    const ended = Date.now();
    assert.equal(result.code, 1, result.stderr);
    // Timed from the first "cannot be reached" line: Node's own start is slow on a busy machine.
    const waiting = result.stderr.split('\n').find((line) => line.includes('cannot be reached'));
    assert.ok(waiting, `a clear message while waiting: ${result.stderr}`);
    const waited = ended - (JSON.parse(waiting) as { time: number }).time;
    assert.ok(waited < 10_000, `gave up about 2 s after the first try (${waited} ms)`);
    assert.match(result.stderr, /^trailwire: Redis at redis:\/\/127\.0\.0\.1:\d+\/? could not be reached within 2 s \(--startup-timeout\): .*ECONNREFUSED/m);
    assert.doesNotMatch(result.stderr, /^\s+at /m, 'no stack trace');
  });
});
