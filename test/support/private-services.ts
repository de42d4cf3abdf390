/**
 * A private `redis-server` and a private PostgreSQL cluster for fault tests (issue 28): each on a free
 * port of its own, never the machine's shared ones, so a test may kill and restart them. PostgreSQL
 * is `initdb`-ed into a temporary folder and run as the `postgres` user when the test runs as root
 * (PostgreSQL refuses to run as root). `missingBinaries()` says why a test must skip.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { until } from './until.ts';

const POSTGRES_BIN_ROOT = '/usr/lib/postgresql';

/** The newest `/usr/lib/postgresql/<version>/bin` holding `initdb` and `pg_ctl`, if any. */
function postgresBin(): string | undefined {
  if (!existsSync(POSTGRES_BIN_ROOT)) return undefined;
  const versions = readdirSync(POSTGRES_BIN_ROOT).sort((a, b) => Number(b) - Number(a));
  return versions.map((version) => join(POSTGRES_BIN_ROOT, version, 'bin')).find((bin) => existsSync(join(bin, 'initdb')) && existsSync(join(bin, 'pg_ctl')));
}

function onPath(command: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const runAsRoot = process.getuid?.() === 0;

/** Why the private services cannot run here, or false when they can. */
export function missingBinaries(): string | false {
  if (!onPath('redis-server')) return 'redis-server is not on PATH';
  if (postgresBin() === undefined) return `no PostgreSQL server binaries (initdb, pg_ctl) under ${POSTGRES_BIN_ROOT}/*/bin`;
  if (runAsRoot && !onPath('runuser')) return 'running as root without runuser (PostgreSQL must run as the postgres user)';
  return false;
}

/** A TCP port free at the moment of asking. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Whether something accepts TCP connections on the port now. */
function listening(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Resolves once something accepts TCP connections on the port. */
function untilListening(port: number): Promise<void> {
  return until(() => listening(port), `something to listen on port ${port}`, 15_000);
}

export class PrivateRedis {
  private child: ChildProcess | undefined;
  private constructor(readonly port: number) {}

  static async start(): Promise<PrivateRedis> {
    const redis = new PrivateRedis(await freePort());
    await redis.restart();
    return redis;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts the server (again) on the same port, with nothing persisted: a restart loses every key, as a crash without persistence would. */
  async restart(): Promise<void> {
    this.child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    await untilListening(this.port);
  }

  /** SIGSTOP: the server keeps its connections but answers nothing, as a frozen one does. */
  freeze(): void {
    this.child?.kill('SIGSTOP');
  }

  /** SIGCONT after `freeze`. */
  thaw(): void {
    this.child?.kill('SIGCONT');
  }

  /** SIGKILL, and resolves once the process is gone. */
  async kill(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }
}

export class PrivatePostgres {
  private constructor(
    readonly port: number,
    private readonly dir: string,
    private readonly bin: string,
  ) {}

  /** `initdb` into a temporary folder (trust authentication, user `postgres`) and start. */
  static async start(): Promise<PrivatePostgres> {
    const bin = postgresBin();
    if (!bin) throw new Error(`no PostgreSQL binaries under ${POSTGRES_BIN_ROOT}`);
    const dir = mkdtempSync(join(tmpdir(), 'trailwire-pg-'));
    if (runAsRoot) {
      const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
      const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
      chownSync(dir, uid, gid);
    }
    const postgres = new PrivatePostgres(await freePort(), dir, bin);
    postgres.run('initdb', ['-D', join(dir, 'data'), '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
    await postgres.restart();
    return postgres;
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  /** Starts the cluster and waits until it accepts connections. */
  async restart(): Promise<void> {
    // Commits are durable as in production (synchronous_commit on): an immediate stop must lose no
    // acknowledged payload. fsync stays on too; the test writes little.
    const options = `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c max_connections=50`;
    this.run('pg_ctl', ['-D', join(this.dir, 'data'), '-o', options, '-l', join(this.dir, 'log'), '-w', 'start']);
    await untilListening(this.port);
  }

  /** Stops the cluster: `immediate` is a crash (every session cut, recovery at the next start). */
  stop(mode: 'fast' | 'immediate' = 'immediate'): void {
    this.run('pg_ctl', ['-D', join(this.dir, 'data'), '-m', mode, '-w', 'stop']);
  }

  /** Stops the cluster (if running) and removes its folder. */
  destroy(): void {
    try {
      this.stop('immediate');
    } catch {
      // Already stopped.
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  private run(program: string, args: string[]): void {
    const path = join(this.bin, program);
    if (runAsRoot) execFileSync('runuser', ['-u', 'postgres', '--', path, ...args], { stdio: 'ignore', cwd: this.dir });
    else execFileSync(path, args, { stdio: 'ignore', cwd: this.dir });
  }
}
