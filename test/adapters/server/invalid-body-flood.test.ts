/**
 * Issue 29, finding 2: while one partner sends invalid bodies of ~250 KB (24,000 unknown keys each)
 * on 32 connections, every other tenant is still answered. Three processes: the server (`trailwire
 * serve` with its defaults but a budget sized for the test, so the flood spends it and both regimes
 * run), the flooder (`bench/lib/body-flood.ts`), and this test probing `/healthz` every 10 ms, so
 * neither the load generator nor the probe shares an event loop.
 *
 * What holds it: a large body is scanned as it arrives against the shape its product allows and
 * refused at its fifth key, before it is parsed or read to its end (`core/json-shape.ts`), and a
 * request over the partner's budget is refused before its body is read, its connection closed
 * rather than the body read off it, and every such refusal is held a second before it is answered.
 * This test asserts what holds on any machine, without timing: the answers, the budget, and that
 * `/healthz` answered 200 throughout. How fast it stays (the target: `/healthz` p99 under
 * 50 ms during the flood) needs a quiet machine and a baseline run beside it: `npm run bench --
 * flood` measures it. That refusals come before the body is read, and are held, is asserted without
 * timing in `test/adapters/koa/partner-intake.test.ts`.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { floodFromAnotherProcess, hostileBody } from '../../../bench/lib/body-flood.ts';
import { probeHealthzUntil } from '../../../bench/lib/healthz-probe.ts';
import { runTrailwire, startServe } from '../../support/cli.ts';

const CONNECTIONS = Number(process.env.TRAILWIRE_FLOOD_CONNECTIONS ?? 32);
const FLOOD_MS = Number(process.env.TRAILWIRE_FLOOD_MS ?? 4_000);
/** The partner's budget on the test's server: small, so that the flood spends it and both regimes run (parsing, then refusing unread). */
const BUDGET_REQUESTS = Number(process.env.TRAILWIRE_FLOOD_BUDGET_REQUESTS ?? 32);
const BUDGET = `${BUDGET_REQUESTS}/60`;

describe('an invalid-body flood from one partner', () => {
  const directory = mkdtempSync(join(tmpdir(), 'trailwire-flood-'));
  const db = join(directory, 'trailwire.db');
  let child: ChildProcess;
  let url: URL;
  let token: string;

  before(async () => {
    const created = await runTrailwire(['partners', 'create', '--name', 'Flooder', '--product', 'gps-basic', '--db', db, '--json']);
    assert.equal(created.code, 0, created.stderr);
    const { apiKey } = JSON.parse(created.stdout);
    const started = await startServe(['--port', '0', '--grpc-port', '0', '--host', '127.0.0.1', '--json', '--log-level', 'silent', '--db', db, '--partner-intake-limit', BUDGET], process.env, (spawned) => (child = spawned));
    url = new URL(started.document.url);
    const response = await fetch(new URL('/api/v1/partners/authenticate', url), { method: 'POST', headers: { 'x-api-key': apiKey } });
    token = ((await response.json()) as { access_token: string }).access_token;
  });

  after(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child.on('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(directory, { recursive: true, force: true });
  });

  it(`answers every one of ${CONNECTIONS} connections' 250 KB invalid bodies 400 or 429, reads no more than the budget's, and /healthz answers 200 throughout`, async () => {
    const body = hostileBody();
    assert.ok(body.length > 240_000 && body.length < 262_144, `${body.length} bytes`);
    const floodStarted = Date.now();
    const flood = floodFromAnotherProcess(url, token, FLOOD_MS, CONNECTIONS);
    await flood.started;
    // Throws at the first answer other than 200. The flood's last ~200 ms are left out: its connections end one by one.
    const probes = await probeHealthzUntil(url, performance.now() + FLOOD_MS - 200);
    const { statuses, failed } = await flood.result;
    // The budget is a fixed window of 60 s on the clock: a flood that crosses a window's end gets the next window's budget too.
    const windows = Math.floor(Date.now() / 60_000) - Math.floor(floodStarted / 60_000) + 1;
    console.log(`# invalid-body flood (${BUDGET} budget, ${FLOOD_MS} ms): ${JSON.stringify({ probes: probes.length, statuses, failed })}`);
    assert.ok(probes.length > 0, '/healthz was answered during the flood');
    assert.ok((statuses[400] ?? 0) > 0, 'some bodies were refused as invalid');
    assert.ok((statuses[400] ?? 0) <= BUDGET_REQUESTS * windows, `no more bodies were read than the budget allows in ${windows} window(s) (${statuses[400]} refused as invalid)`);
    assert.ok((statuses[429] ?? 0) > 0, 'the budget refused the rest');
    assert.deepEqual(Object.keys(statuses).sort(), ['400', '429'], 'nothing else was answered');
    assert.equal(failed, 0, 'every refusal reached the flooder as an answer, though its body was not read');
  });
});
