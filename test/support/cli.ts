/**
 * How tests run the `trailwire` command: `node dist/bin/trailwire.js`, the compiled command a user
 * runs (`npm test` builds first). A test that installs a product module written in TypeScript puts
 * `TS_LOADER` before it, as the product guide's development path does (`node --import tsx`).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const TRAILWIRE_BIN = fileURLToPath(new URL('../../dist/bin/trailwire.js', import.meta.url));
export const TS_LOADER = ['--import', 'tsx'] as const;

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `trailwire <args>` to completion in a child process, as a user runs it (`node <nodeArgs> dist/bin/trailwire.js <args>`). */
export function runTrailwire(args: string[], env: NodeJS.ProcessEnv = {}, nodeArgs: readonly string[] = []): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, TRAILWIRE_BIN, ...args], { cwd: REPO_ROOT, env: { ...process.env, NO_COLOR: '1', ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
