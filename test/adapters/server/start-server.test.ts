/**
 * `startServer` refusing a port it cannot listen on: it rejects, and closes what it had started
 * before listening (the store, the intake thread), so a process whose start failed ends by itself
 * instead of staying up without a server. Run in a child process, whose exit is the evidence.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, it } from 'node:test';
import { REPO_ROOT } from '../../support/cli.ts';

const directory = mkdtempSync(join(tmpdir(), 'trailwire-start-server-'));
after(() => rmSync(directory, { recursive: true, force: true }));

it('a port out of range rejects, and the process then ends by itself', { timeout: 90_000 }, async () => {
  const server = pathToFileURL(join(REPO_ROOT, 'adapters/server/index.ts')).href;
  const script = `
    const { startServer } = await import(${JSON.stringify(server)});
    const { pino } = await import('pino');
    try {
      await startServer({ db: ${JSON.stringify(join(directory, 'bad-port.db'))}, port: -5, grpcPort: 0, logger: pino({ level: 'silent' }) });
      console.log('started');
    } catch (error) {
      console.log('rejected: ' + error.message);
    }`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: REPO_ROOT });
  let stdout = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  // Generous: on a busy machine loading the modules alone has taken over 30 s.
  const timer = setTimeout(() => child.kill('SIGKILL'), 75_000);
  try {
    const code = await exited;
    assert.match(stdout, /^rejected: .*port/m);
    assert.equal(code, 0, 'the process ended by itself: nothing was left running');
  } finally {
    clearTimeout(timer);
  }
});

it('a second processing server on the same SQLite file is refused with the reason, and the file serves again once the first has closed', { timeout: 30_000 }, async () => {
  const { startServer } = await import('../../../adapters/server/index.ts');
  const { pino } = await import('pino');
  const options = { db: join(directory, 'one-server.db'), port: 0, grpcPort: 0, logger: pino({ level: 'silent' }) };
  const first = await startServer(options);
  try {
    await assert.rejects(startServer(options), /another Trailwire server is using .*one-server\.db .*for several, use PostgreSQL and Redis/);
    // A server that only takes intake (no worker: it holds no server lock) may run beside it, as before.
    const beside = await startServer({ ...options, intakeWorker: false });
    await beside.close();
  } finally {
    await first.close();
  }
  const again = await startServer(options);
  await again.close();
});
