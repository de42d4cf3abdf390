/**
 * `simulate --webhooks` (issue 40): a receiver in the run, an endpoint per customer registered with
 * its token, every update delivered, signatures valid, events in order, the latency from the 202
 * reported and judged by `webhook-p99`, and the endpoints deleted at the end. Against the embedded
 * server (which allows a local receiver itself) and against a deployment, where a proxy between
 * the server and the receiver changes a body or drops deliveries, and each must be a violation; a
 * server that refuses the receiver's URL must be told how to allow it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { startServer, type RunningServer } from '../../adapters/server/index.ts';
import { withCheckDigit } from '../../core/vin.ts';
import { SIMULATED_PRODUCTS } from '../../simulator/traffic.ts';
import { simulate, type SimulateOptions } from '../../simulator/simulate.ts';

const quick = { seed: 7, vins: 6, rate: 30, windowSeconds: 1, customers: 2, scenario: 'steady', durationS: 3, subscribers: 0 } as const;

describe('simulate --webhooks, embedded', () => {
  it('registers an endpoint per customer, receives every update signed and in order, reports the latency from the 202, and deletes them', async () => {
    const { report, record } = await simulate({ ...quick, webhooks: { endpoints: 3 }, thresholds: ['webhook-p99<20s', 'webhook-p50<0ms'] });
    assert.deepEqual(report.violations, []);
    const hooks = report.webhooks!;
    assert.deepEqual({ endpoints: hooks.endpoints, invalid: hooks.invalid, deleted: hooks.deleted, stray: hooks.stray }, { endpoints: 3, invalid: 0, deleted: 3, stray: 0 });
    assert.deepEqual(record.webhooks!.endpoints.map((endpoint) => endpoint.customer), [0, 1, 0], 'spread over the customers as subscribers are');
    // Customer 1's updates are expected at its two endpoints, customer 2's at its one.
    const processed = (customer: number) => record.sends.filter((send) => send.id && record.outcomes[send.id]?.status === 'processed' && record.ownership[send.vin] === customer).length;
    const check = report.checks.find((candidate) => candidate.name.startsWith('every update reaches every webhook endpoint'))!;
    assert.equal(check.passed, true);
    assert.match(check.judged, new RegExp(`^${2 * processed(0) + processed(1)} expected events at 3 endpoints`));
    assert.ok(processed(0) > 0 && processed(1) > 0);
    for (const endpoint of record.webhooks!.endpoints) assert.ok(endpoint.deliveries.length > 0 && endpoint.deleted, `endpoint ${endpoint.index}`);
    // Every update of the endpoint's customer, from its 202 to its arrival.
    assert.ok(hooks.latencyMs.p50 > 0 && hooks.latencyMs.p99 >= hooks.latencyMs.p50, JSON.stringify(hooks.latencyMs));
    const [held, breached] = report.thresholds;
    assert.deepEqual(held, { threshold: 'webhook-p99<20s', actual: `${hooks.latencyMs.p99} ms`, passed: true });
    assert.equal(breached!.passed, false, 'a webhook threshold can fail');
  });

  it('refuses a webhook threshold without --webhooks, and tells how to allow a receiver the server refuses', async () => {
    await assert.rejects(simulate({ ...quick, thresholds: ['webhook-p99<2s'] }), /--threshold "webhook-p99<2s" judges webhook deliveries: give --webhooks N/);
    // The embedded server allows the local receiver itself; one that does not is a deployment's default.
    await assert.rejects(
      simulate({ ...quick, webhooks: { endpoints: 1 }, embeddedServer: { core: { webhooks: { rules: { allowHttp: false, allowPrivate: false } } } } }),
      (error: Error) => {
        assert.match(error.message, /^The server refused the webhook URL http:\/\/127\.0\.0\.1:\d+\/simulator-\w+\/1: \/url must be an https URL/);
        assert.match(error.message, /trailwire serve --webhook-allow-http --webhook-allow-private/);
        return true;
      },
    );
  });
});

/** A free port of 127.0.0.1 (the receiver is told to listen there, so a proxy can forward to it). */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/**
 * A proxy between the server and the simulator's receiver: forwards each delivery as `alter` makes
 * it (null: answered 204 and dropped, as a lossy middlebox would), so what the server sent and what
 * the receiver sees differ.
 */
