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
 * listens (or one fails, which stops the others), forwards SIGTERM/SIGINT so every worker shuts down
 * gracefully, and logs each worker that exits. It does not replace a worker that exits: a worker
 * crashing again and again would be hidden by silent respawns, and the payloads it acknowledged are
 * safe in PostgreSQL, where the surviving workers take them over. The others keep serving the ports;
 * once the last worker is gone the primary ends (status 1 unless asked to stop), so that the
 * supervisor (systemd, Kubernetes, ...) restarts the whole service.
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
}

/** A cluster whose workers all listen. */
export interface RunningCluster<Ready> {
  /** What each worker reported with `reportReady`, in fork order. */
  readonly ready: readonly Ready[];
  /** The workers' process ids, in fork order. */
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
  const { logger } = options;
  const workers: Worker[] = [];
  const exitCodes = new Map<Worker, number>();
  let stopping = false;
  let resolveExited: (code: number) => void = () => {};
  const exited = new Promise<number>((resolve) => (resolveExited = resolve));
  const stop = (signal: NodeJS.Signals) => {
    stopping = true;
    for (const worker of workers) if (!exitCodes.has(worker)) worker.process.kill(signal);
  };
  // Listening before the first fork: a signal during start-up must reach the workers too, rather than
  // end the primary and leave them to die abruptly when their IPC channel closes.
  const forward = (signal: NodeJS.Signals) => {
    if (!stopping) logger.info({ signal }, 'stopping the workers');
    stop(signal);
  };
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);

  const starting = Array.from({ length: options.workers }, () => {
    const worker = cluster.fork();
    workers.push(worker);
    worker.on('exit', (code, signal) => {
      exitCodes.set(worker, code ?? 1);
      const running = workers.length - exitCodes.size;
      const fields = { worker: worker.id, pid: worker.process.pid, code, signal, running };
      if (stopping) logger.info(fields, 'worker stopped');
      else logger.error(fields, 'worker exited; it is not replaced');
      if (running === 0) resolveExited(stopping && [...exitCodes.values()].every((status) => status === 0) ? 0 : 1);
    });
    return new Promise<Ready>((resolve, reject) => {
      worker.on('message', (message: WorkerMessage<Ready>) => {
        if (message?.trailwireCluster === 'ready') resolve(message.detail);
        else if (message?.trailwireCluster === 'failed') reject(new TrailwireError(message.code, message.message));
      });
      worker.once('exit', (code, signal) =>
        reject(new TrailwireError('internal', `worker ${worker.id} exited (${signal ?? `status ${code}`}) before it was serving`)),
      );
    });
  });
  try {
    const ready = await Promise.all(starting);
    return { ready, pids: workers.map((worker) => worker.process.pid!), exited, stop };
  } catch (error) {
    // Promise.all rejects with the first failure; the others' rejections are expected and not news.
    for (const promise of starting) promise.catch(() => {});
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
