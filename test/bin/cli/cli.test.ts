/**
 * The `trailwire` command line (contract 9), run as a user runs it: `node bin/trailwire.js ...` in a
 * child process over a temporary store. Provisioning answers one JSON document with `--json` (also
 * for failures, with exit status 1), the keys it prints authenticate, and `serve --demo` serves the
 * demo with working keys. Each spawn costs about half a second, so the cases are few and chained.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { openSqliteStore } from '../../../adapters/sqlite/index.ts';
import { createTrailwire } from '../../../core/trailwire.ts';
import { withCheckDigit } from '../../../core/vin.ts';
import { type CliResult, runTrailwire, TRAILWIRE_BIN, TS_LOADER } from '../../support/cli.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = TRAILWIRE_BIN;


/** Runs `trailwire <args>` to completion (`node <nodeArgs> dist/bin/trailwire.js <args>`). */
const runCli = (args: string[], nodeArgs: readonly string[] = []): Promise<CliResult> => runTrailwire(args, {}, nodeArgs);

/** The one JSON document a `--json` command printed: stdout is exactly one line of JSON. */
function jsonDocument(result: CliResult): any {
  const lines = result.stdout.split('\n');
  assert.equal(lines.at(-1), '', 'stdout ends with a newline');
  assert.equal(lines.length, 2, `exactly one line on stdout, got: ${JSON.stringify(result.stdout)} (stderr: ${result.stderr})`);
  return JSON.parse(lines[0]!);
}

