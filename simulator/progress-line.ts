/**
 * The live progress line a terminal shows while a simulation runs: elapsed time, request rate,
 * answers by class, latency, and live updates, redrawn in place on one line; once the traffic is
 * over, how many accepted payloads have their final state read back (a phase that can take minutes
 * against a deployment, its status reads waiting for the partners' read limits).
 */
import type { SimulationProgress } from './simulation.ts';

/** One progress line (no newline). */
export function formatProgress(progress: SimulationProgress): string {
  if (progress.checking) {
    const { settled, accepted } = progress.checking;
    // The figures first: a narrow terminal cuts the line's end.
    return `checking  ${settled}/${accepted} accepted payloads settled  live ${progress.liveUpdates}  (status reads count against each partner's read limit)`;
  }
  const elapsed = `${(progress.elapsedMs / 1000).toFixed(1)}/${(progress.durationMs / 1000).toFixed(0)}s`;
  return (
    `${elapsed.padStart(10)}  ${String(progress.rate).padStart(5)} req/s  ` +
    `202 ${progress.accepted}  429 ${progress.limited}  4xx ${progress.clientErrors}  5xx ${progress.serverErrors}  ` +
    `p50 ${progress.p50Ms} ms  p99 ${progress.p99Ms} ms  live ${progress.liveUpdates}`
  );
}

/** A progress printer for `stream`, which redraws its line in place; `done()` ends the line. */
export function progressPrinter(stream: NodeJS.WriteStream): { update(progress: SimulationProgress): void; done(): void } {
  let drawn = false;
  return {
    update(progress) {
      const line = formatProgress(progress);
      // A pseudo-terminal may report 0 columns: then the usual width.
      stream.write(`\r${line.slice(0, Math.max(20, (stream.columns || 120) - 1))}\x1b[K`);
      drawn = true;
    },
    done() {
      if (drawn) stream.write('\n');
      drawn = false;
    },
  };
}
