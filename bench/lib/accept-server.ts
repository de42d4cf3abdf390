/**
 * A server under test for the accept-path benchmark (`../accept-path.ts`), in its own process with
 * its own load:
 * - `koa`: bare Koa + @koa/router that reads the JSON body and answers 202 (the framework's floor);
 * - `trailwire`: Trailwire's whole HTTP stack (`createTrailwireApp`: request id, access log, metrics,
 *   problem+json, pages, routers, bearer check, the intake route and the core's accept path) over an
 *   SQLite store, with an intake queue that keeps nothing and answers at once, so that what is
 *   measured is the HTTP thread's own work per 202 and nothing of storage or processing.
 *
 * The load is the intake benchmark's (new GPS fixes of a fleet of `fleet` VINs, 20,000 by default, one reused token), sent
 * from this process by a client of raw sockets that keeps `connections` connections busy with
 * `pipelined` requests each: a client far cheaper than the server and the same for every server, in
 * the same process, so the process's CPU per request is steady to about a microsecond (a load
 * generator in another process adds the noise of two processes taking turns on the cores). Prints one
 * JSON line: `{ requests, statuses, cpuMicrosPerRequest, requestsPerSecond }`. Arguments: mode, requests, connections, pipelined, fleet. With
 * TRAILWIRE_BENCH_PAUSE_AFTER_WARMUP=1 it prints `warm` after the warm-up and waits for a line on
 * stdin before the measured load.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:net';
import Router from '@koa/router';
import Koa from 'koa';
import { pino } from 'pino';
import { createTrailwireApp } from '../../dist/adapters/koa/app.js';
import { openSqliteStore } from '../../dist/adapters/sqlite/index.js';
import { type IntakeQueue, queuedRecord } from '../../dist/core/intake-queue.js';
import { createTrailwire } from '../../dist/core/trailwire.js';
import { builtInProducts } from '../../dist/products/index.js';
import { benchVins, gpsFixBody } from './gps-load.ts';
import { readJson } from './read-json.ts';

const [mode = '', requestsArgument = '100000', connectionsArgument = '50', pipelinedArgument = '4', fleetArgument = '20000'] = process.argv.slice(2);
const requests = Number(requestsArgument);
const connections = Number(connectionsArgument);
const pipelined = Number(pipelinedArgument);

/** Stores nothing: every enqueue is answered as created, at once. Nothing else is asked of it here. */
function instantQueue(): IntakeQueue {
  const unused = () => Promise.reject(new Error('not used by the accept-path benchmark'));
  return {
    enqueue: async (item) => ({ record: queuedRecord(item), created: true }),
    findByIdempotencyKey: unused,
    get: unused,
    getMany: unused,
    listFailed: unused,
    requeue: unused,
    depth: async () => 0,
  };
}

const vins = benchVins(Number(fleetArgument));
const dir = mkdtempSync(join(tmpdir(), 'trailwire-bench-accept-'));
let handler: Parameters<typeof createServer>[1];
let token = 'none';
let close = async () => {};
if (mode === 'koa') {
  const app = new Koa();
  const router = new Router();
  router.post('/api/v1/telemetry/intake/:vin', async (ctx) => {
    await readJson(ctx.req);
    ctx.status = 202;
    ctx.body = { id: 'x', status: 'queued' };
  });
  app.use(router.routes());
  handler = app.callback();
} else if (mode === 'trailwire') {
  const store = await openSqliteStore({ file: join(dir, 'bench.db') });
  const trailwire = await createTrailwire({
    store,
    products: builtInProducts,
    intakeQueue: instantQueue(),
    worker: false,
    // The bench measures the accept path, not the limiter: gps-basic's per-VIN limit is raised, over
    // an hour's window, so that no window ends during a run even 50 times slowed under callgrind
    // (a new window refills its counters from nothing, which a real run does once a minute, not per thousand requests).
    productLimits: { 'gps-basic': { requests: 1_000_000_000, windowSeconds: 3600 } },
    // The partner's budget likewise (issue 29); each payload still counts against it, as in production.
    partnerIntake: { budget: { requests: 1_000_000_000, windowSeconds: 3600 }, newVinsPerDay: 1_000_000_000 },
  });
  handler = createTrailwireApp(trailwire, { logger: pino({ level: 'warn' }, pino.destination(2)) }).callback();
  const partner = await trailwire.auth.createPartner({ name: 'Bench', product: 'gps-basic' });
  token = (await trailwire.auth.authenticate('partners', partner.apiKey, 'bench')).token.accessToken;
  // The fleet is a customer's registered trailers, and the customer has granted the partner: the
  // accept path's usual case (contract 4, "Partner grants"), its owner and grant checks included.
  const customer = await trailwire.auth.createCustomer({ name: 'Bench Haulage' });
  const fleet = await trailwire.admin.createFleet({ customerId: customer.principal.id, name: 'Bench' });
  for (const vin of vins) await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin });
  await trailwire.admin.addGrant({ customerId: customer.principal.id, partnerId: partner.principal.id });
  close = () => trailwire.close();
} else {
  console.error(`unknown mode ${JSON.stringify(mode)}`);
  process.exit(2);
}

