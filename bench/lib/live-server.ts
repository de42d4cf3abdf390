/**
 * A LiveFeed server under test for the fan-out benchmark, in its own process. `trailwire` serves the
 * real LiveFeed (core live hub + gRPC adapter); `bare` is a plain @grpc/grpc-js server that streams
 * the same pre-encoded messages to the same subscribers (the transport's own ceiling). Both publish
 * `rate` updates per second spread over `customers` customers, each message carrying its creation
 * time (`ts`) so clients measure publish-to-receive latency.
 *
 * Protocol on stdio: prints `{port, tokens}` when ready; `publish <seconds>` starts publishing and
 * answers `{published, rssBefore, rssIdle}` when done; `rss` answers the current RSS.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import * as grpc from '@grpc/grpc-js';
import { startGrpcServer } from '../../adapters/grpc/grpc-server.ts';
import { HEARTBEAT_MESSAGE, liveUpdateResponseOf } from '../../adapters/grpc/live-update-message.ts';
import { encodeLiveUpdateResponse, liveFeedServiceDefinition } from '../../adapters/grpc/proto.ts';
import { openSqliteStore } from '../../adapters/sqlite/index.ts';
import type { LiveTrailerEvent } from '../../core/live-hub.ts';
import type { Trailer } from '../../core/model.ts';
import { createTrailwire } from '../../core/trailwire.ts';

const [mode, customersArg] = process.argv.slice(2);
const customers = Number(customersArg);
const rssBefore = process.memoryUsage().rss;

const trailwire = await createTrailwire({ store: await openSqliteStore({ file: join(mkdtempSync(join(tmpdir(), 'trailwire-live-bench-')), 'b.db') }) });
const customerIds: string[] = [];
const tokens: string[] = [];
for (let i = 0; i < customers; i++) {
  const { principal } = await trailwire.auth.createCustomer({ name: `Customer ${i}` });
  customerIds.push(principal.id);
  tokens.push(trailwire.tokens.mint(principal).accessToken);
}

function eventFor(customer: number, seq: number): LiveTrailerEvent {
  const trailer: Trailer = {
    id: `trailer-${customer}-${seq % 50}`,
    fleetId: customer + 1,
    unitId: `TR-${seq % 50}`,
    vin: '1HGCM82633A004352',
    active: true,
    statusName: 'OK',
    statusDate: Date.now(),
    faultedDevices: 0,
    warningDevices: 0,
    telemetry: { timestamp: Date.now(), lat: 41.88, long: -87.63, speed: 55.5, heading: 'NE' },
    createdAt: 0,
  };
  return { customerId: customerIds[customer]!, fleet: { id: customer + 1, name: `Fleet ${customer}` }, trailer, ts: Date.now() };
}

let publish: (customer: number, seq: number) => void;
let port: number;
if (mode === 'trailwire') {
  const server = await startGrpcServer({ port: 0, host: '127.0.0.1', tokens: trailwire.tokens, hub: trailwire.live, heartbeatIntervalMs: 15_000 });
  port = server.port;
  publish = (customer, seq) => void trailwire.live.publish(eventFor(customer, seq));
} else {
  // The bare server: the same bytes to the same streams, no auth, no hub, no back-pressure policy.
  const HEARTBEAT_BYTES = encodeLiveUpdateResponse(HEARTBEAT_MESSAGE);
  const streams = new Map<string, grpc.ServerWritableStream<unknown, Buffer>[]>();
  const server = new grpc.Server();
  server.addService(liveFeedServiceDefinition, {
    Subscribe: (call: grpc.ServerWritableStream<unknown, Buffer>) => {
      const token = String(call.metadata.get('authorization')[0] ?? '').replace(/^Bearer /, '');
      const customerId = customerIds[tokens.indexOf(token)]!;
      const list = streams.get(customerId) ?? [];
      list.push(call);
      streams.set(customerId, list);
      call.on('cancelled', () => list.splice(list.indexOf(call), 1));
      call.write(HEARTBEAT_BYTES);
    },
  });
  port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  publish = (customer, seq) => {
    const bytes = encodeLiveUpdateResponse(liveUpdateResponseOf(eventFor(customer, seq)));
    for (const call of streams.get(customerIds[customer]!) ?? []) call.write(bytes);
  };
}

console.log(JSON.stringify({ port, tokens }));
for await (const line of createInterface({ input: process.stdin })) {
  const [command, ...args] = line.split(' ');
  if (command === 'rss') console.log(JSON.stringify({ rss: process.memoryUsage().rss, rssBefore }));
  if (command === 'publish') {
    const [seconds, rate] = args.map(Number) as [number, number];
    const rssIdle = process.memoryUsage().rss;
    let published = 0;
    const started = performance.now();
    // Publish in 10 ms ticks, spreading updates round-robin over the customers.
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        const due = Math.floor(((performance.now() - started) / 1000) * rate);
        while (published < due) {
          publish(published % customers, Math.floor(published / customers));
          published++;
        }
        if (performance.now() - started >= seconds * 1000) {
          clearInterval(timer);
          resolve();
        }
      }, 10);
    });
    console.log(JSON.stringify({ published, rssIdle, rssAfter: process.memoryUsage().rss }));
  }
}
