import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../core/clock.ts';
import { type FaultLogEntry, RepeatingFaultLog } from '../../core/repeating-fault-log.ts';

describe('RepeatingFaultLog', () => {
  it('says a fault once, then once per interval with a count, and once when it is over', () => {
    const clock = new ManualClock(0);
    const lines: FaultLogEntry[] = [];
    const faults = new RepeatingFaultLog({ write: (entry) => lines.push(entry), clock, intervalMs: 10_000 });
    faults.failed('store', { level: 'error', message: 'the store refuses writes: SQLITE_FULL' });
    faults.failed('store', { level: 'error', message: 'the store refuses writes: SQLITE_FULL' });
    clock.advance(10_000);
    faults.failed('store', { level: 'error', message: 'the store refuses writes: SQLITE_IOERR' });
    faults.recovered('store', 'the store writes again');
    faults.recovered('store', 'the store writes again');
    assert.deepEqual(
      lines.map((line) => line.message),
      ['the store refuses writes: SQLITE_FULL', 'the store refuses writes: SQLITE_IOERR (2 more times in 10 s)', 'the store writes again (after 3 failures)'],
    );
  });

  it('answers the latest failure of a fault while it lasts, for a readiness check to say why', () => {
    const faults = new RepeatingFaultLog({ write: () => {} });
    assert.equal(faults.failure('store'), undefined);
    faults.failed('store', { level: 'error', message: 'the store refuses writes: SQLITE_FULL' });
    faults.failed('store', { level: 'error', message: 'the store refuses writes: SQLITE_IOERR' });
    assert.equal(faults.failure('store')?.message, 'the store refuses writes: SQLITE_IOERR');
    assert.equal(faults.failure('intake-log'), undefined, 'each fault on its own');
    faults.recovered('store', 'the store writes again');
    assert.equal(faults.failure('store'), undefined);
  });
});
