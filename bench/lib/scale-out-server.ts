/**
 * A Trailwire server under test for the scale-out benchmark, run in its own process. Its one
 * argument is a JSON `ScaleOutServerConfig`: the real service (`startServer`) either on a SQLite file
 * (processing in its thread, the default) or on a PostgreSQL schema + a Redis key prefix (and, with
 * `intakeLog`, a JetStream stream), which several of these processes can share. gps-basic's per-VIN limit is raised so that the limiter never
 * answers 429 during the run. The process told to `provision` creates the bench partner and
 * authenticates it; the others serve the same fleet and accept its token.
 *
 * Prints one JSON line `{url, token}` when ready (`token` only when provisioning). Then answers each
 * line on stdin with one JSON line of `QueueState`: `state` as it is, `reset` after forgetting the
 * deepest queue seen so far. When stdin ends it closes the server and exits.
 */
import { createInterface } from 'node:readline';
import { pino } from 'pino';
import { startServer } from '../../dist/adapters/server/index.js';

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
}

const config = JSON.parse(process.argv[2] ?? '{}') as ScaleOutServerConfig;
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
  return { depth, maxDepth, ...server.intakeCounts, cpuMicros: cpu.user + cpu.system };
};

console.log(JSON.stringify({ url: server.url, token }));
for await (const command of createInterface({ input: process.stdin })) {
  if (command === 'reset') maxDepth = 0;
  console.log(JSON.stringify(await state()));
}
clearInterval(sampler);
await server.close();
process.exit(0);
