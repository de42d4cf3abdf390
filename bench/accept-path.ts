/**
 * Accept-path benchmark: the CPU per 202 of Trailwire's whole HTTP stack and core accept path,
 * beside bare Koa + @koa/router reading the same JSON body, in the same run. Each server runs in its
 * own process with its own load (`lib/accept-server.ts`); Trailwire's intake queue there keeps
 * nothing, so the difference to Koa is the HTTP thread's own work per 202 — what the `intake`
 * benchmark's `main µs/202` holds besides the hand-over to storage — measured without storage,
 * processing or a second thread sharing the cores, steady enough (about ±1 µs) to tell a change of a
 * microsecond. Both figures include the same in-process client; the difference is Trailwire's.
 *
 * On a shared machine whose speed drifts by tens of per cent from one minute to the next, CPU time
 * cannot tell a change of a few per cent. Where valgrind is installed, the bench also counts the
 * instructions each server executes per 202 under callgrind, from the end of its warm-up to its
 * exit: the same figure from run to run to about 1 % (V8's `--predictable`: no background compiler
 * or GC threads, whose timing would change what runs when). The two servers are counted side by side
 * (a count does not depend on the machine's load); each takes a few minutes at callgrind's speed.
 * Instructions leave out the kernel's side (the socket writes), which both pay alike.
 * Run alone with `npm run bench -- accept-path`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
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
  /** Requests counted per server under callgrind, after as many of warm-up. Default 6,000; 0 leaves the count out. */
  countedRequests?: number;
  /**
   * VINs of the fleet under callgrind. Default a third of `countedRequests`, so that its warm-up has
   * sent to every VIN before the count begins: the count is then the steady state of a fleet that
   * reports (each VIN's owner cached, its windows open), not the first payload of each VIN, which
   * costs one store read and a new-VIN count once per VIN and process.
   */
  countedFleet?: number;
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

/** Whether callgrind can be run here (`apt-get install valgrind`). */
function hasCallgrind(): boolean {
  return spawnSync('callgrind_control', ['--version'], { stdio: 'ignore' }).status === 0;
}

/**
 * Instructions per 202 of one server under callgrind: counted from the end of its warm-up (the
 * counters are zeroed then) to its exit, over `requests` measured requests.
 */
async function countInstructions(mode: string, requests: number, connections: number, pipelined: number, fleet: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'trailwire-bench-callgrind-'));
  const outFile = join(dir, 'callgrind.out');
  try {
    const child = spawn(
      'valgrind',
      ['--tool=callgrind', `--callgrind-out-file=${outFile}`, '--smc-check=all-non-file', process.execPath, ...SERVER_NODE_FLAGS, '--predictable', '--import', 'tsx', SERVER, mode, String(requests), String(connections), String(pipelined), String(fleet)],
      { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, TRAILWIRE_BENCH_PAUSE_AFTER_WARMUP: '1' } },
    );
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const exited = once(child, 'exit');
    const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
    const { value: first } = await lines.next();
    if (first !== 'warm') throw new Error(`${mode} under callgrind did not warm up: ${stderr.slice(-500)}`);
    // valgrind's own lines name the process it runs (the launcher script execs it under another pid).
    const pid = /^==(\d+)==/m.exec(stderr)?.[1];
    if (pid === undefined || spawnSync('callgrind_control', ['--zero', pid], { stdio: 'ignore' }).status !== 0)
      throw new Error(`${mode}: could not zero callgrind's counters`);
    child.stdin!.end('go\n');
    const [code] = await exited;
    if (code !== 0) throw new Error(`${mode} under callgrind exited with code ${code}: ${stderr.slice(-500)}`);
    const totals = /^(?:summary|totals): (\d+)/m.exec(readFileSync(outFile, 'utf8'))?.[1];
    if (totals === undefined) throw new Error(`${mode}: no totals in callgrind's output`);
    return Number(totals) / requests;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
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
  const counted = options.countedRequests ?? 6_000;
  const callgrind = counted > 0 && hasCallgrind();
  if (callgrind) {
    // After the CPU runs, so that they had the machine to themselves.
    const fleet = options.countedFleet ?? Math.max(1, Math.floor(counted / 3));
    const counts = await Promise.all(MODES.map((mode) => countInstructions(mode, counted, connections, pipelined, fleet)));
    MODES.forEach((mode, i) => {
      const row = rows.find((candidate) => candidate.server === mode)!;
      row['instructions/202'] = Math.round(counts[i]!);
      row['x koa (instructions)'] = round(counts[i]! / counts[0]!, 2);
    });
  }
  printTable(
    `Accept path: ${requests.toLocaleString('en-US')} intake requests per server after as many of warm-up, ${connections} connections, ${pipelined} pipelined, client in the server's process`,
    rows,
  );
  if (!callgrind && counted > 0) console.log('instructions per 202: not counted (valgrind is not installed: apt-get install valgrind)');
  console.log(`results: ${writeResults('accept-path', { requests, connections, pipelined, countedRequests: callgrind ? counted : 0, rows })}`);
  return { rows };
}

if (import.meta.url === `file://${process.argv[1]}`) await runAcceptPathBench();
