/**
 * `trailwire simulate` as a user runs it, in a child process: the embedded burst run the issue asks
 * for, and a remote run against a server whose limit is bigger than the one the simulator is told,
 * which must exit 1 naming the breach.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { startServer, type RunningServer } from '../../adapters/server/index.ts';
import { withCheckDigit } from '../../core/vin.ts';
import { runTrailwire, TRAILWIRE_BIN } from '../support/cli.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = TRAILWIRE_BIN;

const runCli = (args: string[]) => runTrailwire(args);

/** The one JSON document on stdout. */
function report(stdout: string): any {
  const lines = stdout.split('\n');
  assert.equal(lines.length, 2, `one line of JSON on stdout, got ${JSON.stringify(stdout.slice(0, 500))}`);
  return JSON.parse(lines[0]!);
}

describe('trailwire simulate', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'trailwire-simulate-cli-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('runs the burst scenario embedded: exactly the limit accepted, the rest 429, live updates, no violations, an HTML report', async () => {
    const html = join(dir, 'report.html');
    const result = await runCli(['simulate', '--duration', '5', '--scenario', 'burst', '--seed', '7', '--json', '--report', html]);
    const document = report(result.stdout);
    assert.deepEqual(document.violations, [], result.stderr);
    assert.equal(result.code, 0);
    assert.ok(document.accepted > 0 && document.limited > 0, `accepted ${document.accepted}, limited ${document.limited}`);
    assert.equal(document.errors, 0);
    assert.ok(document.live.updates > 0 && document.live.heartbeats > 0);
    assert.equal(document.processing.processed, document.accepted);
    const page = readFileSync(html, 'utf8');
    assert.match(page, /^<!doctype html>/);
    assert.match(page, /<svg[^>]*aria-label="Throughput and status codes per second"/);
    assert.doesNotMatch(page, /<script|<link|src="http/);
  });

  it("lists none of the store options it does not use (issue 31, finding 6), and refuses them; serve still takes them", async () => {
    const help = await runCli(['simulate', '--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /--duration/);
    for (const option of ['--db', '--database-url', '--database-schema', '--redis-url', '--product-module'])
      assert.ok(!help.stdout.includes(option), `simulate --help lists ${option}`);
    const refused = await runCli(['simulate', '--db', join(dir, 'x.db')]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /Unknown option: --db/);
    const serveHelp = await runCli(['serve', '--help']);
    for (const option of ['--db', '--database-url', '--database-schema', '--redis-url', '--product-module']) assert.ok(serveHelp.stdout.includes(option), `serve --help lacks ${option}`);
  });

  describe('remote', () => {
    let server: RunningServer;
    const keys = { partner: '', customer: '' };
    before(async () => {
      server = await startServer({ db: join(dir, 'remote.db'), port: 0, grpcPort: 0, host: '127.0.0.1', logger: pino({ level: 'silent' }) });
      const { auth, admin } = server.trailwire;
      keys.partner = (await auth.createPartner({ name: 'P', product: 'gps-basic' })).apiKey;
      const customer = await auth.createCustomer({ name: 'C' });
      keys.customer = customer.apiKey;
      const fleet = await admin.createFleet({ customerId: customer.principal.id, name: 'F' });
      for (let i = 0; i < 3; i++) await admin.registerTrailer({ fleetId: fleet.id, vin: withCheckDigit(`1SMREM0X00000000${i}`) });
    });
    after(() => server.close());

    it('exits 1 and names the breach when the deployment accepts more than the limit it is said to have', async () => {
      const result = await runCli([
        'simulate', '--target', server.url, '--grpc', `127.0.0.1:${server.grpcPort}`, '--partner-key', `gps-basic=${keys.partner}`,
        '--customer-key', keys.customer, '--limit', 'gps-basic=2/1', '--scenario', 'burst', '--duration', '2.5', '--vins', '3', '--rate', '10',
        '--subscribers', '1', '--json',
      ]);
      const document = report(result.stdout);
      assert.equal(result.code, 1);
      assert.equal(document.mode, 'remote');
      assert.match(document.violations.join('\n'), /over its limit of 2/);
      // The customer's own trailers were driven, so its subscriber saw their updates.
      assert.ok(document.live.updates > 0);
    });

    it("drives the customer's own trailers only: --vins beyond them and the clock leave no trailer behind (issue 31, finding 2)", async () => {
      const before = await server.trailwire.store.listAllTrailers({ limit: 500, scope: { kind: 'all' } });
      const result = await runCli([
        'simulate', '--target', server.url, '--grpc', `127.0.0.1:${server.grpcPort}`, '--partner-key', `gps-basic=${keys.partner}`,
        '--customer-key', keys.customer, '--scenario', 'burst', '--duration', '1.5', '--vins', '20', '--rate', '6', '--subscribers', '1', '--json',
      ]);
      const document = report(result.stdout);
      assert.equal(document.vins, 3, `the 3 trailers of the customer, not the 20 asked for: ${result.stdout}`);
      const unassigned = await server.trailwire.store.listAllTrailers({ limit: 500, scope: { kind: 'unassigned' } });
      assert.deepEqual(unassigned, [], 'no VIN nobody registered, no clock probe');
      assert.equal((await server.trailwire.store.listAllTrailers({ limit: 500, scope: { kind: 'all' } })).length, before.length);
    });
  });
});
