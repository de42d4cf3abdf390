/**
 * How tests run the `trailwire` command: `node dist/bin/trailwire.js`, the compiled command a user
 * runs (`npm test` builds first). A test that installs a product module written in TypeScript puts
 * `TS_LOADER` before it, as the product guide's development path does (`node --import tsx`).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const TRAILWIRE_BIN = fileURLToPath(new URL('../../dist/bin/trailwire.js', import.meta.url));
export const TS_LOADER = ['--import', 'tsx'] as const;

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `trailwire <args>` to completion in a child process, as a user runs it (`node <nodeArgs>
 * dist/bin/trailwire.js <args>`); `input`, when given, is its stdin (then closed).
 */
export function runTrailwire(args: string[], env: NodeJS.ProcessEnv = {}, nodeArgs: readonly string[] = [], input?: string): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, TRAILWIRE_BIN, ...args], { cwd: REPO_ROOT, env: { ...process.env, NO_COLOR: '1', ...env } });
    if (input !== undefined) child.stdin.end(input);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A `trailwire serve --json` child that has printed its document. */
export interface StartedServe<Document> {
  child: ChildProcess;
  /** What it wrote to stderr so far, a line each (it keeps filling while the child runs). */
  stderr: string[];
  document: Document;
}

/**
 * Starts `trailwire serve <args>` (give it `--json`) in a child process and answers once it printed
 * its JSON document; rejects with its stderr if it exits first. `started` hears of the child at once,
 * so that a test's cleanup can stop one that never prints.
 */
export async function startServe<Document = { url: string; grpc: string }>(
  args: string[],
  env: NodeJS.ProcessEnv,
  started: (child: ChildProcess) => void = () => {},
): Promise<StartedServe<Document>> {
  const child = spawn(process.execPath, [TRAILWIRE_BIN, 'serve', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  started(child);
  const stderr: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (line) => stderr.push(line));
  const exited = new Promise<never>((_resolve, reject) =>
    child.once('exit', (code) => reject(new Error(`serve exited with ${code} before printing; stderr:\n${stderr.join('\n')}`))),
  );
  const printed = (async () => {
    for await (const line of createInterface({ input: child.stdout! })) return JSON.parse(line) as Document;
    throw new Error('serve printed nothing');
  })();
  try {
    return { child, stderr, document: await Promise.race([printed, exited]) };
  } finally {
    exited.catch(() => {});
  }
}
