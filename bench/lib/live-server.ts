/**
 * A LiveFeed server under test for the fan-out benchmark, in its own process. `trailwire` is the
 * real standalone server (`startServer`: HTTP intake, durable SQLite queue, intake worker, live hub,
 * gRPC LiveFeed) whose updates come from partner payloads the benchmark POSTs to the intake; `bare`
 * is a plain @grpc/grpc-js server that streams the same kind of pre-encoded message to the same
 * subscribers (the transport's own ceiling), publishing in-process. Every customer has one fleet of
 * `trailersPerCustomer` trailers; `ts` of every update is when it was created, so clients can
 * measure publish-to-receive latency.
 *
 * Arguments: `<mode> <customers> <trailersPerCustomer> <maxStreamsPerCustomer>`.
 * Protocol on stdio: prints `{port, url, partnerToken, tokens, vins}` when ready (`vins[c]` are the
 * VINs of customer c); `rss` answers `{rss, cpuUs}` (the process's CPU time so far); `publish <seconds> <rate>` publishes `rate` updates
 * per second spread round-robin over the customers and answers `{published, startedAt}` (bare: the
 * same bytes written to each stream; trailwire: through the live hub, `trailwire.live.publish`, as
 * the intake worker does — the saturation and reconnect-storm runs measure the fan-out, not the
 * intake); `pace <rate>` starts publishing in the background and answers `{started}`, `pace 0`
 * stops it and answers `{published}`; `stats` answers the live hub's counters and the event-loop
 * delay since the last `rss`; `close` stops.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import * as grpc from '@grpc/grpc-js';
import { pino } from 'pino';
import { HEARTBEAT_MESSAGE, liveUpdateResponseOf } from '../../dist/adapters/grpc/live-feed-service.js';
import { encodeLiveUpdateResponse, liveFeedServiceDefinition } from '../../dist/adapters/grpc/proto.js';
import { startServer } from '../../dist/adapters/server/index.js';
import { openSqliteStore } from '../../dist/adapters/sqlite/index.js';
import type { LiveTrailerEvent } from '../../dist/core/live-bus.js';
import type { Trailer } from '../../dist/core/model.js';
import { createTrailwire } from '../../dist/core/trailwire.js';
import { withCheckDigit } from '../../dist/core/vin.js';
import { builtInProducts } from '../../dist/products/index.js';

const [mode, customersArg, trailersArg, streamsArg] = process.argv.slice(2);
const customers = Number(customersArg);
const trailersPerCustomer = Number(trailersArg);
// The per-customer stream cap is configured to what the run measures (every subscriber of a
// customer admitted): left at its default of 100, run (b)'s 1,000 subscribers of one customer were
// 900 refusals, and the bench waited forever for their first heartbeat.
const maxStreamsPerCustomer = Number(streamsArg);
if (!Number.isInteger(maxStreamsPerCustomer) || maxStreamsPerCustomer < 1) throw new Error(`live-server: streams per customer must be a positive integer, got ${streamsArg}`);
if (mode !== 'trailwire' && mode !== 'bare') throw new Error(`unknown mode ${mode}`);

// The data set and the tokens are made first, over the file the server then opens: the server
// starts as an operator's would, on an existing database. Both modes run the real server; the bare
// one just does not serve its LiveFeed (it listens on an ephemeral port nobody calls).
const dir = mkdtempSync(join(tmpdir(), 'trailwire-live-bench-'));
const file = join(dir, 'bench.db');
const setup = await createTrailwire({ store: await openSqliteStore({ file }), products: builtInProducts });
const tokens: string[] = [];
const vins: string[][] = [];
const trailers: Trailer[][] = [];
const fleets: Array<{ id: number; name: string; customerId: string }> = [];
for (let c = 0; c < customers; c++) {
  const { principal } = await setup.auth.createCustomer({ name: `Customer ${c}` });
  tokens.push(setup.tokens.mint(principal).accessToken);
  const fleet = await setup.admin.createFleet({ customerId: principal.id, name: `Fleet ${c}` });
  fleets.push({ id: fleet.id, name: fleet.name, customerId: principal.id });
  vins.push([]);
  trailers.push([]);
  for (let t = 0; t < trailersPerCustomer; t++) {
    const vin = withCheckDigit(`1BNLF${String(c).padStart(3, '0')}0A${String(t).padStart(7, '0')}`);
    vins[c]!.push(vin);
    trailers[c]!.push(await setup.admin.registerTrailer({ fleetId: fleet.id, vin, unitId: `TR-${t}` }));
  }
}
const partner = await setup.auth.createPartner({ name: 'Bench tracker', product: 'gps-basic' });
const partnerToken = (await setup.auth.authenticate('partners', partner.apiKey, 'bench')).token.accessToken;
await setup.close();

const server = await startServer({ db: file, port: 0, grpcPort: 0, host: '127.0.0.1', maxStreamsPerCustomer, logger: pino({ level: 'silent' }) });
const { trailwire } = server;

let port = server.grpcPort;

/** The update a gps-basic fix of the trailer leaves: what the worker would publish for it. */
function eventOf(customer: number, seq: number): LiveTrailerEvent {
  const fleet = fleets[customer]!;
  const now = Date.now();
  const trailer: Trailer = {
    ...trailers[customer]![seq % trailersPerCustomer]!,
    statusDate: now,
    telemetry: { timestamp: now, lat: 41.88, long: -87.63, speed: 55.3, heading: 'W' },
  };
  return { customerId: fleet.customerId, fleet: { id: fleet.id, name: fleet.name }, trailer, ts: now };
}

