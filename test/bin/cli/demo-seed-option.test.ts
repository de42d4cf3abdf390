/**
 * `trailwire serve --demo-seed N` (env `TRAILWIRE_DEMO_SEED`), run as a user runs it: two fresh
 * stores seeded with the same N, one by the option and one by the variable, hold the same demo
 * trailers and report N as their seed; a seed that is not an integer from 0 to 4294967295 is refused
 * with a clear message before anything is served.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { REPO_ROOT, runTrailwire, TRAILWIRE_BIN } from '../../support/cli.ts';

interface Served {
  started: any;
  stop(): Promise<void>;
}

/** Starts `trailwire serve --demo --json` over a fresh store and waits for its one document. */
async function serveDemo(db: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Served> {
  const child = spawn(process.execPath, [TRAILWIRE_BIN, 'serve', '--demo', '--port', '0', '--grpc-port', '0', '--host', '127.0.0.1', '--json', '--log-level', 'silent', '--db', db, ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const stop = async () => {
    if (child.exitCode !== null) return;
    child.kill('SIGTERM');
    await exited;
  };
  try {
    const line = await new Promise<string>((resolve, reject) => {
      let buffered = '';
      child.stdout.on('data', (chunk) => {
        buffered += chunk;
        const end = buffered.indexOf('\n');
        if (end >= 0) resolve(buffered.slice(0, end));
      });
      child.on('error', reject);
      void exited.then((code) => reject(new Error(`serve exited with ${code} before printing`)));
    });
    return { started: JSON.parse(line), stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** The demo customer's trailers as the read API shows them: unit, VIN and status. */
async function demoTrailers({ started }: Served): Promise<string[]> {
  const customer = started.demo.principals.find((p: { name: string }) => p.name === 'Demo Logistics');
  const auth = await fetch(`${started.url}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'x-api-key': customer.apiKey } });
  const { access_token: token } = (await auth.json()) as { access_token: string };
  const get = async (path: string) => ((await (await fetch(`${started.url}${path}`, { headers: { authorization: `Bearer ${token}` } })).json()) as { data: any[] }).data;
  const trailers: string[] = [];
  for (const fleet of await get('/api/v1/fleets'))
    for (const trailer of await get(`/api/v1/trailers/${fleet.id}?take=100`)) trailers.push(`${fleet.name} ${trailer.unitId} ${trailer.vin} ${trailer.status.name}`);
  return trailers.sort();
}

describe('trailwire serve --demo-seed', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'trailwire-demo-seed-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('the same seed, by option or by variable, gives the same demo on two fresh stores', { timeout: 60_000 }, async () => {
    const byOption = await serveDemo(join(dir, 'option.db'), ['--demo-seed', '2026']);
    let trailers: string[];
    try {
      assert.equal(byOption.started.demo.seed, 2026);
      trailers = await demoTrailers(byOption);
      assert.equal(trailers.length, 12);
    } finally {
      await byOption.stop();
    }
    const byVariable = await serveDemo(join(dir, 'variable.db'), [], { TRAILWIRE_DEMO_SEED: '2026' });
    try {
      assert.equal(byVariable.started.demo.seed, 2026);
      assert.deepEqual(await demoTrailers(byVariable), trailers);
    } finally {
      await byVariable.stop();
    }
  });

  it('refuses a seed that is not an integer from 0 to 4294967295', { timeout: 30_000 }, async () => {
    for (const seed of ['4294967296', 'many']) {
      const result = await runTrailwire(['serve', '--demo', '--demo-seed', seed, '--port', '0', '--grpc-port', '0', '--json', '--db', join(dir, `refused-${seed}.db`)]);
      assert.equal(result.code, 1, `--demo-seed ${seed}: ${result.stdout}${result.stderr}`);
      const { error } = JSON.parse(result.stdout);
      assert.equal(error.code, 'validation_failed');
      assert.match(error.message, /demo seed must be an integer from 0 to 4294967295/);
    }
  });
});
