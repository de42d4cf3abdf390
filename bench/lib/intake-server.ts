/**
 * A server under test for the intake benchmark, run in its own process so that the load generator
 * does not share its event loop. Modes:
 * - `node-http`: a bare node:http server that reads and parses the JSON and answers 202;
 * - `koa`: bare Koa + @koa/router doing the same (the framework's own ceiling);
 * - `koa-sqlite`: that Koa app storing each payload in one SQLite table before it answers, with a
 *   commit per event-loop turn (the ceiling of a Koa service that acknowledges durably);
 * - `trailwire-<durability>-<processing>`: the real service (`startServer`) on a temporary SQLite
 *   file, durability `process` or `power`, processing `thread` (the default), `inline` (on the event
 *   loop) or `none` (accepting only, as `serve --no-intake-worker`). gps-basic's per-VIN limit is
 *   raised so that the limiter never answers 429 during the run.
 *
 * Prints one JSON line `{url, token}` when ready. On a `report` line on stdin it waits for the queue
 * to drain (when something processes it) and prints the queue figures and its own CPU time (the
 * whole process's, and its main thread's).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import Router from '@koa/router';
import Koa from 'koa';
import { pino } from 'pino';
import { startServer } from '../../dist/adapters/server/index.js';
import type { SqliteDurability } from '../../dist/adapters/sqlite/index.js';
import { type BarePayload, openBarePayloadTable } from './bare-payload-table.ts';
import { readJson } from './read-json.ts';
import { cpuMsOfStat } from './service-cpu.ts';

const mode = process.argv[2] ?? '';
const commands = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const cpuMs = () => {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
};

/**
 * CPU time of the main thread (the event loop serving HTTP) alone, from Linux's per-thread
 * accounting: the rest of the process is the processing thread, libuv's pool and V8's helpers.
 * Null where /proc does not say (another OS).
 */
const mainThreadCpuMs = (): number | null => cpuMsOfStat(`/proc/self/task/${process.pid}/stat`) ?? null;

function listen(handler: Parameters<typeof createServer>[1]): Promise<string> {
  const server = createServer(handler);
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
}

/** Answers report lines until stdin ends; `figures` runs at each. */
async function serveReports(figures: () => Promise<object>): Promise<void> {
  for (;;) {
    const { done } = await commands.next();
    if (done) return;
    console.log(JSON.stringify(await figures()));
  }
}

const cpuAtReady = { value: 0 };
const bare = async () => ({ cpuMs: cpuMs() - cpuAtReady.value, mainCpuMs: mainThreadCpuMs() });

