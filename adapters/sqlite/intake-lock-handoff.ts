/**
 * Hands SQLite's write lock from the intake processing thread to the main thread's group commit
 * when the latter is waiting. Both write the same file, and SQLite has one writer at a time: the
 * thread holds the lock for a whole round, and the main thread — which must never block its event
 * loop on the lock — would otherwise poll for a gap between two rounds that it rarely hits, so every
 * 202 would wait for several rounds. With the handoff, the main thread raises a flag and waits
 * (asynchronously) for its turn; the thread ends its round early (the untried payloads go back to
 * the queue), commits, and lets the main thread commit before it starts the next round.
 *
 * It is two integers in a SharedArrayBuffer, shared with the thread through `workerData`.
 */
// Atomics.waitAsync is in Node 20 but not in the project's TypeScript library (ES2024).
const waitAsync = (Atomics as unknown as {
  waitAsync(array: Int32Array, index: number, value: number, timeoutMs: number): { async: boolean; value: Promise<unknown> | string };
}).waitAsync;

const WANTS = 0;
const TURN = 1;

/** How long the main thread waits for its turn before trying the lock anyway. */
const MAIN_WAIT_MS = 5;
/** How long the thread lets the main thread go first before taking the lock back regardless. */
const THREAD_WAIT_MS = 20;

export class WriteLockHandoff {
  private readonly cells: Int32Array;

  /** A new handoff, or one over the buffer another thread created. */
  constructor(readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(8)) {
    this.cells = new Int32Array(buffer);
  }

  // --- the main thread ------------------------------------------------------------------------

  /** Asks the thread for the lock; resolves when it is this side's turn (or after a short wait). */
  request(): Promise<void> {
    // The turn is read first: a turn the thread gives between these two lines is then not missed.
    const turn = Atomics.load(this.cells, TURN);
    Atomics.store(this.cells, WANTS, 1);
    const wait = waitAsync(this.cells, TURN, turn, MAIN_WAIT_MS);
    if (!wait.async) return Promise.resolve();
    // A timer besides: a pending waitAsync alone does not keep the event loop alive.
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([wait.value as Promise<unknown>, new Promise((resolve) => (timer = setTimeout(resolve, MAIN_WAIT_MS + 1)))]).then(() => clearTimeout(timer));
  }

  /** The main thread is done with the lock (or no longer wants it). */
  release(): void {
    if (Atomics.exchange(this.cells, WANTS, 0) === 1) Atomics.notify(this.cells, WANTS);
  }

  // --- the processing thread -------------------------------------------------------------------

  /** Whether the main thread is waiting for the lock: the thread should end its round. */
  get mainWaiting(): boolean {
    return Atomics.load(this.cells, WANTS) === 1;
  }

  /** Called by the thread while it does not hold the lock: lets a waiting main thread commit first. */
  letMainGoFirst(): void {
    if (!this.mainWaiting) return;
    Atomics.add(this.cells, TURN, 1);
    Atomics.notify(this.cells, TURN);
    // Blocking is fine here: this is the processing thread, and the wait is short and bounded.
    Atomics.wait(this.cells, WANTS, 1, THREAD_WAIT_MS);
  }
}
