/**
 * `trailwire serve` in a child process, as an operator runs it: the compiled binary with the Node.js
 * flags `npm start` uses, on free ports of 127.0.0.1, printing its JSON line once it listens. The
 * benches that measure a whole server (flood, export-import, simulator, webhooks) start it here.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { SERVER_NODE_FLAGS } from './results.ts';

export interface ServeProcess<Printed> {
  child: ChildProcess;
  /** The JSON line `serve --json` printed once listening (`url`, `grpc`, with `--demo` the principals). */
  printed: Printed;
}

/** Starts `bin serve --json` on free ports with `args` after them; answers once it listens, or rejects with what it printed. */
export async function startServe<Printed extends { url: string } = { url: string }>(bin: string, args: readonly string[]): Promise<ServeProcess<Printed>> {
  const child = spawn(process.execPath, [...SERVER_NODE_FLAGS, bin, 'serve', '--json', '--port', '0', '--grpc-port', '0', '--host', '127.0.0.1', ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let line: string | undefined;
  for await (const printed of createInterface({ input: child.stdout! })) {
    line = printed;
    break;
  }
  const printed = line === undefined ? undefined : (JSON.parse(line) as Printed);
  if (printed?.url === undefined) {
    child.kill('SIGKILL');
    throw new Error(`serve did not start: ${line ?? `it printed nothing (exit ${String(child.exitCode)})`}`);
  }
  return { child, printed };
}

/** Stops a server started here (SIGTERM, as an operator would) and waits for it to exit. */
export async function stopServe(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}
