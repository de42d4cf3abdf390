/**
 * The attacker of issue 29, finding 2: one partner sending invalid ~250 KB bodies (24,000 unknown
 * keys) to intake on many connections at once, each sending the next as soon as the last is
 * answered. Run as a process of its own, so that its event loop is neither the server's nor that of
 * the client measuring `/healthz` (`bench/flood.ts`, `test/adapters/server/invalid-body-flood.test.ts`):
 *
 *   node --import tsx bench/lib/body-flood.ts <server URL> <partner token> <milliseconds> <connections>
 *
 * It prints `flooding` as it starts, then one JSON line: the answers by status, the requests that
 * failed without one, its own CPU.
 */
import { Agent, request } from 'node:http';
import { spawn } from 'node:child_process';
import { benchVins } from './gps-load.ts';

/** A body like the attacker's: one object of 24,000 unknown keys, ~250 KB (under the 256 KiB limit). */
export function hostileBody(): Buffer {
  const fields: string[] = [];
  for (let i = 0; i < 24_000; i++) fields.push(`"k${i.toString(36).padStart(4, '0')}":1`);
  return Buffer.from(`{${fields.join(',')}}`);
}

export interface FloodResult {
  statuses: Record<string, number>;
  /** Requests that ended without an answer (a reset connection). */
  failed: number;
  /** The flooder's own CPU time over the flood, in ms. */
  cpuMs: number;
}

/** Floods intake for `durationMs` on `connections` keep-alive connections (a closed one is reopened). */
export async function flood(url: URL, token: string, durationMs: number, connections: number): Promise<FloodResult> {
  const body = hostileBody();
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const path = `/api/v1/telemetry/intake/${benchVins(1, '1FLOD')[0]}`;
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': body.length };
  const statuses: Record<string, number> = {};
  let failed = 0;
  const send = () =>
    new Promise<void>((resolve) => {
      const req = request({ agent, host: url.hostname, port: url.port, method: 'POST', path, headers }, (res) => {
        res.resume();
        res.on('end', () => {
          statuses[res.statusCode!] = (statuses[res.statusCode!] ?? 0) + 1;
          resolve();
        });
      });
      // A refused body the server did not read may reset the connection under the client's write.
      req.on('error', () => {
        failed++;
        resolve();
      });
      req.end(body);
    });
  const cpuBefore = process.cpuUsage();
  const deadline = performance.now() + durationMs;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() < deadline) await send();
    }),
  );
  const cpu = process.cpuUsage(cpuBefore);
  agent.destroy();
  return { statuses, failed, cpuMs: (cpu.user + cpu.system) / 1000 };
}

/**
 * Runs `flood` in a process of its own (this file as a script): `started` resolves when its first
 * requests go out (the process takes a second to start), `result` when the flood is over.
 */
export function floodFromAnotherProcess(url: URL, token: string, durationMs: number, connections: number): { started: Promise<void>; result: Promise<FloodResult> } {
  const child = spawn(process.execPath, ['--import', 'tsx', new URL(import.meta.url).pathname, url.href, token, String(durationMs), String(connections)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  let markStarted: () => void;
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
    if (output.includes('\n')) markStarted();
  });
  const result = new Promise<FloodResult>((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => {
      const lines = output.trim().split('\n');
      if (code === 0 && lines.length === 2) resolve(JSON.parse(lines[1]!) as FloodResult);
      else reject(new Error(`the flood process exited with code ${code}: ${output}`));
    });
  });
  return { started, result };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [url, token, durationMs, connections] = process.argv.slice(2);
  if (!url || !token || !durationMs || !connections) throw new Error('usage: body-flood.ts <url> <token> <milliseconds> <connections>');
  process.stdout.write('flooding\n');
  const result = await flood(new URL(url), token, Number(durationMs), Number(connections));
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
