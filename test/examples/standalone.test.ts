/**
 * examples/standalone runs as its README says: it prints its URLs, answers /healthz and /readyz,
 * takes a key issued by the `trailwire` command on the same file while it runs, serves the LiveFeed on
 * the printed gRPC address, and exits 0 on SIGTERM.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { it } from 'node:test';
import { call, firstHeartbeat, REPO_ROOT, startExample } from './run-example.ts';
import { TRAILWIRE_BIN } from '../support/cli.ts';

it('examples/standalone starts, prints its URLs, answers as its README says and stops on SIGTERM', { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'trailwire-standalone-'));
  const db = join(dir, 'standalone.db');
  const example = await startExample('standalone', { TRAILWIRE_DB: db, TRAILWIRE_LOG_LEVEL: 'warn' }, /^\s+docs\s/);
  try {
    assert.equal(example.lines[0], 'Trailwire is running');
    const http = /^\s+http\s+(http:\/\/127\.0\.0\.1:\d+)$/.exec(example.lines[1] ?? '')?.[1];
    const grpc = /^\s+grpc\s+(127\.0\.0\.1:\d+)$/.exec(example.lines[2] ?? '')?.[1];
    assert.ok(http && grpc, example.lines.join('\n'));
    assert.equal(example.lines[3], `  docs  ${http}/openapi.json`);

    assert.deepEqual((await call(`${http}/healthz`)).body, { status: 'ok' });
    assert.deepEqual((await call(`${http}/readyz`)).body, { status: 'ready', checks: ['intake-log', 'intake-processing', 'intake-thread', 'queue', 'store'] });
    assert.equal((await call(`${http}/openapi.json`)).body.openapi, '3.1.0');

    // `npx trailwire customers create --db <file> --json` while the example runs on the file.
    const cli = await promisify(execFile)(process.execPath, [TRAILWIRE_BIN, 'customers', 'create', '--db', db, '--name', 'Acme Freight', '--json'], { cwd: REPO_ROOT });
    const { apiKey } = JSON.parse(cli.stdout) as { apiKey: string };
    assert.match(apiKey, /^twc_/);
    const authenticated = await call(`${http}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'x-api-key': apiKey } });
    assert.equal(authenticated.status, 200);
    const token = authenticated.body.access_token as string;
    assert.deepEqual((await call(`${http}/api/v1/fleets`, { headers: { authorization: `Bearer ${token}` } })).body, { data: [] });

    // The LiveFeed answers on the printed address: a heartbeat at once.
    await firstHeartbeat(grpc, token);

    assert.equal(await example.stop('SIGTERM'), 0, example.stderr());
  } finally {
    await example.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});
