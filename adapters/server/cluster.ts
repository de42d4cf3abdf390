/**
 * Several server processes on one machine, so that the service uses all of its cores (`trailwire
 * serve --workers N`): the primary process forks N workers with `node:cluster`, each of which runs
 * `startServer` on the same PostgreSQL database and Redis (contract 11). The workers share the HTTP
 * and the gRPC port through cluster's listen handoff: the primary owns each listening socket and
 * hands accepted connections to the workers in turn (round-robin; a LiveFeed stream stays on the
 * worker its HTTP/2 connection went to). A worker's `listen(0)` gets the same port in every worker,
 * provided each listens in the same order, which `startServer` does (HTTP first, then gRPC).
 *
 * The primary opens no store and serves nothing itself. It waits until every worker reports that it
 * listens (or one fails, which stops the others: a configuration that cannot start is not retried),
 * forwards SIGTERM/SIGINT so every worker shuts down gracefully, and logs each worker that exits.
 * Once serving, a worker that exits unexpectedly (a crash, an OOM kill, `kill -9`) is replaced, as a
 * cluster manager would: after 1 s, doubling with every crash that follows a short life (under
 * `respawn.stableAfterMs`), up to `respawn.maxDelayMs` (30 s) — so a crash loop costs one fork per
 * 30 s, not a spinning CPU, and every crash is logged at `error` with the delay before its
 * replacement. The payloads a crashed worker acknowledged are safe in PostgreSQL, where the others
 * take them over. A deliberate shutdown (`stop`, SIGINT, SIGTERM) replaces nothing; the primary ends
 * once the last worker is gone.
 */
import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';
import { ERROR_CODES, type ErrorCode, isTrailwireError, TrailwireError } from '../../core/errors.ts';

/** What a worker tells the primary over the cluster's IPC channel. */
type WorkerMessage<Ready> = { trailwireCluster: 'ready'; detail: Ready } | { trailwireCluster: 'failed'; code: ErrorCode; message: string };

export interface ClusterOptions {
  /** How many worker processes to fork: an integer of at least 2. Required. */
  workers: number;
  /** Where the primary reports workers' exits. Required. */
  logger: Logger;
  /** How a worker that exits unexpectedly is replaced. Defaults as `DEFAULT_RESPAWN`. */
  respawn?: Partial<RespawnOptions>;
}

export interface RespawnOptions {
  /** The wait before the first replacement, in ms. */
  initialDelayMs: number;
  /** The longest wait, in ms: the cap of the doubling. */
  maxDelayMs: number;
  /** A worker that lived at least this long (ms) before it crashed resets the wait to `initialDelayMs`. */
  stableAfterMs: number;
}

export const DEFAULT_RESPAWN: RespawnOptions = { initialDelayMs: 1000, maxDelayMs: 30_000, stableAfterMs: 60_000 };

/** A cluster whose workers all listen. */
export interface RunningCluster<Ready> {
  /** What each worker reported with `reportReady`, in fork order. */
  readonly ready: readonly Ready[];
  /** The process ids of the workers running now (replacements included), in fork order. */
  readonly pids: readonly number[];
  /**
   * Resolves once every worker has exited, with the status the primary should exit with: 0 when
   * `stop` was called and every worker stopped cleanly, 1 otherwise.
   */
  readonly exited: Promise<number>;
  /** Sends `signal` to every worker still running; each shuts down gracefully. SIGINT and SIGTERM of the primary do this by themselves. */
  stop(signal: NodeJS.Signals): void;
}

/**
 * Forks the workers (each runs this same command line again, see `cluster.setupPrimary`), forwards
 * the primary's SIGINT and SIGTERM to them from then on, and resolves once every one has called
 * `reportReady`. When one reports a failure or exits first, the
 * others are stopped and the promise rejects with that worker's error.
 */