if (mode === 'node-http') {
  const url = await listen((req, res) => {
    readJson(req).then(
      () => {
        res.writeHead(202, { 'content-type': 'application/json' });
        res.end('{"status":"queued"}');
      },
      () => {
        res.writeHead(400);
        res.end();
      },
    );
  });
  cpuAtReady.value = cpuMs();
  console.log(JSON.stringify({ url, token: 'none' }));
  await serveReports(bare);
  process.exit(0);
} else if (mode === 'koa') {
  const app = new Koa();
  const router = new Router();
  router.post('/api/v1/telemetry/intake/:vin', async (ctx) => {
    await readJson(ctx.req);
    ctx.status = 202;
    ctx.body = { status: 'queued' };
  });
  app.use(router.routes());
  const url = await listen(app.callback());
  cpuAtReady.value = cpuMs();
  console.log(JSON.stringify({ url, token: 'none' }));
  await serveReports(bare);
  process.exit(0);
} else if (mode === 'koa-sqlite') {
  // The framework's ceiling with a durable write: bare Koa + @koa/router that stores each payload in
  // the bare payload table and answers 202. No auth, no validation, no limits, no processing: what
  // any Koa service pays to acknowledge a payload durably here.
  const dir = mkdtempSync(join(tmpdir(), 'trailwire-bench-koa-sqlite-'));
  const table = openBarePayloadTable(join(dir, 'bench.db'));
  // The payloads of one event-loop turn share a commit.
  let group: Array<{ payload: BarePayload; resolve: (seq: number) => void }> = [];
  const store = (payload: BarePayload) =>
    new Promise<number>((resolve) => {
      if (group.length === 0)
        setImmediate(() => {
          const pending = group;
          group = [];
          table.insertGroup(pending.map((entry) => entry.payload)).forEach((seq, i) => pending[i]!.resolve(seq));
        });
      group.push({ payload, resolve });
    });
  const app = new Koa();
  const router = new Router();
  router.post('/api/v1/telemetry/intake/:vin', async (ctx) => {
    const body = await readJson(ctx.req);
    const seq = await store({ vin: ctx.params.vin!, payload: JSON.stringify(body), receivedAt: Date.now() });
    ctx.status = 202;
    ctx.body = { id: String(seq), status: 'queued' };
  });
  app.use(router.routes());
  const url = await listen(app.callback());
  cpuAtReady.value = cpuMs();
  console.log(JSON.stringify({ url, token: 'none' }));
  await serveReports(bare);
  table.close();
  rmSync(dir, { recursive: true, force: true });
  process.exit(0);
} else if (/^trailwire-(process|power)-(thread|inline|none)$/.test(mode)) {
  const [, durability, processing] = mode.split('-') as [string, SqliteDurability, 'thread' | 'inline' | 'none'];
  const dir = mkdtempSync(join(tmpdir(), 'trailwire-bench-intake-'));
  const server = await startServer({
    db: join(dir, 'bench.db'),
    durability,
    port: 0,
    grpcPort: 0,
    host: '127.0.0.1',
    logger: pino({ level: 'warn' }, pino.destination(2)),
    intakeWorker: processing !== 'none',
    intakeThread: processing === 'thread',
    // The bench measures intake, not the limiter: gps-basic's per-VIN limit and the partner's budget are raised.
    core: {
      productLimits: { 'gps-basic': { requests: 1_000_000_000, windowSeconds: 60 } },
      partnerIntake: { budget: { requests: 1_000_000_000, windowSeconds: 60 }, newVinsPerDay: 1_000_000_000 },
    },
  });
  const { trailwire } = server;
  const partner = await trailwire.auth.createPartner({ name: 'Bench', product: 'gps-basic' });
  const token = (await trailwire.auth.authenticate('partners', partner.apiKey, 'bench')).token.accessToken;
  const queue = trailwire.intake!.queue;
  let maxDepth = 0;
  const sampler = setInterval(() => {
    void queue.depth().then((depth) => (maxDepth = Math.max(maxDepth, depth)));
  }, 100);
  cpuAtReady.value = cpuMs();
  console.log(JSON.stringify({ url: server.url, token }));
  await serveReports(async () => {
    // Called the moment the load ends: how far processing is behind, then how long it takes to catch up.
    const loadEnded = performance.now();
    const cpuAtLoadEnd = cpuMs() - cpuAtReady.value;
    const mainCpuAtLoadEnd = mainThreadCpuMs();
    const processedAtLoadEnd = server.intakeCounts.processed;
    const depthAtLoadEnd = await queue.depth();
    if (processing !== 'none') while ((await queue.depth()) > 0) await new Promise((resolve) => setTimeout(resolve, 10));
    const figures = {
      cpuMs: cpuAtLoadEnd,
      mainCpuMs: mainCpuAtLoadEnd,
      cpuMsWithDrain: cpuMs() - cpuAtReady.value,
      processed: server.intakeCounts.processed,
      failed: server.intakeCounts.failed,
      processedAtLoadEnd,
      depthAtLoadEnd,
      maxDepth,
      drainSeconds: processing === 'none' ? null : (performance.now() - loadEnded) / 1000,
    };
    maxDepth = 0;
    return figures;
  });
  clearInterval(sampler);
  await server.close();
  rmSync(dir, { recursive: true, force: true });
  process.exit(0);
} else {
  console.error(`unknown mode ${JSON.stringify(mode)}`);
  process.exit(2);
}
