import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { findCapacity } from '../../simulator/capacity-search.ts';
import type { SimulationReport } from '../../simulator/report.ts';
import { runTrailwire } from '../support/cli.ts';

/** A made-up service: p99 grows with the rate and passes 250 ms at `knee`; each step takes 10 s on a fake clock. */
function service(knee: number, clock: { now: number }) {
  const rates: number[] = [];
  const run = async (rate: number) => {
    rates.push(rate);
    clock.now += 10_000;
    const p99 = (rate / knee) * 250;
    return {
      rate: { target: rate, achieved: rate },
      latencyMs: { p50: p99 / 4, p90: p99 / 2, p99, max: p99 },
      errors: 0,
      violations: [],
      thresholds: [{ threshold: 'p99<250ms', actual: `${p99} ms`, passed: p99 < 250 }],
    } as unknown as SimulationReport;
  };
  return { run, rates };
}

describe('capacity search', () => {
  it('doubles until a step breaks, then narrows the gap to under 5 %, and keeps every step', async () => {
    const clock = { now: 0 };
    const { run, rates } = service(300, clock);
    const found = await findCapacity(run, { startRate: 50, budgetMs: 600_000, now: () => clock.now });
    assert.deepEqual(rates.slice(0, 5), [50, 100, 200, 400, 300]);
    assert.ok(found.capacity! < 300 && found.capacity! >= 285, `capacity ${found.capacity}`);
    assert.ok(found.brokeAt! >= 300 && found.brokeAt! - found.capacity! < found.capacity! * 0.05);
    assert.equal(found.steps.length, rates.length);
    assert.deepEqual(found.steps[3], { rate: 400, held: false, achievedRate: 400, latencyMs: { p50: 83.33333333333333, p99: 333.3333333333333 }, errors: 0, violations: 0, breached: ['p99<250ms (333.3333333333333 ms)'], seconds: 10 });
  });

  it('starts no step the budget cannot fit, and says when nothing held or nothing broke', async () => {
    const clock = { now: 0 };
    const fast = service(1_000_000, clock);
    const unbroken = await findCapacity(fast.run, { startRate: 50, budgetMs: 35_000, now: () => clock.now });
    assert.deepEqual(fast.rates, [50, 100, 200]);
    assert.equal(unbroken.brokeAt, null);
    assert.equal(unbroken.capacity, 200);
    assert.ok(unbroken.elapsedS <= unbroken.budgetS);

    // Breaks at every rate of a request a second or more: it halves down to there and stops.
    const slow = service(0.5, { now: 0 });
    const none = await findCapacity(slow.run, { startRate: 50, budgetMs: 600_000 });
    assert.equal(none.capacity, null);
    assert.deepEqual(slow.rates, [50, 25, 12.5, 6.3, 3.2, 1.6]);
  });

  it('trailwire simulate --find-capacity on the embedded server reports a rate within its budget', async () => {
    // Generous, so that a loaded machine still holds the first step: the search's stepping is what is tested.
    const result = await runTrailwire(['simulate', '--find-capacity', 'p99<10s', '--rate', '20', '--duration', '2', '--vins', '4', '--subscribers', '1', '--capacity-budget', '20', '--json']);
    assert.equal(result.code, 0, result.stdout + result.stderr);
    const search = JSON.parse(result.stdout) as { threshold: string; capacity: number; steps: Array<{ rate: number; held: boolean; seconds: number }>; elapsedS: number; budgetS: number };
    assert.equal(search.threshold, 'p99<10s');
    assert.ok(search.capacity >= 20, result.stdout);
    assert.equal(search.steps[0]!.rate, 20);
    // The budget's rule: no step starts that the longest step before it says would overrun the
    // budget. A step may still take longer than every one before it (a loaded machine: the suite
    // once saw 20.1 s of 20), and the search ends after it; each step's seconds are rounded to 0.1 s.
    const earlier = search.steps.slice(0, -1);
    const lastStartedAt = earlier.reduce((total, step) => total + step.seconds, 0);
    const longestEarlier = Math.max(0, ...earlier.map((step) => step.seconds));
    assert.ok(lastStartedAt + longestEarlier <= search.budgetS + 0.05 * search.steps.length, `the last step started at ${lastStartedAt} s with the longest before it ${longestEarlier} s, of a ${search.budgetS} s budget`);
    assert.ok(search.elapsedS <= search.budgetS + search.steps.at(-1)!.seconds, `${search.elapsedS} s of a ${search.budgetS} s budget`);
  });
});