async function startProxy(receiverPort: number, alter: (body: string, index: number) => string | null): Promise<{ url: string; forwarded: number; close(): Promise<void> }> {
  let index = 0;
  const proxy = {
    url: '',
    forwarded: 0,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  const server: Server = createServer(async (req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = alter(Buffer.concat(chunks).toString('utf8'), index++);
    if (body !== null) {
      const headers = Object.fromEntries(['content-type', 'webhook-id', 'webhook-timestamp', 'webhook-signature'].map((name) => [name, String(req.headers[name])]));
      const answer = await fetch(`http://127.0.0.1:${receiverPort}${req.url}`, { method: 'POST', headers, body });
      await answer.arrayBuffer();
      proxy.forwarded++;
    }
    res.statusCode = 204;
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/via-proxy`;
  return proxy;
}

describe('simulate --webhooks against a deployment', () => {
  let dir: string;
  let server: RunningServer;
  let customerId: string;
  let remote: NonNullable<SimulateOptions['remote']>;
  const vins = [0, 1, 2].map((i) => withCheckDigit(`1SMWHK0X00000000${i}`));

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'trailwire-simulate-webhooks-'));
    // As `serve --webhook-allow-http --webhook-allow-private --webhook-max-per-customer 2` runs.
    server = await startServer({
      db: join(dir, 'remote.db'),
      port: 0,
      grpcPort: 0,
      host: '127.0.0.1',
      logger: pino({ level: 'silent' }),
      core: { webhooks: { rules: { allowHttp: true, allowPrivate: true }, maxEndpointsPerCustomer: 2 } },
    });
    const { auth, admin } = server.trailwire;
    const partnerKeys: Record<string, string> = {};
    for (const product of SIMULATED_PRODUCTS) partnerKeys[product] = (await auth.createPartner({ name: `P ${product}`, product })).apiKey;
    const customer = await auth.createCustomer({ name: 'Hooked' });
    customerId = customer.principal.id;
    const fleet = await admin.createFleet({ customerId, name: 'F' });
    for (const vin of vins) await admin.registerTrailer({ fleetId: fleet.id, vin });
    remote = { target: server.url, grpc: `127.0.0.1:${server.grpcPort}`, partnerKeys, customerKeys: [customer.apiKey] };
  });
  after(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const registered = () => server.trailwire.store.webhooks.listWebhookEndpoints(customerId, { limit: 10 });
  const run = { seed: 3, vins: 3, rate: 6, scenario: 'steady', durationS: 2.5, subscribers: 0 } as const;

  it('a delivery whose body was changed on the way fails its signature: a violation, and the endpoint is deleted all the same', async () => {
    const port = await freePort();
    const proxy = await startProxy(port, (body, index) => (index === 1 ? body.replace('"events":[', '"events": [') : body));
    try {
      const { report } = await simulate({ ...run, remote, webhooks: { endpoints: 1, listen: `127.0.0.1:${port}`, url: proxy.url } });
      const violations = report.violations.join('\n');
      assert.match(violations, /webhook endpoint 1 \(customer 1\): 1 of \d+ deliveries would be refused by a Standard Webhooks receiver; first: msg_[\w-]+: no v1 signature in webhook-signature matches the body/);
      // A receiver refuses what it cannot verify, so the updates it carried did not arrive.
      assert.match(violations, /webhook endpoint 1 \(customer 1\) never received \d+ of \d+ update\(s\)/);
      assert.equal(report.webhooks!.invalid, 1);
      assert.ok(proxy.forwarded >= 2);
      assert.deepEqual(await registered(), [], 'the endpoint was deleted');
    } finally {
      await proxy.close();
    }
  });

  it('updates that never reach the receiver are missing: a violation', async () => {
    const port = await freePort();
    // The first delivery is answered 204 and never forwarded: the server counts it delivered.
    const proxy = await startProxy(port, (body, index) => (index === 0 ? null : body));
    try {
      const { report } = await simulate({ ...run, remote, webhooks: { endpoints: 1, listen: `127.0.0.1:${port}`, url: proxy.url } });
      const [, missing, expected] = /webhook endpoint 1 \(customer 1\) never received (\d+) of (\d+) update\(s\) of its customer's trailers as a trailer.updated event; first: VIN \w{17} at /.exec(report.violations.join('\n')) ?? [];
      assert.ok(Number(missing) > 0 && Number(missing) < Number(expected), report.violations.join('\n'));
      assert.equal(report.webhooks!.invalid, 0);
      assert.ok(proxy.forwarded >= 1, 'the deliveries after it arrived');
      assert.deepEqual(await registered(), []);
    } finally {
      await proxy.close();
    }
  });

  it('a registration the server refuses (over its cap) stops the run before the traffic, and what was registered is deleted', async () => {
    await assert.rejects(simulate({ ...run, remote, webhooks: { endpoints: 3 } }), /Customer 1 may register no more webhook endpoints .*give fewer --webhooks/);
    assert.deepEqual(await registered(), []);
  });
});
