/**
 * Webhooks survive a SIGKILL (issue 40): `trailwire serve` takes intake whose events go to a receiver
 * that is down, so deliveries are pending (in the outbox, or formed and failing) when the process is
 * killed with SIGKILL; started again on the same file, with the receiver up, it delivers every event:
 * each trailer's latest state arrives, each trailer's events in order, and no delivery (`webhook-id`)
 * is answered 2xx twice. Runs the production path: the SQLite processing thread writes the outbox in
 * each intake batch's transaction, the serving process's deliverer sends it.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, it } from 'node:test';
import { withCheckDigit } from '../../core/vin.ts';
import { TRAILWIRE_BIN } from '../support/cli.ts';
import { until } from '../support/until.ts';
import { startWebhookReceiver } from '../support/webhook-receiver.ts';

const bin = TRAILWIRE_BIN;
const dir = mkdtempSync(join(tmpdir(), 'trailwire-crash-hooks-'));
const db = join(dir, 'crash.db');
const env = { ...process.env, TRAILWIRE_GRPC_PORT: '0', TRAILWIRE_LOG_LEVEL: 'error', TRAILWIRE_WEBHOOK_ALLOW_HTTP: 'true', TRAILWIRE_WEBHOOK_ALLOW_PRIVATE: 'true' };
const children: ChildProcess[] = [];
after(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

async function serve(): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [bin, 'serve', '--db', db, '--port', '0', '--host', '127.0.0.1', '--json'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  for await (const line of createInterface({ input: child.stdout! })) return { url: JSON.parse(line).url as string, child };
  throw new Error('serve printed nothing');
}

const cli = (args: string[]) => JSON.parse(execFileSync(process.execPath, [bin, ...args, '--db', db, '--json'], { env }).toString());

async function tokenOf(url: string, audience: 'partners' | 'customers', apiKey: string): Promise<string> {
  const response = await fetch(`${url}/api/v1/${audience}/authenticate`, { method: 'POST', headers: { 'x-api-key': apiKey } });
  return ((await response.json()) as { access_token: string }).access_token;
}

it('deliveries pending at a SIGKILL are delivered after the restart, each trailer in order, no delivery twice', { timeout: 90_000 }, async () => {
  const receiver = await startWebhookReceiver();
  try {
    receiver.answer = 503;
    const partner = cli(['partners', 'create', '--name', 'Hooks Co', '--product', 'gps-basic']);
    const customer = cli(['customers', 'create', '--name', 'Acme']);
    const fleet = cli(['fleets', 'create', '--customer', customer.id, '--name', 'Reefers']);
    const vins = Array.from({ length: 5 }, (_, i) => withCheckDigit(`1HWKS000${String(i).padStart(9, '0')}`));
    const trailerIds = vins.map((vin) => cli(['trailers', 'create', '--fleet', String(fleet.id), '--vin', vin]).id as string);

    const first = await serve();
    const created = await fetch(`${first.url}/api/v1/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${await tokenOf(first.url, 'customers', customer.apiKey)}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: receiver.url }),
    });
    assert.equal(created.status, 201);
    const partnerToken = await tokenOf(first.url, 'partners', partner.apiKey);
    const start = Math.floor(Date.now() / 1000) - 600;
    const rounds = 20;
    for (let round = 0; round < rounds; round++)
      await Promise.all(
        vins.map(async (vin) => {
          const response = await fetch(`${first.url}/api/v1/telemetry/intake/${vin}`, {
            method: 'POST',
            headers: { authorization: `Bearer ${partnerToken}`, 'content-type': 'application/json' },
            body: JSON.stringify({ timestamp: start + round, position: { latitude: 41, longitude: -87 }, speedKph: 80, bearingDeg: 10 }),
          });
          assert.equal(response.status, 202);
        }),
      );
    // The receiver refuses: the first delivery is formed, attempted and pending when the process dies.
    // Killed once the attempt is settled: killed while it sends, the process would hold the endpoint's
    // lease, which another process takes over only once it lapses (60 s).
    const customerToken = await tokenOf(first.url, 'customers', customer.apiKey);
    const webhookId = ((await created.json()) as { id: string }).id;
    await until(
      async () => {
        const response = await fetch(`${first.url}/api/v1/webhooks/${webhookId}/deliveries`, { headers: { authorization: `Bearer ${customerToken}` } });
        const { data } = (await response.json()) as { data: Array<{ attempts: number }> };
        return data.length > 0 && data[0]!.attempts > 0;
      },
      'a first (refused) attempt, settled',
      10_000,
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    const exited = new Promise((resolve) => first.child.once('exit', resolve));
    first.child.kill('SIGKILL');
    await exited;
    assert.equal(receiver.delivered().length, 0);

    receiver.answer = 204;
    const second = await serve();
    const lastFix = new Date((start + rounds - 1) * 1000).toISOString();
    const latestOf = () => {
      const latest = new Map<string, string>();
      for (const delivery of receiver.delivered())
        for (const event of JSON.parse(delivery.body).events) if (event.type === 'trailer.updated') latest.set(event.data.id, event.data.telemetry.timestamp);
      return latest;
    };
    await until(() => trailerIds.every((id) => latestOf().get(id) === lastFix), `every trailer's latest state delivered`, 30_000, 100);
    second.child.kill('SIGKILL');

    const delivered = receiver.delivered();
    const ids = delivered.map((delivery) => String(delivery.headers['webhook-id']));
    assert.equal(new Set(ids).size, ids.length, 'no delivery answered 2xx twice');
    const refusedIds = new Set(receiver.received.filter((delivery) => delivery.status === 503).map((delivery) => String(delivery.headers['webhook-id'])));
    assert.ok(ids.some((id) => refusedIds.has(id)), 'the delivery refused before the kill was sent again after it, under its webhook-id');
    const seen = new Set<string>();
    for (const trailerId of trailerIds) {
      const times = delivered.flatMap((delivery) => JSON.parse(delivery.body).events).filter((event: any) => event.data.id === trailerId).map((event: any) => event.data.telemetry.timestamp as string);
      assert.deepEqual(times, [...times].sort(), `trailer ${trailerId}'s events in order`);
      for (const time of times) {
        assert.ok(!seen.has(`${trailerId}@${time}`), 'no event twice');
        seen.add(`${trailerId}@${time}`);
      }
    }
  } finally {
    await receiver.close();
  }
});
