/**
 * Intake benchmark (issue 3): 202/s and latency at 50 connections for Trailwire's intake in both
 * durability modes, beside a bare node:http server that parses the JSON and answers 202 and a bare
 * Koa + @koa/router app doing the same, all measured in the same run, each server in its own process.
 * For Trailwire it also reports the queue: depth while loaded, and how fast the workers drain it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
// autocannon ships no types; the bench uses a handful of its documented fields.
// @ts-expect-error -- untyped module
import autocannon from 'autocannon';
import { withCheckDigit } from '../core/vin.ts';
import { printTable, round, writeResults } from './lib/results.ts';

const SERVER = new URL('./lib/intake-server.ts', import.meta.url).pathname;
const MODES = ['node-http', 'koa', 'trailwire-process', 'trailwire-power'] as const;

export interface IntakeBenchOptions {
  durationSeconds?: number;
  connections?: number;
  vins?: number;
}

async function startChild(mode: string): Promise<{ child: ChildProcess; url: string; token: string; next: () => Promise<any> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', SERVER, mode], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async () => JSON.parse((await lines.next()).value as string);
  const ready = await next();
  return { child, url: ready.url, token: ready.token, next };
}

export async function runIntakeBench(options: IntakeBenchOptions = {}) {
  const duration = options.durationSeconds ?? 10;
  const connections = options.connections ?? 50;
  const vins = Array.from({ length: options.vins ?? 1000 }, (_, i) => withCheckDigit(`1BNCH${String(i).padStart(5, '0')}0000000`.slice(0, 17)));
  const body = JSON.stringify({ timestamp: 1780315200, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 88.5, bearingDeg: 271 });
  const rows = [];
  const raw: Record<string, unknown> = {};

  for (const mode of MODES) {
    const server = await startChild(mode);
    let n = 0;
    let timestamp = 1780315200;
    const result = await autocannon({
      url: server.url,
      connections,
      duration,
      requests: [
        {
          method: 'POST',
          headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
          // Each request a new fix of one of many VINs, so the queue writes real, distinct rows.
          setupRequest: (request: Record<string, unknown>) => ({
            ...request,
            path: `/api/v1/telemetry/intake/${vins[n++ % vins.length]}`,
            body: body.replace('1780315200', String(timestamp++)),
          }),
        },
      ],
    });
    server.child.stdin!.write('report\n');
    const queue = await server.next();
    server.child.kill();
    const accepted = result['2xx'];
    const seconds = result.duration;
    raw[mode] = { requests: result.requests, latency: result.latency, non2xx: result.non2xx, errors: result.errors, queue };
    rows.push({
      server: mode,
      '202/s': Math.round(accepted / seconds),
      'p50 ms': result.latency.p50,
      'p99 ms': result.latency.p99,
      non2xx: result.non2xx,
      errors: result.errors,
      ...(queue.processed !== undefined
        ? {
            'drained/s': Math.round(queue.processed / (seconds + queue.drainSeconds)),
            'max depth': queue.maxDepth,
            'drain after load s': round(queue.drainSeconds, 2),
          }
        : { 'drained/s': '-', 'max depth': '-', 'drain after load s': '-' }),
    });
  }
  const bare = rows[0]!['202/s'] as number;
  for (const row of rows) (row as Record<string, unknown>)['x bare node:http'] = round((row['202/s'] as number) / bare, 2);
  printTable(`Intake: ${connections} connections, ${duration} s each, token reused, ${vins.length} VINs (limits raised)`, rows);
  const results = { durationSeconds: duration, connections, vins: vins.length, rows, raw };
  console.log(`results: ${writeResults('intake', results)}`);
  return results;
}

if (import.meta.url === `file://${process.argv[1]}`) await runIntakeBench({ durationSeconds: Number(process.env.BENCH_SECONDS ?? 10) });
