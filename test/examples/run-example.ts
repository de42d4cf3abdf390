/**
 * Runs an example as its README says — `node --import tsx examples/<name>/index.ts` with environment
 * variables — and hands the test the lines it printed up to the one that says it is ready, plus a
 * way to stop it with a signal and learn its exit code. Its stderr (the logs) is kept for failures.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { subscribeLiveFeed } from 'trailwire/client';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface RunningExample {
  child: ChildProcess;
  /** stdout lines up to and including the ready line. */
  lines: string[];
  /** What it wrote on stderr so far (logs). */
  stderr(): string;
  /** Sends `signal` and answers the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `examples/<name>/index.ts`; resolves when a stdout line matches `ready`, rejects if it exits first. */
export async function startExample(name: string, env: Record<string, string>, ready: RegExp, timeoutMs = 20_000): Promise<RunningExample> {
  const child = spawn(process.execPath, ['--import', 'tsx', `examples/${name}/index.ts`], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  const lines: string[] = [];
  const reader = createInterface({ input: child.stdout! });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`examples/${name} printed no line matching ${ready} in ${timeoutMs} ms:\n${lines.join('\n')}\n${stderr}`)), timeoutMs);
    reader.on('line', (line) => {
      lines.push(line);
      if (ready.test(line)) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`examples/${name} exited with ${code} before it was ready:\n${lines.join('\n')}\n${stderr}`));
    });
  });
  return {
    child,
    lines,
    stderr: () => stderr,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** fetch, answering the status, headers and the body parsed as JSON when it is JSON. */
export async function call(url: string, init: { method?: string; headers?: Record<string, string>; json?: unknown } = {}) {
  const response = await fetch(url, {
    method: init.method ?? 'GET',
    headers: init.json === undefined ? init.headers : { 'content-type': 'application/json', ...init.headers },
    body: init.json === undefined ? undefined : JSON.stringify(init.json),
  });
  const text = await response.text();
  // Tests read bodies freely; each asserts the shape it relies on.
  const body: any = (response.headers.get('content-type') ?? '').includes('json') && text ? JSON.parse(text) : text;
  return { status: response.status, headers: response.headers, body };
}

/** Polls `probe` until it answers something other than undefined (at most `timeoutMs`). */
export async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`nothing after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Resolves at the first LiveFeed heartbeat for `token` at `target` (the example's printed gRPC address); rejects if the stream gives up. */
export function firstHeartbeat(target: string, token: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const subscription = subscribeLiveFeed(
      { target, token: async () => token, maxReconnects: 0 },
      {
        onHeartbeat: () => {
          subscription.close();
          resolve();
        },
        onGiveUp: reject,
      },
    );
  });
}
