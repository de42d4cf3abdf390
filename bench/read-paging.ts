/**
 * Read paging benchmark (issue 2): a trailer with 1,000,000 GPS fixes; `take=100` pages through the
 * HTTP API, the first page and a page deep in the range measured alternately in the same run, beside
 * a bare node:http server answering a pre-built page of the same size (the transport's own floor).
 * Target: deep page within 1.2x of the first, p99 < 10 ms.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { createTrailwireApp } from '../dist/adapters/koa/app.js';
import { openSqliteStore } from '../dist/adapters/sqlite/index.js';
import { ManualClock } from '../dist/core/clock.js';
import type { GpsFix } from '../dist/core/model.js';
import { CursorCodec } from '../dist/core/paging.js';
import { createTrailwire } from '../dist/core/trailwire.js';
import { percentile, printTable, round, writeResults } from './lib/results.ts';

export interface ReadPagingOptions {
  points?: number;
  samples?: number;
}

export async function runReadPagingBench(options: ReadPagingOptions = {}) {
  const points = options.points ?? 1_000_000;
  const samples = options.samples ?? 2_000;
  const dir = mkdtempSync(join(tmpdir(), 'trailwire-bench-'));
  const start = Date.UTC(2026, 0, 1);
  const clock = new ManualClock(start + points * 1000 + 1000);
  const store = await openSqliteStore({ file: join(dir, 'bench.db') });
  // The read limit is raised: this measures paging, not the limiter.
  const trailwire = await createTrailwire({ store, clock, limits: { read: { requests: 1_000_000_000, windowSeconds: 60 } } });
  const servers: Server[] = [];
  try {
    const { principal, apiKey } = await trailwire.auth.createCustomer({ name: 'Bench' });
    const fleet = await trailwire.admin.createFleet({ customerId: principal.id, name: 'Bench fleet' });
    const trailer = await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: '1HGCM82633A004352' });

    const seedStarted = performance.now();
    const batch = 100_000;
    for (let offset = 0; offset < points; offset += batch) {
      const fixes: GpsFix[] = [];
      for (let i = offset; i < Math.min(points, offset + batch); i++)
        fixes.push({ timestamp: start + i * 1000, lat: 41 + i * 1e-6, long: -87 - i * 1e-6, speed: 55.5, heading: 'NE' });
      await store.applyTelemetry({ vin: trailer.vin, at: clock.now(), telemetry: { gps: fixes, devices: [], cargosafe: [] } });
    }
    const seedSeconds = (performance.now() - seedStarted) / 1000;

    const app = createTrailwireApp(trailwire, { logger: pino({ level: 'silent' }) });
    const appUrl = await listen(createServer(app.callback()), servers);
    const token = (await trailwire.auth.authenticate('customers', apiKey, 'bench')).token.accessToken;
    const headers = { authorization: `Bearer ${token}` };
    const range = { from: start, to: start + points * 1000 };
    const query = `from=${new Date(range.from).toISOString()}&to=${new Date(range.to).toISOString()}&take=100`;
    const firstUrl = `${appUrl}/api/v1/trailers/telemetry/gps/${trailer.id}?${query}`;
    // A `next` token 90% into the range: what a client holds after paging 9,000 pages.
    const codec = new CursorCodec(await store.getOrCreateSecret('cursor-hmac', 'unused'));
    const deepSeq = await deepSequence(trailwire, principal.id, trailer.id, range, Math.floor(points * 0.9));
    const deepToken = codec.encode(`gps:${trailer.id}`, { kind: 'time', after: deepSeq, range, take: 100 });
    const deepUrl = `${appUrl}/api/v1/trailers/telemetry/gps/${trailer.id}?take=100&next=${encodeURIComponent(deepToken)}`;

    const sample = await (await fetch(firstUrl, { headers })).text();
    const bareUrl = await listen(
      createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
        res.end(sample);
      }),
      servers,
    );

    const timings = { first: [] as number[], deep: [] as number[], bare: [] as number[] };
    const one = async (url: string, into: number[], auth: boolean) => {
      const began = performance.now();
      const response = await fetch(url, auth ? { headers } : {});
      const body = (await response.json()) as { data: unknown[] };
      into.push(performance.now() - began);
      if (response.status !== 200 || body.data.length !== 100) throw new Error(`unexpected page: ${response.status}`);
    };
    for (let i = 0; i < 200; i++) await one(firstUrl, [], true); // warm-up
    for (let i = 0; i < samples; i++) {
      await one(firstUrl, timings.first, true);
      await one(deepUrl, timings.deep, true);
      await one(bareUrl, timings.bare, false);
    }

    const summary = (name: string, values: number[]) => ({
      case: name,
      p50Ms: round(percentile(values, 50), 3),
      p99Ms: round(percentile(values, 99), 3),
    });
    const rows = [summary('first page', timings.first), summary('deep page (90%)', timings.deep), summary('bare node:http, same body', timings.bare)];
    const deepOverFirstP50 = round(rows[1]!.p50Ms / rows[0]!.p50Ms, 3);
    const results = {
      points,
      samples,
      seedSeconds: round(seedSeconds, 1),
      rows,
      deepOverFirstP50,
      targets: { deepWithin1_2xOfFirst: deepOverFirstP50 <= 1.2, p99Under10ms: rows[0]!.p99Ms < 10 && rows[1]!.p99Ms < 10 },
    };
    printTable(`Read paging: take=100 over ${points.toLocaleString()} GPS fixes (${samples} samples each, seeded in ${results.seedSeconds} s)`, rows);
    console.log(`deep/first p50: ${deepOverFirstP50}  targets: ${JSON.stringify(results.targets)}`);
    console.log(`results: ${writeResults('read-paging', results)}`);
    return results;
  } finally {
    for (const server of servers) {
      server.closeAllConnections();
      server.close();
    }
    await trailwire.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The keyset position of the n-th fix, found through the store's own paging. */
async function deepSequence(
  trailwire: Awaited<ReturnType<typeof createTrailwire>>,
  customerId: string,
  trailerId: string,
  range: { from: number; to: number },
  n: number,
) {
  const timestamp = range.from + (n - 1) * 1000;
  const rows = await trailwire.store.listGps(customerId, trailerId, { from: timestamp, to: timestamp + 1, limit: 1 });
  if (!rows[0]) throw new Error('deep fix not found');
  return rows[0].key;
}

async function listen(server: Server, servers: Server[]): Promise<string> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await runReadPagingBench({ points: Number(process.env.BENCH_POINTS ?? 1_000_000) });
}
