/**
 * A server under test for the intake benchmark, run in its own process so the load generator does
 * not share its CPU. Modes: `trailwire-process` / `trailwire-power` (the real service on a temp
 * SQLite file in each durability mode, limits raised so that they do not dominate), `node-http` (a
 * bare node:http server that parses the JSON and answers 202) and `koa` (bare Koa + @koa/router
 * doing the same: the framework's own ceiling). Prints one JSON line `{url, token}` when ready; on a
 * `report` line on stdin, waits for the queue to drain and prints `{...stats}`.
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
import { startServer } from '../../adapters/server/index.ts';

const mode = process.argv[2];

async function readJson(req: NodeJS.ReadableStream): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

function listen(server: ReturnType<typeof createServer>): Promise<string> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
}

const lines = createInterface({ input: process.stdin });

if (mode === 'node-http') {
  const url = await listen(
    createServer(async (req, res) => {
      await readJson(req);
      res.writeHead(202, { 'content-type': 'application/json' });
      res.end('{"status":"queued"}');
    }),
  );
  console.log(JSON.stringify({ url, token: 'none' }));
  for await (const _ of lines) console.log(JSON.stringify({}));
} else if (mode === 'koa') {
  const app = new Koa();
  const router = new Router();
  router.post('/api/v1/telemetry/intake/:vin', async (ctx) => {
    await readJson(ctx.req);
    ctx.status = 202;
    ctx.body = { status: 'queued' };
  });
  app.use(router.routes());
  const url = await listen(createServer(app.callback()));
  console.log(JSON.stringify({ url, token: 'none' }));
  for await (const _ of lines) console.log(JSON.stringify({}));
} else if (mode === 'trailwire-process' || mode === 'trailwire-power') {
  const dir = mkdtempSync(join(tmpdir(), 'trailwire-bench-intake-'));
  const server = await startServer({
    db: join(dir, 'bench.db'),
    durability: mode === 'trailwire-power' ? 'power' : 'process',
    port: 0,
    grpcPort: 0,
    host: '127.0.0.1',
    logger: pino({ level: 'silent' }),
    // The bench measures intake, not the limiter: gps-basic's per-VIN limit is raised.
    core: { productLimits: { 'gps-basic': { requests: 1_000_000_000, windowSeconds: 60 } } },
  });
  const { trailwire } = server;
  const partner = await trailwire.auth.createPartner({ name: 'Bench', product: 'gps-basic' });
  const token = (await trailwire.auth.authenticate('partners', partner.apiKey, 'bench')).token.accessToken;
  const queue = trailwire.intake!.queue;
  const worker = trailwire.intake!.worker;
  let maxDepth = 0;
  const sampler = setInterval(async () => {
    maxDepth = Math.max(maxDepth, await queue.depth());
  }, 100);
  console.log(JSON.stringify({ url: server.url, token }));
  for await (const _ of lines) {
    const loadEnded = performance.now();
    const processedAtLoadEnd = worker.counts.processed;
    const depthAtLoadEnd = await queue.depth();
    while ((await queue.depth()) > 0) await new Promise((resolve) => setTimeout(resolve, 20));
    const drainSeconds = (performance.now() - loadEnded) / 1000;
    clearInterval(sampler);
    console.log(JSON.stringify({ processed: worker.counts.processed, processedAtLoadEnd, depthAtLoadEnd, maxDepth, drainSeconds, failed: worker.counts.failed }));
    await server.close();
    rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  }
} else {
  console.error(`unknown mode ${mode}`);
  process.exit(2);
}
