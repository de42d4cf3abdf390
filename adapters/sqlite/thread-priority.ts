/**
 * Lowers the scheduling priority of the calling thread alone (not its process), where the system
 * allows it: on Linux a thread is a task with its own id, which `setpriority` accepts, and
 * `/proc/thread-self` names it. Elsewhere nothing changes.
 *
 * The intake processing thread runs a little below the HTTP thread (`PROCESSING_THREAD_NICENESS`):
 * when the cores are short, the scheduler then gives them to the thread that answers partners first,
 * and a payload waits a moment longer in the durable log instead of a partner waiting for its 202.
 * Under contention the processing thread still gets about a quarter of a core, and all of what is idle.
 */
import { readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';

/** How far below the process's priority the processing thread runs (a nice value; higher is lower). */
export const PROCESSING_THREAD_NICENESS = 5;

/** Lowers this thread's priority by `niceness` steps; answers whether it could. */
export function lowerThisThreadPriority(niceness: number): boolean {
  let threadId: number;
  try {
    // "<pid>/task/<tid>"
    threadId = Number(readlinkSync('/proc/thread-self').split('/').pop());
  } catch {
    return false;
  }
  if (!Number.isSafeInteger(threadId) || threadId <= 0) return false;
  try {
    setPriority(threadId, Math.min(19, getPriority(threadId) + niceness));
    return true;
  } catch {
    return false;
  }
}
