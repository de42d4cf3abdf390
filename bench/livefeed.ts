/**
 * LiveFeed fan-out benchmark (issue 4). Two runs, each against Trailwire's LiveFeed and, in the same
 * run, a bare @grpc/grpc-js server streaming the same pre-encoded messages:
 *   (a) 5,000 subscribers over 500 customers, 500 updates/s in all;
 *   (b) 1,000 subscribers of one customer, 50 updates/s (50,000 messages/s).
 * Reports publish-to-receive latency p50/p99, delivered/offered, messages/s, and server RSS per idle
 * subscriber. Server and subscribers run in separate processes.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { percentile, printTable, round, writeResults } from './lib/results.ts';

const SERVER = new URL('./lib/live-server.ts', import.meta.url).pathname;
const CLIENTS = new URL('./lib/live-clients.ts', import.meta.url).pathname;

interface Run {
  name: string;
  subscribers: number;
  customers: number;
  rate: number;
}

export const LIVE_RUNS: Run[] = [
  { name: '(a) 5,000 subs / 500 customers / 500 upd/s', subscribers: 5000, customers: 500, rate: 500 },
  { name: '(b) 1,000 subs / 1 customer / 50 upd/s', subscribers: 1000, customers: 1, rate: 50 },
];

function child(file: string, args: string[]) {
  const process_ = spawn(process.execPath, ['--max-old-space-size=4096', '--import', 'tsx', file, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: process_.stdout! })[Symbol.asyncIterator]();
  return {
    process: process_ as ChildProcess,
    send: (line: string) => process_.stdin!.write(`${line}\n`),
    next: async () => (await lines.next()).value as string,
  };
}

export async function measure(mode: 'trailwire' | 'bare', run: Run, seconds: number, clientProcesses: number) {
  const server = child(SERVER, [mode, String(run.customers)]);
  const { port, tokens } = JSON.parse(await server.next()) as { port: number; tokens: string[] };
  server.send('rss');
  const { rss: rssStart } = JSON.parse(await server.next()) as { rss: number };
  // Subscriber i belongs to customer i % customers.
  const assignments: string[][] = Array.from({ length: clientProcesses }, () => []);
  for (let i = 0; i < run.subscribers; i++) assignments[i % clientProcesses]!.push(tokens[i % run.customers]!);
  const clients = assignments.map(() => child(CLIENTS, []));
  clients.forEach((client, i) => client.send(JSON.stringify({ port, tokens: assignments[i], perConnection: 50 })));
  for (const client of clients) if ((await client.next()) !== 'ready') throw new Error('subscribers did not start');
  server.send(`publish ${seconds} ${run.rate}`);
  const { published, rssIdle } = JSON.parse(await server.next()) as { published: number; rssIdle: number };
  await new Promise((resolve) => setTimeout(resolve, 1000)); // let the last messages land
  const reports = [];
  for (const client of clients) {
    client.send('report');
    reports.push(JSON.parse(await client.next()) as { received: number; latencies: number[] });
  }
  server.process.kill();
  const latencies = reports.flatMap((report) => report.latencies);
  const delivered = reports.reduce((sum, report) => sum + report.received, 0);
  const offered = published * (run.subscribers / run.customers);
  return {
    server: mode,
    'p50 ms': round(percentile(latencies, 50), 1),
    'p99 ms': round(percentile(latencies, 99), 1),
    'delivered/offered': `${delivered}/${offered}`,
    'msgs/s': Math.round(delivered / seconds),
    'KiB RSS/idle sub': round((rssIdle - rssStart) / 1024 / run.subscribers, 1),
  };
}

export async function runLiveFeedBench(options: { seconds?: number; clientProcesses?: number } = {}) {
  const seconds = options.seconds ?? 10;
  const clientProcesses = options.clientProcesses ?? 4;
  const results = [];
  for (const run of LIVE_RUNS) {
    const rows = [await measure('trailwire', run, seconds, clientProcesses), await measure('bare', run, seconds, clientProcesses)];
    const ratio = round((rows[0]!['msgs/s'] as number) / (rows[1]!['msgs/s'] as number), 2);
    printTable(`LiveFeed ${run.name}, ${seconds} s, Trailwire/bare msgs/s = ${ratio}`, rows);
    results.push({ run, rows, trailwireOverBareMsgs: ratio });
  }
  console.log(`results: ${writeResults('livefeed', { seconds, clientProcesses, results })}`);
  return results;
}

if (import.meta.url === `file://${process.argv[1]}`) await runLiveFeedBench({ seconds: Number(process.env.BENCH_SECONDS ?? 10) });