export async function startCluster<Ready>(options: ClusterOptions): Promise<RunningCluster<Ready>> {
  if (!cluster.isPrimary) throw new Error('startCluster: called in a cluster worker');
  if (!Number.isInteger(options.workers) || options.workers < 2)
    throw new TypeError(`startCluster: \`workers\` must be an integer of at least 2, got ${options.workers}`);
  const respawn = { ...DEFAULT_RESPAWN, ...options.respawn };
  for (const [field, value] of Object.entries(respawn))
    if (!Number.isFinite(value) || value < 0) throw new TypeError(`startCluster: \`respawn.${field}\` must be a number >= 0, got ${value}`);
  const { logger } = options;
  const live = new Set<Worker>();
  let stopping = false;
  let serving = false;
  let failures = 0;
  const pendingRespawns = new Set<NodeJS.Timeout>();
  let cleanStop = true;
  let resolveExited: (code: number) => void = () => {};
  const exited = new Promise<number>((resolve) => (resolveExited = resolve));
  const stop = (signal: NodeJS.Signals) => {
    stopping = true;
    for (const timer of pendingRespawns) clearTimeout(timer);
    for (const worker of live) worker.process.kill(signal);
    if (live.size === 0) resolveExited(cleanStop ? 0 : 1);
  };
  // Listening before the first fork: a signal during start-up must reach the workers too, rather than
  // end the primary and leave them to die abruptly when their IPC channel closes.
  const forward = (signal: NodeJS.Signals) => {
    if (!stopping) logger.info({ signal }, 'stopping the workers');
    stop(signal);
  };
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);

  /** Forks a worker; resolves with its report once it listens, rejects when it fails or exits first. */
  const fork = (): { worker: Worker; ready: Promise<Ready> } => {
    const worker = cluster.fork();
    const forkedAt = Date.now();
    live.add(worker);
    worker.on('exit', (code, signal) => {
      live.delete(worker);
      const fields = { worker: worker.id, pid: worker.process.pid, code, signal, running: live.size };
      if (stopping) {
        if (code !== 0) cleanStop = false;
        logger.info(fields, 'worker stopped');
        if (live.size === 0) resolveExited(cleanStop ? 0 : 1);
        return;
      }
      if (!serving) return; // start-up: startCluster rejects and stops the others
      failures = Date.now() - forkedAt >= respawn.stableAfterMs ? 1 : failures + 1;
      const delayMs = Math.min(respawn.initialDelayMs * 2 ** (failures - 1), respawn.maxDelayMs);
      logger.error({ ...fields, restartInMs: delayMs }, 'worker exited unexpectedly; replacing it');
      const timer = setTimeout(() => {
        pendingRespawns.delete(timer);
        replace(worker.id);
      }, delayMs);
      pendingRespawns.add(timer);
    });
    const ready = new Promise<Ready>((resolve, reject) => {
      worker.on('message', (message: WorkerMessage<Ready>) => {
        if (message?.trailwireCluster === 'ready') resolve(message.detail);
        else if (message?.trailwireCluster === 'failed') reject(new TrailwireError(message.code, message.message));
      });
      worker.once('exit', (code, signal) =>
        reject(new TrailwireError('internal', `worker ${worker.id} exited (${signal ?? `status ${code}`}) before it was serving`)),
      );
    });
    return { worker, ready };
  };

  // A replacement that fails to start exits, and its exit schedules the next try (with a longer wait).
  const replace = (replaces: number) => {
    if (stopping) return;
    const { worker, ready } = fork();
    ready.then(
      () => logger.info({ worker: worker.id, pid: worker.process.pid, replaces, running: live.size }, 'worker replaced'),
      (error: unknown) => logger.error({ worker: worker.id, err: error }, 'replacement worker failed to start'),
    );
  };

  const starting = Array.from({ length: options.workers }, () => fork().ready);
  try {
    const ready = await Promise.all(starting);
    serving = true;
    return {
      ready,
      get pids() {
        return [...live].map((worker) => worker.process.pid!);
      },
      exited,
      stop,
    };
  } catch (error) {
    // Promise.all rejects with the first failure; the others' rejections are expected and not news.
    for (const promise of starting) promise.catch(() => {});
    cleanStop = false;
    stop('SIGTERM');
    await exited;
    throw error;
  }
}

/** In a worker: tells the primary that this worker listens, with what the primary prints. */
export function reportReady<Ready>(detail: Ready): Promise<void> {
  return send<Ready>({ trailwireCluster: 'ready', detail });
}

/** In a worker: tells the primary why this worker could not start (it then exits). */
export function reportFailure(error: unknown): Promise<void> {
  const code: ErrorCode = isTrailwireError(error) && ERROR_CODES.includes(error.code) ? error.code : 'internal';
  return send({ trailwireCluster: 'failed', code, message: error instanceof Error ? error.message : String(error) });
}

function send<Ready>(message: WorkerMessage<Ready>): Promise<void> {
  return new Promise((resolve, reject) => {
    if (!process.send) return reject(new Error('not a cluster worker: there is no primary to report to'));
    process.send(message, undefined, {}, (error: Error | null) => (error ? reject(error) : resolve()));
  });
}
