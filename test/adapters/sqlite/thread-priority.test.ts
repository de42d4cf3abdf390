/**
 * The processing thread's lower priority: only the calling thread changes, never the process's
 * other threads (the HTTP thread above all). Linux only: elsewhere nothing changes and the test says so.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { it } from 'node:test';
import { Worker } from 'node:worker_threads';

const onLinux = existsSync('/proc/thread-self');

/** Each thread of this process's niceness, by thread id (field 19 of /proc/<pid>/task/<tid>/stat). */
function nicenessByThread(): Map<number, number> {
  return new Map(
    readdirSync('/proc/self/task').map((tid) => {
      const fields = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      return [Number(tid), Number(fields[16])];
    }),
  );
}

it('lowers the calling thread alone', { skip: onLinux ? false : 'needs Linux /proc/thread-self' }, async () => {
  const before = nicenessByThread();
  const module = new URL('../../../adapters/sqlite/intake-thread.ts', import.meta.url).href;
  const tsx = import.meta.resolve('tsx/esm/api');
  const worker = new Worker(
    `const { tsImport } = await import(${JSON.stringify(tsx)});
     const { parentPort } = await import('node:worker_threads');
     const { readlinkSync } = await import('node:fs');
     const { lowerThisThreadPriority } = await tsImport(${JSON.stringify(module)}, ${JSON.stringify(module)});
     const lowered = lowerThisThreadPriority(5);
     parentPort.postMessage({ lowered, tid: Number(readlinkSync('/proc/thread-self').split('/').pop()) });
     parentPort.once('message', () => process.exit(0));`,
    { eval: true, execArgv: [] },
  );
  const { lowered, tid } = await new Promise<{ lowered: boolean; tid: number }>((resolve) => worker.once('message', resolve));
  const after = nicenessByThread();
  worker.postMessage('done');
  await new Promise((resolve) => worker.once('exit', resolve));
  assert.equal(lowered, true);
  assert.equal(after.get(tid), Math.min(19, (before.get(process.pid) ?? 0) + 5), 'the worker thread runs 5 below');
  for (const [thread, niceness] of after) if (thread !== tid) assert.equal(niceness, before.get(thread) ?? niceness, `thread ${thread} keeps its priority`);
  assert.equal(after.get(process.pid), before.get(process.pid), 'the main thread keeps its priority');
});
