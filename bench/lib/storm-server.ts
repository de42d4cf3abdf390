/**
 * The server of the live storm bench (`bench/live-storm.ts`), in its own process: the real
 * standalone server on SQLite with one customer of `trailers` trailers (one fleet) and a quiet
 * other tenant. Arguments: `<trailers> <connects per minute per customer and per address>`.
 * Prints `{url, token}` when ready; `stats` answers the event-loop delay, the CPU time used (ms) and
 * RSS since the last `stats`; `close` stops.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { pino } from 'pino';
import { startServer } from '../../dist/adapters/server/index.js';
import { openSqliteStore } from '../../dist/adapters/sqlite/index.js';
import { createTrailwire } from '../../dist/core/trailwire.js';
import { withCheckDigit } from '../../dist/core/vin.js';
import { builtInProducts } from '../../dist/products/index.js';

const [trailersArg, connectsArg] = process.argv.slice(2);
const trailers = Number(trailersArg);
const connects = Number(connectsArg);

const dir = mkdtempSync(join(tmpdir(), 'trailwire-storm-bench-'));
const file = join(dir, 'bench.db');
const setup = await createTrailwire({ store: await openSqliteStore({ file }), products: builtInProducts });
const { principal } = await setup.auth.createCustomer({ name: 'Reconnecting Co' });
const fleet = await setup.admin.createFleet({ customerId: principal.id, name: 'Everything' });
for (let i = 0; i < trailers; i++) await setup.admin.registerTrailer({ fleetId: fleet.id, vin: withCheckDigit(`1ST00000${String(i).padStart(9, '0')}`), unitId: `U-${i}` });
const token = setup.tokens.mint(principal).accessToken;
await setup.close();

const limit = { requests: connects, windowSeconds: 60 };
const server = await startServer({
  db: file,
  port: 0,
  grpcPort: 0,
  host: '127.0.0.1',
  logger: pino({ level: 'silent' }),
  core: { limits: { liveConnect: limit, liveConnectPerAddress: limit } },
});
const loopDelay = monitorEventLoopDelay({ resolution: 5 });
loopDelay.enable();
let cpuBefore = process.cpuUsage();
console.log(JSON.stringify({ url: server.url, token }));

const ms = (ns: number) => Math.round(ns / 1e4) / 100;
for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'stats') {
    const cpu = process.cpuUsage(cpuBefore);
    console.log(
      JSON.stringify({
        loopDelayMs: { p99: ms(loopDelay.percentile(99)), max: ms(loopDelay.max) },
        cpuMs: Math.round((cpu.user + cpu.system) / 1000),
        rssMb: Math.round(process.memoryUsage().rss / 2 ** 20),
      }),
    );
    loopDelay.reset();
    cpuBefore = process.cpuUsage();
  } else if (line === 'close') break;
}
await server.close();
rmSync(dir, { recursive: true, force: true });
process.exit(0);
