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
import { builtInProducts } from '../../products/index.ts';
import { milesBetween, type Place } from '../../simulator/demo-geography.ts';
import { RouteCursor } from '../../simulator/demo-roads.ts';
import { seedDemo, type DemoSeed } from '../../simulator/demo-seed.ts';
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

// The embedded run, the refusals and the two remote groups share no server, key or file, so they run
// side by side: most of this file's time is the runs' fixed durations, which overlap instead of adding up.
describe('trailwire simulate', { concurrency: true }, () => {
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

  it('refuses a malformed --threshold or --stages before it starts, naming it', async () => {
    const threshold = await runCli(['simulate', '--threshold', 'p99<fast']);
    assert.equal(threshold.code, 1);
    assert.match(threshold.stderr, /--threshold "p99<fast": expected METRIC OP VALUE/);
    const stages = await runCli(['simulate', '--stages', '30s:50,1x:2']);
    assert.equal(stages.code, 1);
    assert.match(stages.stderr, /--stages: cannot read the stage "1x:2"/);
  });

  // One server, one customer key and its trailer count for all four: one case at a time.
  describe('remote', { concurrency: false }, () => {
    let server: RunningServer;
    const keys = { partner: '', customer: '', all: '' };
    before(async () => {
      // Every run authenticates the same keys (the shards case alone makes three runs), more often than
      // the default 10 per 5 minutes: past that, a run waits out Retry-After (up to 300 s) and still passes,
      // so the file's time depended on where the window fell. None of these cases is about that limit.
      const authenticate = { requests: 1_000, windowSeconds: 300 };
      server = await startServer({ db: join(dir, 'remote.db'), port: 0, grpcPort: 0, host: '127.0.0.1', logger: pino({ level: 'silent' }), core: { limits: { authenticate } } });
      const { auth, admin } = server.trailwire;
      keys.partner = (await auth.createPartner({ name: 'P', product: 'gps-basic' })).apiKey;
      const others = await Promise.all(['tpms', 'cargosafe'].map(async (product) => `${product}=${(await auth.createPartner({ name: `P ${product}`, product })).apiKey}`));
      keys.all = [`gps-basic=${keys.partner}`, ...others].join(',');
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

    it('two shards against one server, merged, judge the whole run and count what one run counts', async () => {
      // Each shard is due 12 requests (4/s for 3 s): one sent late by a loaded machine is 8 % of its
      // rate, so the default rate>=95% judged the machine, not the sharding (1 full suite in ~10).
      const common = ['--target', server.url, '--grpc', `127.0.0.1:${server.grpcPort}`, '--scenario', 'steady', '--duration', '3', '--rate', '8', '--subscribers', '1', '--seed', '5', '--threshold', 'rate>=80%', '--json'];
      const env = { TRAILWIRE_PARTNER_KEY: keys.all, TRAILWIRE_CUSTOMER_KEY: keys.customer };
      const single = report((await runTrailwire(['simulate', ...common], env)).stdout);
      const records = [join(dir, 'shard-1.json'), join(dir, 'shard-2.json')];
      const shards = await Promise.all(records.map((file, i) => runTrailwire(['simulate', ...common, '--shard', `${i + 1}/2`, '--record', file], env)));
      for (const shard of shards) assert.equal(shard.code, 0, shard.stdout + shard.stderr);
      assert.deepEqual(shards.map((shard) => report(shard.stdout).vins), [2, 1], 'VINs 1 and 3 to the first shard, 2 to the second');
      const merged = await runTrailwire(['simulate', 'merge', ...records, '--json', '--junit', join(dir, 'merged.xml')]);
      assert.equal(merged.code, 0, merged.stdout + merged.stderr);
      const whole = report(merged.stdout);
      assert.deepEqual(whole.violations, []);
      assert.equal(whole.vins, 3);
      assert.equal(whole.live.subscribers, 2);
      // Each subscriber is held to every shard's updates of its customer's trailers.
      const deliveries = Number(/^(\d+) expected deliveries/.exec(whole.checks.find((check: { name: string }) => check.name.startsWith('every update'))!.judged)![1]);
      assert.ok(deliveries > whole.processing.processed, `${deliveries} deliveries judged for ${whole.processing.processed} updates`);
      assert.ok(Math.abs(whole.sent - single.sent) <= 2, `merged ${whole.sent}, one run ${single.sent}`);
      assert.equal(whole.processing.processed, whole.accepted);
      const refused = await runTrailwire(['simulate', 'merge', records[0]!, records[0]!]);
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /shard 1\/2 is given twice/);
    });

    it('says how to allow the run\'s webhook receiver when the deployment refuses its URL, and registers nothing', async () => {
      const result = await runCli([
        'simulate', '--target', server.url, '--grpc', `127.0.0.1:${server.grpcPort}`, '--partner-key', `gps-basic=${keys.partner}`,
        '--customer-key', keys.customer, '--scenario', 'burst', '--duration', '1', '--vins', '3', '--rate', '6', '--subscribers', '0', '--webhooks', '1', '--json',
      ]);
      assert.equal(result.code, 1);
      const { error } = report(result.stdout);
      assert.equal(error.code, 'validation_failed');
      assert.match(error.message, /^The server refused the webhook URL http:\/\/127\.0\.0\.1:\d+\/simulator-\w+\/1: \/url must be an https URL \(the operator has not allowed http\)/);
      assert.match(error.message, /`trailwire serve --webhook-allow-http --webhook-allow-private`/);
      const [customer] = await server.trailwire.store.listCustomers({ limit: 10 });
      assert.deepEqual(await server.trailwire.store.webhooks.listWebhookEndpoints(customer!.id, { limit: 10 }), []);
      const listenAlone = await runCli(['simulate', '--webhook-listen', '127.0.0.1:0']);
      assert.equal(listenAlone.code, 1);
      assert.match(listenAlone.stderr, /--webhook-listen and --webhook-url set up the receiver of --webhooks N: give --webhooks too/);
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
  describe("remote, against the demo, as the serve banner's command runs it (issue 31, finding 2)", () => {
    let server: RunningServer;
    let demo: DemoSeed;
    before(async () => {
      server = await startServer({ db: join(dir, 'demo.db'), port: 0, grpcPort: 0, host: '127.0.0.1', logger: pino({ level: 'silent' }) });
      demo = await seedDemo(server.trailwire, { products: builtInProducts.map((product) => product.name), seed: 31 });
    });
    after(() => server.close());

    /** The demo customer's trailers as its read API shows them, with their device and unit counts. */
    async function snapshot() {
      const key = demo.principals.find((p) => p.name === 'Demo Logistics')!.apiKey;
      const auth = await fetch(`${server.url}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'x-api-key': key } });
      const headers = { authorization: `Bearer ${((await auth.json()) as { access_token: string }).access_token}` };
      const get = async (path: string) => ((await (await fetch(`${server.url}${path}`, { headers })).json()) as { data: any[] }).data;
      const trailers = [...(await get('/api/v1/trailers/1?take=100')), ...(await get('/api/v1/trailers/2?take=100'))];
      const devices = new Map<string, number>();
      for (const trailer of trailers) devices.set(trailer.id, (await get(`/api/v1/devices/${trailer.id}?take=100`)).length);
      return { trailers, devices, units: (await get('/api/v1/cargosafe?take=100')).length, get };
    }
    const offRoadMiles = (place: Place) => milesBetween(place, RouteCursor.nearest(place, 0, Infinity)!.position());

    it('continues each trailer from where it is along the demo roads, keeps every status, adds nothing, and talks from the first second', async () => {
      const before = await snapshot();
      const everyTrailer = (await server.trailwire.store.listAllTrailers({ limit: 500, scope: { kind: 'all' } })).length;
      const partnerKeys = demo.principals.filter((p) => p.audience === 'partners').map((p) => `${p.product}=${p.apiKey}`).join(',');
      const env = { ...process.env, NO_COLOR: '1', TRAILWIRE_PARTNER_KEY: partnerKeys, TRAILWIRE_CUSTOMER_KEY: demo.principals.find((p) => p.name === 'Demo Logistics')!.apiKey };
      // The banner's command, shortened.
      const child = spawn(process.execPath, [BIN, 'simulate', '--target', server.url, '--grpc', `127.0.0.1:${server.grpcPort}`, '--duration', '6', '--rate', '5'], { cwd: ROOT, env });
      let stdout = '';
      let stderr = '';
      let firstWordsAt: number | undefined;
      child.stdout.on('data', (chunk) => (stdout += chunk));
      child.stderr.on('data', (chunk) => {
        firstWordsAt ??= Date.now();
        stderr += chunk;
      });
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      assert.equal(code, 0, stdout + stderr);
      assert.match(stdout, /No violations\./);
      // What it is doing, said before it does it: every step before the first payload is sent.
      const steps = stderr.split('\n').filter(Boolean);
      assert.match(steps[0]!, /^Trailwire simulation: steady \(remote, http:\/\/127\.0\.0\.1:\d+, seed 1, 6 s\)$/);
      const order = [/reading the fleets and trailers/, /reading the sensors of the 12 trailers/, /reading the server's clock/, /authenticating/, /opening 4 LiveFeed subscribers/, /sending \d+ payloads for 12 trailers/];
      assert.deepEqual(steps.slice(1, 1 + order.length).map((line, i) => order[i]!.test(line)), order.map(() => true), stderr);

      const after = await snapshot();
      assert.equal((await server.trailwire.store.listAllTrailers({ limit: 500, scope: { kind: 'all' } })).length, everyTrailer, 'no trailer created');
      assert.deepEqual(await server.trailwire.store.listAllTrailers({ limit: 500, scope: { kind: 'unassigned' } }), [], 'no VIN nobody registered, no clock probe');
      assert.equal(after.units, before.units, 'no cargosafe unit added');
      let moved = 0;
      let earliestFix = Infinity;
      for (const trailer of after.trailers) {
        const was = before.trailers.find((candidate) => candidate.id === trailer.id)!;
        assert.equal(trailer.status.name, was.status.name, `${trailer.unitId}: its status is its own`);
        assert.equal(after.devices.get(trailer.id), before.devices.get(trailer.id), `${trailer.unitId}: no sensor added`);
        if (trailer.telemetry.timestamp === was.telemetry.timestamp) continue;
        moved++;
        assert.ok(milesBetween(trailer.telemetry, was.telemetry) < 1, `${trailer.unitId} jumped ${milesBetween(trailer.telemetry, was.telemetry)} miles`);
        // Its track since the demo's last fix keeps to the demo's roads.
        const track = await after.get(`/api/v1/trailers/telemetry/gps/${trailer.id}?take=500&from=${new Date(Date.parse(was.telemetry.timestamp) + 1).toISOString()}`);
        assert.ok(track.length > 0);
        for (const fix of track) {
          assert.ok(offRoadMiles(fix) < 0.05, `${trailer.unitId}: a fix ${offRoadMiles(fix)} miles off the demo roads`);
          earliestFix = Math.min(earliestFix, Date.parse(fix.timestamp));
        }
      }
      assert.ok(moved >= 6, `${moved} of 12 trailers got a fix`);
      assert.ok(firstWordsAt! < earliestFix, 'it spoke before its first payload was due');
    });
  });
});