describe('trailwire CLI', () => {
  let dir: string;
  let db: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'trailwire-cli-'));
    db = join(dir, 'cli.db');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('customers, fleets and trailers create answer one JSON document each, and the key works', async () => {
    const customer = await runCli(['customers', 'create', '--name', 'Acme Freight', '--db', db, '--json']);
    assert.equal(customer.code, 0, customer.stderr);
    const { id: customerId, apiKey } = jsonDocument(customer);
    assert.deepEqual(Object.keys(jsonDocument(customer)).sort(), ['apiKey', 'id']);
    assert.equal(typeof customerId, 'string');
    assert.match(apiKey, /^twc_[A-Za-z0-9_-]{43}$/);

    const fleet = await runCli(['fleets', 'create', '--customer', customerId, '--name', 'Reefers', '--db', db, '--json']);
    assert.equal(fleet.code, 0, fleet.stderr);
    const { id: fleetId } = jsonDocument(fleet);
    assert.ok(Number.isInteger(fleetId) && fleetId > 0, `fleet id ${fleetId} is a positive integer`);

    const vin = withCheckDigit('1TWCL1000CL000001');
    const trailer = await runCli(['trailers', 'create', '--fleet', String(fleetId), '--vin', vin.toLowerCase(), '--unit-id', 'R-7', '--db', db, '--json']);
    assert.equal(trailer.code, 0, trailer.stderr);
    const { id: trailerId } = jsonDocument(trailer);
    assert.equal(typeof trailerId, 'string');
    assert.doesNotMatch(trailerId, /^\d+$/);

    const badVin = await runCli(['trailers', 'create', '--fleet', String(fleetId), '--vin', 'NOT-A-VIN', '--db', db, '--json']);
    assert.equal(badVin.code, 1);
    const failure = jsonDocument(badVin);
    assert.equal(failure.error.code, 'validation_failed');
    assert.match(failure.error.message, /VIN|vin/);
    assert.equal(failure.id, undefined);

    // What the CLI wrote is what the service serves: the key authenticates, the trailer is the customer's.
    const trailwire = await createTrailwire({ store: await openSqliteStore({ file: db }) });
    try {
      const { token } = await trailwire.auth.authenticate('customers', apiKey, '127.0.0.1');
      const claims = await trailwire.tokens.verify(token.accessToken);
      assert.equal(claims.sub, customerId);
      const stored = await trailwire.store.getTrailer(customerId, trailerId);
      assert.equal(stored?.fleetId, fleetId);
      assert.equal(stored?.vin, vin, 'the VIN is stored upper-cased');
      assert.equal(stored?.unitId, 'R-7');
    } finally {
      await trailwire.close();
    }
  });

  it('partners create issues a key for a known product and rejects an unknown one with a JSON error', async () => {
    const [partner, unknown] = await Promise.all([
      runCli(['partners', 'create', '--name', 'GPS Co', '--product', 'gps-basic', '--db', db, '--json']),
      runCli(['partners', 'create', '--name', 'Typo Co', '--product', 'gps-basik', '--db', db, '--json']),
    ]);
    assert.equal(partner.code, 0, partner.stderr);
    const created = jsonDocument(partner);
    assert.deepEqual(Object.keys(created).sort(), ['apiKey', 'id']);
    assert.match(created.apiKey, /^twp_[A-Za-z0-9_-]{43}$/);

    assert.equal(unknown.code, 1);
    const failure = jsonDocument(unknown);
    assert.equal(failure.error.code, 'validation_failed');
    assert.match(failure.error.message, /gps-basik/);
    assert.match(failure.error.message, /choose one of cargosafe, gps-basic, tpms/, 'the message names the installed products');

    const trailwire = await createTrailwire({ store: await openSqliteStore({ file: db }) });
    try {
      const { token } = await trailwire.auth.authenticate('partners', created.apiKey, '127.0.0.1');
      assert.equal((await trailwire.tokens.verify(token.accessToken)).scope, 'product:gps-basic');
    } finally {
      await trailwire.close();
    }
  });

  it('partners create takes a product of a --product-module', async () => {
    // A product module in TypeScript loads under a loader (the product guide's development path).
    const result = await runCli(['partners', 'create', '--name', 'Cold Co', '--product', 'reefer', '--product-module', './examples/custom-product/index.ts', '--db', db, '--json'], TS_LOADER);
    assert.equal(result.code, 0, result.stderr);
    assert.match(jsonDocument(result).apiKey, /^twp_/);
  });

  it('serve --demo --json prints one document with working demo keys and stops on SIGTERM', { timeout: 30_000 }, async () => {
    const child = spawn(process.execPath, [BIN, 'serve', '--demo', '--port', '0', '--grpc-port', '0', '--host', '127.0.0.1', '--json', '--log-level', 'silent', '--db', join(dir, 'demo.db')], {
      cwd: ROOT,
    });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        let buffered = '';
        child.stdout.on('data', (chunk) => {
          buffered += chunk;
          const end = buffered.indexOf('\n');
          if (end >= 0) resolve(buffered.slice(0, end));
        });
        child.on('error', reject);
        child.on('exit', (code) => reject(new Error(`serve exited with ${code} before printing`)));
      });
      const started = JSON.parse(line);
      assert.equal(started.demo.created, true);
      const customer = started.demo.principals.find((p: { audience: string; name: string }) => p.name === 'Demo Logistics');
      const partners = started.demo.principals.filter((p: { audience: string }) => p.audience === 'partners');
      assert.deepEqual(partners.map((p: { product: string }) => p.product).sort(), ['cargosafe', 'gps-basic', 'tpms']);

      const auth = await fetch(`${started.url}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'x-api-key': customer.apiKey } });
      assert.equal(auth.status, 200);
      const { access_token: token } = (await auth.json()) as { access_token: string };
      const fleets = await fetch(`${started.url}/api/v1/fleets`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(fleets.status, 200);
      assert.equal(((await fleets.json()) as { data: unknown[] }).data.length, 2);
      for (const partner of partners) {
        const response = await fetch(`${started.url}/api/v1/partners/authenticate`, { method: 'POST', headers: { 'x-api-key': partner.apiKey } });
        assert.equal(response.status, 200, partner.product);
      }

      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      child.kill('SIGTERM');
      assert.equal(await exited, 0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
