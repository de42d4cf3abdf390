/**
 * docs/writing-a-product.md works as written. The guide's `axle-load` module (§2) and its test (§5)
 * are taken verbatim from the guide's code blocks into a scratch folder inside the package (so that
 * `trailwire/...` resolves as it does for the guide's reader), the guide's test runs, and the product
 * is installed on a server both ways §6 says (the `trailwire` command with `--product-module`, and
 * `startServer` from code) and driven through the calls of §7 (and §4's refusal of a payload dated
 * ahead), checking what the guide shows them answering. Edit the guide and this test follows.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, describe, it } from 'node:test';
import { pino } from 'pino';
import type { Product } from 'trailwire/core';
import { startServer } from 'trailwire/server';
import { call, eventually } from './run-example.ts';
import { TRAILWIRE_BIN } from '../support/cli.ts';

const guide = readFileSync(new URL('../../docs/writing-a-product.md', import.meta.url), 'utf8');
const blocks = (language: string) => [...guide.matchAll(new RegExp('```' + language + '\\n([\\s\\S]*?)```', 'g'))].map((match) => match[1]!);
const only = (language: string, marker: string): string => {
  const found = blocks(language).filter((block) => block.includes(marker));
  assert.equal(found.length, 1, `exactly one ${language} block of the guide contains ${JSON.stringify(marker)}`);
  return found[0]!;
};

// The scratch folder is inside the package (self-reference needs that) and named so that no test
// runner or later glob picks its files up; it is removed when the suite ends.
const scratch = new URL(`./.guide-${process.pid}-${Date.now()}/`, import.meta.url);
mkdirSync(new URL('products/axle-load/', scratch), { recursive: true });
after(() => rmSync(scratch, { recursive: true, force: true }));
const modulePath = new URL('products/axle-load/index.ts', scratch);
writeFileSync(modulePath, only('ts', 'export default defineProduct<AxleLoadPayload>'));
// §5's test file, as the reader saves it next to the module (its imports are relative to it).
writeFileSync(new URL('products/axle-load/axle-load.guide-test.ts', scratch), only('ts', 'runProductConformance(axleLoad'));

const axleLoad = ((await import(modulePath.href)) as { default: Product }).default;
await import(new URL('products/axle-load/axle-load.guide-test.ts', scratch).href);

const vin = '1HGCM82633A004352';
const intake = only('sh', '/api/v1/telemetry/intake/1HGCM82633A004352');
const intakeBody = /-d '(\{.*\})'/.exec(intake)?.[1];
assert.ok(intakeBody, 'the guide sends a JSON body');

/** §7's calls against a server, as the partner and then as the customer, checked against what the guide shows. */
async function followSection7(url: string, keys: { partner: string; customer: string }, trailerId: string, limit: number): Promise<void> {
  const partnerToken = (await call(`${url}/api/v1/partners/authenticate`, { method: 'POST', headers: { 'x-api-key': keys.partner } })).body.access_token;
  const send = (json: unknown) => call(`${url}/api/v1/telemetry/intake/${vin}`, { method: 'POST', headers: { authorization: `Bearer ${partnerToken}` }, json });
  const accepted = await send(JSON.parse(intakeBody!));
  assert.equal(accepted.status, 202);
  assert.equal(accepted.body.status, 'queued');
  assert.equal(accepted.headers.get('location'), `/api/v1/telemetry/intake/status/${accepted.body.id}`);
  assert.match(intake, new RegExp(`RateLimit-Limit: 30 \\(60 with the override\\)`), 'the guide names both limits');
  assert.equal(accepted.headers.get('ratelimit-limit'), String(limit));
  const status = await eventually(async () => {
    const answer = (await call(url + accepted.headers.get('location'), { headers: { authorization: `Bearer ${partnerToken}` } })).body;
    assert.notEqual(answer.status, 'failed', answer.error);
    return answer.status === 'processed' ? answer : undefined;
  });
  assert.equal(status.product, 'axle-load');

  const refused = await send({ ...JSON.parse(intakeBody!), axles: [{ axle: 1, loadKg: 25000 }] });
  assert.equal(refused.status, 400);
  assert.deepEqual(refused.body.errors, [{ path: '/axles/0/loadKg', message: 'must be at most 20000' }]);
  // §4: dated too far ahead, refused at the time field the module declares, as the guide shows it.
  const ahead = await send({ ...JSON.parse(intakeBody!), measuredAt: '2099-01-01T00:00:00Z' });
  assert.equal(ahead.status, 400);
  const shown = JSON.parse(only('json', '"/measuredAt"'));
  const withoutClock = (error: { path: string; message: string }) => ({ ...error, message: error.message.replace(/\(.*\)/, '(<clock>)') });
  assert.deepEqual(ahead.body.errors.map(withoutClock), [withoutClock(shown)]);

  const token = (await call(`${url}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'x-api-key': keys.customer } })).body.access_token;
  const auth = { authorization: `Bearer ${token}` };
  const devices = (await call(`${url}/api/v1/devices/${trailerId}`, { headers: auth })).body.data;
  assert.equal(devices.length, 1);
  const [device] = devices;
  assert.deepEqual(
    { kind: device.kind, serial: device.serial, position: device.position, status: device.status, lastSeen: device.lastSeen },
    { kind: 'axle-load', serial: 'SC-1/1', position: 'axle-1', status: { name: 'Warning', isWarning: true, isFault: false }, lastSeen: '2026-01-01T12:00:00.000Z' },
  );
  // The guide's rule: inactive once the latest reading is more than 7 days in the past.
  assert.equal(device.active, Date.parse('2026-01-01T12:00:00Z') >= Date.now() - 7 * 86_400_000);
  const readings = (await call(`${url}/api/v1/devices/telemetry/${device.id}?from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z`, { headers: auth })).body.data;
  assert.deepEqual(readings.map((r: { timestamp: string; metrics: unknown }) => [r.timestamp, r.metrics]), [['2026-01-01T12:00:00.000Z', { loadKg: 9500 }]]);
  const read = (await call(`${url}/api/v1/trailers/${trailerId}`, { headers: auth })).body;
  assert.deepEqual(read.status, { name: 'Warning', isWarning: true, isFault: false });
  assert.equal(read.warningDevices, 1);
}

// ── The `trailwire` command, run from the reader's project folder (the scratch folder) ───────────
const bin = TRAILWIRE_BIN;
const cliEnv = { ...process.env, TRAILWIRE_LOG_LEVEL: 'error' };
/** The guide's development path: Node started with tsx, so that a `.ts` product module loads. */
const LOADER_PREFIX = "NODE_OPTIONS='--import tsx' ";
/** One `npx trailwire ...` line of the guide as arguments: words and double-quoted strings, without the comment. */
const argumentsOf = (line: string): string[] =>
  [...line.replace(/\s+#.*$/, '').replace(LOADER_PREFIX, '').replace(/^npx trailwire\s+/, '').matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2]!);
/** The environment a guide line runs in: with `NODE_OPTIONS` when the line sets it. */
const envOf = (line: string) => (line.startsWith(LOADER_PREFIX) ? { ...cliEnv, NODE_OPTIONS: '--import tsx' } : cliEnv);
const commandLines = (block: string) => block.split('\n').filter((line) => line.replace(LOADER_PREFIX, '').startsWith('npx trailwire '));
async function trailwireCommand(line: string, db: string): Promise<any> {
  const { stdout } = await promisify(execFile)(process.execPath, [bin, ...argumentsOf(line), '--db', db], { cwd: fileURLToPath(scratch), env: envOf(line) });
  return JSON.parse(stdout);
}

describe('docs/writing-a-product.md, end to end', () => {
  it('§6 with the trailwire command (--product-module) and §7 answer as the guide shows', { timeout: 60_000 }, async () => {
    const [partnersCreate, serveLine, ...rest] = commandLines(only('sh', `${LOADER_PREFIX}npx trailwire serve`));
    assert.equal(rest.length, 0, '§6 shows two commands');
    assert.match(partnersCreate!, /^NODE_OPTIONS='--import tsx' npx trailwire partners create .*--product axle-load --product-module \.\/products\/axle-load\/index\.ts/);
    assert.match(serveLine!, /^NODE_OPTIONS='--import tsx' npx trailwire serve --product-module \.\/products\/axle-load\/index\.ts$/);
    const provisioning = commandLines(only('sh', 'customers create'));
    assert.equal(provisioning.length, 3, '§7 shows customers, fleets and trailers create');

    const dir = mkdtempSync(join(tmpdir(), 'trailwire-guide-cli-'));
    const db = join(dir, 'trailwire.db');
    const children: ReturnType<typeof spawn>[] = [];
    try {
      const partner = await trailwireCommand(partnersCreate!, db);
      assert.match(partner.apiKey, /^twp_/);
      const customer = await trailwireCommand(provisioning[0]!, db);
      const fleet = await trailwireCommand(provisioning[1]!.replace('<customer>', customer.id), db);
      const trailer = await trailwireCommand(provisioning[2]!.replace('--fleet 1', `--fleet ${fleet.id}`), db);

      const server = spawn(process.execPath, [bin, ...argumentsOf(serveLine!), '--db', db, '--port', '0', '--grpc-port', '0', '--json'], {
        cwd: fileURLToPath(scratch),
        env: envOf(serveLine!),
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      children.push(server);
      let url: string | undefined;
      for await (const line of createInterface({ input: server.stdout! })) {
        url = JSON.parse(line).url;
        break;
      }
      assert.ok(url, 'serve printed its URL');
      await followSection7(url, { partner: partner.apiKey, customer: customer.apiKey }, trailer.id, 30);
    } finally {
      for (const child of children) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        if (child.exitCode === null) child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('§2 and §6 built: tsc with the guide\'s tsconfig, and the trailwire command loads the .js with plain Node', { timeout: 60_000 }, async () => {
    const production = only('sh', 'npx tsc && npx trailwire serve');
    assert.match(production, /--product-module \.\/dist\/products\/axle-load\/index\.js/);
    writeFileSync(new URL('tsconfig.json', scratch), only('json', 'rewriteRelativeImportExtensions'));
    const tsc = fileURLToPath(new URL('../../node_modules/typescript/bin/tsc', import.meta.url));
    await promisify(execFile)(process.execPath, [tsc], { cwd: fileURLToPath(scratch) });

    const dir = mkdtempSync(join(tmpdir(), 'trailwire-guide-built-'));
    try {
      const line = 'npx trailwire partners create --name "Scale Co" --product axle-load --product-module ./dist/products/axle-load/index.js --json';
      const { stdout } = await promisify(execFile)(process.execPath, [bin, ...argumentsOf(line), '--db', join(dir, 'trailwire.db')], {
        cwd: fileURLToPath(scratch),
        env: { ...cliEnv, NODE_OPTIONS: '' },
      });
      assert.match(JSON.parse(stdout).apiKey, /^twp_/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('§6 with startServer (productModules, a limit override) and §7 answer as the guide shows', { timeout: 30_000 }, async () => {
    const install = only('ts', 'productModules:');
    const limits = /core: \{ productLimits: (\{.*\}) \}/.exec(install)?.[1];
    assert.equal(limits, "{ 'axle-load': { requests: 60 } }", 'the override this test applies is the guide’s');

    const dir = mkdtempSync(join(tmpdir(), 'trailwire-guide-'));
    const server = await startServer({
      db: join(dir, 'trailwire.db'),
      port: 0,
      grpcPort: 0,
      logger: pino({ level: 'silent' }),
      productModules: [modulePath.pathname],
      core: { productLimits: { 'axle-load': { requests: 60 } } },
    });
    try {
      const { trailwire } = server;
      assert.equal(trailwire.products.list().at(-1), axleLoad, 'the module the guide wrote, loaded by path');
      const { apiKey } = await trailwire.auth.createPartner({ name: 'Scale Co', product: 'axle-load' });
      const customer = await trailwire.auth.createCustomer({ name: 'Haulage Co' });
      const fleet = await trailwire.admin.createFleet({ customerId: customer.principal.id, name: 'Flatbeds' });
      const trailer = await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin });
      await followSection7(server.url, { partner: apiKey, customer: customer.apiKey }, trailer.id, 60);
    } finally {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