const server = createServer(handler);
// Under callgrind (50 times slower, or more on a busy machine) a connection can wait longer between
// requests than Node's 5 s keep-alive; closed under the client, it would end the run.
server.keepAliveTimeout = 120_000;
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const port = (server.address() as AddressInfo).port;

let sequence = 0;
let timestamp = 1780315200;
const nextRequest = () => {
  const body = gpsFixBody(timestamp++);
  return (
    `POST /api/v1/telemetry/intake/${vins[sequence++ % vins.length]} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer ${token}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
};

/** Sends about `total` requests over the connections, `pipelined` at a time; answers how many of each status came back. */
async function load(total: number): Promise<Map<string, number>> {
  const statuses = new Map<string, number>();
  const perConnection = Math.ceil(total / connections / pipelined) * pipelined;
  const one = () =>
    new Promise<void>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1');
      let sent = 0;
      let answered = 0;
      let tail = '';
      const send = () => {
        let batch = '';
        for (let i = 0; i < pipelined; i++) batch += nextRequest();
        sent += pipelined;
        socket.write(batch);
      };
      socket.on('connect', send);
      socket.on('error', reject);
      socket.on('data', (chunk: Buffer) => {
        // Status lines are counted; `tail` keeps one split across two chunks.
        const text = tail + chunk.toString('latin1');
        let at = text.indexOf('HTTP/1.1 ');
        for (; at !== -1 && at + 12 <= text.length; at = text.indexOf('HTTP/1.1 ', at + 9)) {
          const status = text.slice(at + 9, at + 12);
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
          answered++;
        }
        tail = at === -1 ? text.slice(-8) : text.slice(at);
        if (answered < sent) return;
        if (sent < perConnection) send();
        else {
          socket.end();
          resolve();
        }
      });
    });
  await Promise.all(Array.from({ length: connections }, one));
  return statuses;
}

await load(requests); // warm-up
if (process.env.TRAILWIRE_BENCH_PAUSE_AFTER_WARMUP === '1') {
  // Counting instructions under callgrind (`../accept-path.ts`): the parent zeroes the counters now.
  process.stdout.write('warm\n');
  await new Promise((resolve) => process.stdin.once('data', resolve));
  process.stdin.destroy();
}
const cpuBefore = process.cpuUsage();
const started = performance.now();
const statuses = await load(requests);
const seconds = (performance.now() - started) / 1000;
const cpu = process.cpuUsage(cpuBefore);
const answered = [...statuses.values()].reduce((sum, count) => sum + count, 0);
console.log(
  JSON.stringify({
    requests: answered,
    statuses: Object.fromEntries(statuses),
    cpuMicrosPerRequest: (cpu.user + cpu.system) / answered,
    requestsPerSecond: answered / seconds,
  }),
);
server.close();
await close();
rmSync(dir, { recursive: true, force: true });
process.exit(0);
