/**
 * Accept-path benchmark: the CPU per 202 of Trailwire's whole HTTP stack and core accept path,
 * beside bare Koa + @koa/router reading the same JSON body, in the same run. Each server runs in its
 * own process with its own load (`lib/accept-server.ts`); Trailwire's intake queue there keeps
 * nothing, so the difference to Koa is the HTTP thread's own work per 202 — what the `intake`
 * benchmark's `main µs/202` holds besides the hand-over to storage — measured without storage,
 * processing or a second thread sharing the cores, steady enough (about ±1 µs) to tell a change of a
 * microsecond. Both figures include the same in-process client; the difference is Trailwire's.
 * Run alone with `npm run bench -- accept-path`.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { printTable, round, SERVER_NODE_FLAGS, writeResults } from './lib/results.ts';

const SERVER = new URL('./lib/accept-server.ts', import.meta.url).pathname;
const MODES = ['koa', 'trailwire'] as const;

export interface AcceptPathBenchOptions {
  /** Requests measured per server, after as many again of warm-up. Default 100,000. */
  requests?: number;
  /** Connections. Default 50. */
  connections?: number;
  /** Requests each connection sends at once before it reads the answers. Default 4. */
  pipelined?: number;
}

interface Measured {
  requests: number;
  statuses: Record<string, number>;
  cpuMicrosPerRequest: number;
  requestsPerSecond: number;
}

async function measure(mode: string, requests: number, connections: number, pipelined: number): Promise<Measured> {
  const child = spawn(process.execPath, [...SERVER_NODE_FLAGS, '--import', 'tsx', SERVER, mode, String(requests), String(connections), String(pipelined)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const [code] = await once(child, 'exit');
  if (code !== 0) throw new Error(`the ${mode} server exited with code ${code}`);
  const measured = JSON.parse(output) as Measured;
  const refused = measured.requests - (measured.statuses['202'] ?? 0);
  if (refused > 0) throw new Error(`${mode}: ${refused} of ${measured.requests} answers were not 202: ${JSON.stringify(measured.statuses)}`);
  return measured;
}

export async function runAcceptPathBench(options: AcceptPathBenchOptions = {}) {
  const requests = options.requests ?? 100_000;
  const connections = options.connections ?? 50;
  const pipelined = options.pipelined ?? 4;
  const rows: Array<Record<string, string | number>> = [];
  for (const mode of MODES) {
    const measured = await measure(mode, requests, connections, pipelined);
    rows.push({ server: mode, '202/s': Math.round(measured.requestsPerSecond), 'cpu µs/202 (with client)': round(measured.cpuMicrosPerRequest, 1) });
  }
  const koa = rows.find((row) => row.server === 'koa')!['cpu µs/202 (with client)'] as number;
  for (const row of rows) {
    row['x koa'] = round((row['cpu µs/202 (with client)'] as number) / koa, 2);
    row['µs beyond koa'] = round((row['cpu µs/202 (with client)'] as number) - koa, 1);
  }
  printTable(
    `Accept path: ${requests.toLocaleString('en-US')} intake requests per server after as many of warm-up, ${connections} connections, ${pipelined} pipelined, client in the server's process`,
    rows,
  );
  console.log(`results: ${writeResults('accept-path', { requests, connections, pipelined, rows })}`);
  return { rows };
}

if (import.meta.url === `file://${process.argv[1]}`) await runAcceptPathBench();
