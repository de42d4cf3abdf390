/**
 * The reconnecting customer of the live storm bench, in its own process: opens
 * `GET /api/v1/live?snapshot=true` `rate` times a second for `seconds`, reads each stream to its
 * `snapshot-end` (or takes its refusal) and closes it. Arguments: `<url> <token> <rate> <seconds>`.
 * Prints `ready` once loaded, starts when it reads `go` on stdin, and prints
 * `{served, refused, failed, firstFailure, bytes}` when done.
 *
 * It reads with node:http and looks for the `snapshot-end` marker in the raw bytes, never decoding
 * them: a client that turned 100 snapshots a second (87 MB/s) into strings, as `fetch` and
 * `toString` did in the first runs, took a core of the shared machine and starved itself (10 s
 * connect time-outs) and the prober.
 */
import { once } from 'node:events';
import { Agent, request } from 'node:http';
import { createInterface } from 'node:readline';

const [url, token, rateArg, secondsArg] = process.argv.slice(2);
const rate = Number(rateArg);
const seconds = Number(secondsArg);
const counts = { served: 0, refused: 0, failed: 0, bytes: 0, firstFailure: '' };
const MARKER = Buffer.from('event: snapshot-end');
// A connection per stream, as reconnecting clients open them.
const agent = new Agent({ keepAlive: false, maxSockets: Infinity });

function connect(): Promise<void> {
  return new Promise((resolve) => {
    let settled = false;
    const settle = (outcome: 'served' | 'refused' | Error) => {
      if (settled) return;
      settled = true;
      if (outcome instanceof Error) {
        counts.failed++;
        counts.firstFailure ||= outcome.message;
      } else counts[outcome]++;
      req.destroy();
      resolve();
    };
    const req = request(`${url}/api/v1/live?snapshot=true`, { agent, headers: { authorization: `Bearer ${token}` }, timeout: 10_000 }, (res) => {
      if (res.statusCode === 429) {
        res.resume();
        res.on('end', () => settle('refused'));
        return;
      }
      if (res.statusCode !== 200) return settle(new Error(`status ${res.statusCode}`));
      // The marker may straddle two chunks: the last bytes of one are searched with the first of the next.
      let tail: Buffer = Buffer.alloc(0);
      res.on('data', (chunk: Buffer) => {
        counts.bytes += chunk.length;
        if (chunk.includes(MARKER) || Buffer.concat([tail, chunk.subarray(0, MARKER.length - 1)]).includes(MARKER)) return settle('served');
        tail = chunk.subarray(-(MARKER.length - 1));
      });
      res.on('end', () => settle(new Error('the stream ended before its snapshot-end')));
      res.on('error', (error) => settle(error));
    });
    req.on('timeout', () => settle(new Error('timed out (10 s without a byte)')));
    req.on('error', (error) => settle(error));
    req.end();
  });
}

const input = createInterface({ input: process.stdin });
console.log('ready');
await once(input, 'line');
input.close();
const started = performance.now();
const pending: Promise<void>[] = [];
for (let i = 0; i < rate * seconds; i++) {
  const due = started + (i * 1000) / rate;
  const wait = due - performance.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  pending.push(connect());
}
await Promise.all(pending);
console.log(JSON.stringify(counts));
process.exit(0);
