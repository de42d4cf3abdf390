/**
 * The other tenant of the live storm bench, in a process of its own (neither the bench's nor the
 * storm client's), so that its latencies are the server's and the machine's, not a busy event loop's
 * of its own. Arguments: `<url> <milliseconds>`. Prints `ready` once loaded, starts probing
 * `/healthz` every 10 ms when it reads `go` on stdin, and prints the latencies in ms (sorted) when done.
 */
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { probeHealthzUntil } from './healthz-probe.ts';

const [url, msArg] = process.argv.slice(2);
const input = createInterface({ input: process.stdin });
console.log('ready');
await once(input, 'line');
input.close();
console.log(JSON.stringify(await probeHealthzUntil(new URL(url!), performance.now() + Number(msArg))));
process.exit(0);
