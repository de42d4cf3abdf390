/**
 * A Trailwire server under test for the scale-out benchmark, run in its own process. Its one
 * argument is a JSON `ScaleOutServerConfig`: the real service (`startServer`) either on a SQLite file
 * (processing in its thread, the default) or on a PostgreSQL schema + a Redis key prefix (and, with
 * `intakeLog`, a JetStream stream), which several of these processes can share. gps-basic's per-VIN limit is raised so that the limiter never
 * answers 429 during the run. The process told to `provision` creates the bench partner and
 * authenticates it, and registers the fleet's trailers when the fleet has `registered` ones (in
 * customers that each granted the partner, the usual case of contract 4); the others serve the same
 * fleet and accept its token.
 *
 * It counts its own round trips to PostgreSQL (queries, by statement name) and Redis (commands, by
 * name) since the last `reset`, so that the bench can tell what a request costs each service
 * whatever else shares them (other schemas and prefixes count in the services' own statistics).
 *
 * Prints one JSON line `{url, token}` when ready (`token` only when provisioning). Then answers each
 * line on stdin with one JSON line of `QueueState`: `state` as it is, `reset` after forgetting the
 * deepest queue seen so far. When stdin ends it closes the server and exits.
 */
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import pg from 'pg';
import { pino } from 'pino';
import { startServer } from '../../dist/adapters/server/index.js';
import { benchVins } from './gps-load.ts';
import { preemptionsOfThisThread } from './service-cpu.ts';

export interface ScaleOutServerConfig {
  /** SQLite file (without `databaseUrl`). */
  db?: string;
  databaseUrl?: string;
  databaseSchema?: string;
  redisUrl?: string;
  redisKeyPrefix?: string;
  /** A `nats://` URL: the intake log on JetStream (with `databaseUrl`). */
  intakeLog?: string;
  /** Create the bench partner and print its token. Exactly one process of a setup does. */
  provision: boolean;
  /**
   * With `provision`: register `count` trailers (`benchVins(count, prefix)`) before answering, in
   * customers of `perCustomer` trailers each, one fleet each, every customer granting the partner.
   */
  registered?: { count: number; prefix: string; perCustomer: number };
}

/** Round trips of this process since start or the last `reset`, by statement (PostgreSQL) or command (Redis) name. */
export interface RoundTrips {
  postgres: Record<string, number>;
  redis: Record<string, number>;
}

/** What a server answers on stdin: the shared queue's depth, and what this process processed since it started. */
export interface QueueState {
  depth: number;
  /** Deepest queue sampled (every 100 ms) since start or the last `reset`. */
  maxDepth: number;
  processed: number;
  failed: number;
  /** CPU time this process has used since it started (user + system), in µs: its cost per payload. */
  cpuMicros: number;
  /** Time its event loop has spent running callbacks, and waiting for them, since it started, in ms (`performance.eventLoopUtilization`). */
  loopActiveMs: number;
  loopIdleMs: number;
  /** Times its event loop's thread was preempted since it started (`preemptionsOfThisThread`; 0 where unknown). */
  preemptions: number;
  roundTrips: RoundTrips;
}

const config = JSON.parse(process.argv[2] ?? '{}') as ScaleOutServerConfig;

// Counted where every query and command of this process passes (the store's pool, the intake
// queue's session, the Redis clients), patched before the server opens any of them.
let roundTrips: RoundTrips = { postgres: {}, redis: {} };
const count = (counts: Record<string, number>, name: string) => (counts[name] = (counts[name] ?? 0) + 1);
const pgQuery = pg.Client.prototype.query as (...args: unknown[]) => unknown;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  const [first] = args;
  const name = typeof first === 'string' ? first : ((first as { name?: string; text?: string })?.name ?? (first as { text?: string })?.text ?? '?');
  count(roundTrips.postgres, name.slice(0, 60));
  return pgQuery.apply(this, args);
} as typeof pg.Client.prototype.query;
type SendCommand = (command: { name: string }, ...rest: unknown[]) => unknown;
const redisProto = Redis.prototype as unknown as { sendCommand: SendCommand };
const redisSend = redisProto.sendCommand;
redisProto.sendCommand = function (this: Redis, command, ...rest) {
  count(roundTrips.redis, command.name);
  return redisSend.call(this, command, ...rest);
};
const server = await startServer({
  db: config.db,
  databaseUrl: config.databaseUrl,
  databaseSchema: config.databaseSchema,
  redisUrl: config.redisUrl,
  redisKeyPrefix: config.redisKeyPrefix,
  intakeLog: config.intakeLog,
  port: 0,
  grpcPort: 0,
  host: '127.0.0.1',
  logger: pino({ level: 'warn' }, pino.destination(2)),
  // The bench measures intake, not the limiter: gps-basic's per-VIN limit and the partner's budget are raised.
  core: {
    productLimits: { 'gps-basic': { requests: 1_000_000_000, windowSeconds: 60 } },
    partnerIntake: { budget: { requests: 1_000_000_000, windowSeconds: 60 }, newVinsPerDay: 1_000_000_000 },
  },
});
const { trailwire } = server;
let token: string | undefined;
if (config.provision) {
  const partner = await trailwire.auth.createPartner({ name: 'Bench', product: 'gps-basic' });
  token = (await trailwire.auth.authenticate('partners', partner.apiKey, 'bench')).token.accessToken;
  if (config.registered) {
    await registerFleet(partner.principal.id, config.registered);
    // Steady state: the registrations' 20,000 notes in the change feed are read before the load, not during it.
    await trailwire.operatorChanges.poll();
  }
}

/** Registers the fleet's trailers as an operator would, a customer (with its grant to the partner) at a time. */
async function registerFleet(partnerId: string, fleet: NonNullable<ScaleOutServerConfig['registered']>): Promise<void> {
  const vins = benchVins(fleet.count, fleet.prefix);
  for (let first = 0; first < vins.length; first += fleet.perCustomer) {
    const customer = await trailwire.auth.createCustomer({ name: `Bench customer ${first / fleet.perCustomer}` });
    const { id: fleetId } = await trailwire.admin.createFleet({ customerId: customer.principal.id, name: 'Bench fleet' });
    await trailwire.admin.addGrant({ customerId: customer.principal.id, partnerId });
    // A customer's trailers side by side: the store's pool, not one round trip at a time, is the pace.
    await Promise.all(vins.slice(first, first + fleet.perCustomer).map((vin) => trailwire.admin.registerTrailer({ fleetId, vin })));
  }
}
const queue = trailwire.intake!.queue;
let maxDepth = 0;
const sampler = setInterval(() => {
  void queue.depth().then((depth) => (maxDepth = Math.max(maxDepth, depth)));
}, 100);
const state = async (): Promise<QueueState> => {
  const depth = await queue.depth();
  maxDepth = Math.max(maxDepth, depth);
  const cpu = process.cpuUsage();
  const loop = performance.eventLoopUtilization();
  return {
    depth,
    maxDepth,
    ...server.intakeCounts,
    cpuMicros: cpu.user + cpu.system,
    loopActiveMs: loop.active,
    loopIdleMs: loop.idle,
    preemptions: preemptionsOfThisThread() ?? 0,
    roundTrips,
  };
};

console.log(JSON.stringify({ url: server.url, token }));
for await (const command of createInterface({ input: process.stdin })) {
  if (command === 'reset') {
    maxDepth = 0;
    roundTrips = { postgres: {}, redis: {} };
  }
  console.log(JSON.stringify(await state()));
}
clearInterval(sampler);
await server.close();
process.exit(0);
