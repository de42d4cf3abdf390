/**
 * The in-process `MemoryWindowCounter` against the shared window-counter conformance suite, its time
 * moved by hand with a `ManualClock`.
 */
import { ManualClock } from '../../core/clock.ts';
import { MemoryWindowCounter } from '../../core/rate-limit.ts';
import { runWindowCounterConformance } from '../conformance/window-counter.ts';

runWindowCounterConformance({
  name: 'memory (manual clock)',
  async open() {
    const clock = new ManualClock();
    return {
      counter: new MemoryWindowCounter(clock),
      clock,
      async advancePast(expiresAt) {
        clock.set(Math.max(clock.now(), expiresAt + 1));
      },
    };
  },
});
