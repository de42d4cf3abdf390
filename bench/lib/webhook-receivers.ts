/**
 * The webhook receivers of `bench/webhooks.ts`, in a process of their own so that receiving does not
 * share the load generator's event loop. One HTTP server on 127.0.0.1 answers every delivery 204 at
 * once; the path says whose it is: `/<group>/<endpoint>`. Deliveries to a group whose name starts
 * with `latency` are read whole, and each event's arrival is kept by VIN and fix time (the wall
 * clock, `performance.timeOrigin + performance.now()`, which the load generator's process reads the
 * same way); other groups' events are only counted.
 *
 * Prints `{"port"}` when ready. Each stdin line is a command answered by one JSON line:
 * `counts` → `{ groups: { <group>: { deliveries, events } } }`; `arrivals <group>` → `{ arrivals:
 * [[key, ms], ...], duplicates }` (the first arrival of each `VIN|timestamp`; later ones counted).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';

interface Group {
  deliveries: number;
  events: number;
  arrivals: Map<string, number>;
  duplicates: number;
}

const groups = new Map<string, Group>();
const groupOf = (name: string): Group => {
  let group = groups.get(name);
  if (!group) groups.set(name, (group = { deliveries: 0, events: 0, arrivals: new Map(), duplicates: 0 }));
  return group;
};
const EVENT_MARK = '{"type":"trailer.';

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const at = performance.timeOrigin + performance.now();
    res.statusCode = 204;
    res.end();
    const name = (req.url ?? '/').split('/')[1] ?? '';
    const group = groupOf(name);
    const body = Buffer.concat(chunks).toString('utf8');
    group.deliveries++;
    if (!name.startsWith('latency')) {
      for (let index = body.indexOf(EVENT_MARK); index >= 0; index = body.indexOf(EVENT_MARK, index + 1)) group.events++;
      return;
    }
    const { events } = JSON.parse(body) as { events: Array<{ type: string; data: { vin: string; telemetry: { timestamp: string } | null } }> };
    for (const event of events) {
      group.events++;
      if (event.type !== 'trailer.updated' || event.data.telemetry === null) continue;
      const key = `${event.data.vin}|${event.data.telemetry.timestamp}`;
      if (group.arrivals.has(key)) group.duplicates++;
      else group.arrivals.set(key, at);
    }
  });
});
// The sender keeps connections alive; so does this side, past the sender's idle time.
server.keepAliveTimeout = 120_000;
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
console.log(JSON.stringify({ port: (server.address() as AddressInfo).port }));

for await (const line of createInterface({ input: process.stdin })) {
  const [command, argument] = line.trim().split(' ');
  if (command === 'counts')
    console.log(JSON.stringify({ groups: Object.fromEntries([...groups].map(([name, group]) => [name, { deliveries: group.deliveries, events: group.events }])) }));
  else if (command === 'arrivals') {
    const group = groupOf(argument ?? '');
    console.log(JSON.stringify({ arrivals: [...group.arrivals], duplicates: group.duplicates }));
  } else console.log(JSON.stringify({ error: `unknown command ${command}` }));
}
server.closeAllConnections();
server.close();