// Trailwire: through the hub (positions, the replay window, back-pressure, one encoding per event).
let publish: (customer: number, seq: number) => void = (customer, seq) => void trailwire.live.publish(eventOf(customer, seq));
if (mode === 'bare') {
  // The same bytes to the same streams, no auth, no hub, no back-pressure policy.
  const heartbeat = encodeLiveUpdateResponse(HEARTBEAT_MESSAGE);
  const streams = new Map<string, grpc.ServerWritableStream<unknown, Buffer>[]>();
  const bare = new grpc.Server();
  bare.addService(liveFeedServiceDefinition, {
    Subscribe: (call: grpc.ServerWritableStream<unknown, Buffer>) => {
      const token = String(call.metadata.get('authorization')[0] ?? '').replace(/^Bearer /, '');
      const customerId = fleets[tokens.indexOf(token)]!.customerId;
      const list = streams.get(customerId) ?? [];
      list.push(call);
      streams.set(customerId, list);
      call.on('cancelled', () => list.splice(list.indexOf(call), 1));
      call.write(heartbeat);
    },
  });
  port = await new Promise<number>((resolve, reject) =>
    bare.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  publish = (customer, seq) => {
    const event = eventOf(customer, seq);
    const bytes = encodeLiveUpdateResponse(liveUpdateResponseOf(event));
    for (const call of streams.get(event.customerId) ?? []) call.write(bytes);
  };
}

/** Publishes `rate` updates a second in 10 ms ticks, round-robin over the customers, until stopped. */
function startPacing(rate: number) {
  let published = 0;
  const started = performance.now();
  const timer = setInterval(() => {
    const due = Math.floor(((performance.now() - started) / 1000) * rate);
    while (published < due) {
      publish(published % customers, Math.floor(published / customers));
      published++;
    }
  }, 10);
  return {
    stop() {
      clearInterval(timer);
      return published;
    },
  };
}
let pacing: ReturnType<typeof startPacing> | undefined;

// Event-loop delay under load (reset by `rss`, read by `stats`): what stalls every stream at once.
const loopDelay = monitorEventLoopDelay({ resolution: 5 });
loopDelay.enable();
console.log(JSON.stringify({ port, url: server.url, partnerToken, tokens, vins }));
for await (const line of createInterface({ input: process.stdin })) {
  const [command, ...args] = line.split(' ');
  if (command === 'rss') {
    const cpu = process.cpuUsage();
    console.log(JSON.stringify({ rss: process.memoryUsage().rss, cpuUs: cpu.user + cpu.system }));
    loopDelay.reset();
  }
  if (command === 'stats') {
    const ms = (ns: number) => Math.round(ns / 1e4) / 100;
    console.log(JSON.stringify({ hub: trailwire.live.stats(), loopDelayMs: { p50: ms(loopDelay.percentile(50)), p99: ms(loopDelay.percentile(99)), max: ms(loopDelay.max) } }));
  }
  if (command === 'pace') {
    const rate = Number(args[0]);
    const published = pacing?.stop() ?? 0;
    pacing = rate > 0 ? startPacing(rate) : undefined;
    console.log(JSON.stringify(rate > 0 ? { started: performance.timeOrigin + performance.now() } : { published }));
  }
  if (command === 'publish') {
    const [seconds, rate] = args.map(Number) as [number, number];
    const emit = publish;
    let published = 0;
    const startedAt = performance.timeOrigin + performance.now();
    const started = performance.now();
    // Publish in 10 ms ticks, spreading updates round-robin over the customers.
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        const due = Math.floor(((performance.now() - started) / 1000) * rate);
        while (published < due) {
          emit(published % customers, Math.floor(published / customers));
          published++;
        }
        if (performance.now() - started >= seconds * 1000) {
          clearInterval(timer);
          resolve();
        }
      }, 10);
    });
    console.log(JSON.stringify({ published, startedAt }));
  }
  if (command === 'close') {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  }
}
