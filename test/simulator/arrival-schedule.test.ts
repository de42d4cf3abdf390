import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ArrivalSchedule, parseStages } from '../../simulator/arrival-schedule.ts';

describe('arrival schedules', () => {
  it('a constant rate: rate x seconds in any span, nothing outside the run', () => {
    const schedule = ArrivalSchedule.constant(100, 10_000);
    assert.equal(schedule.durationMs, 10_000);
    assert.equal(schedule.requestsBetween(0, 10_000), 1000);
    assert.equal(schedule.requestsBetween(2500, 3000), 50);
    assert.equal(schedule.requestsBetween(-5000, 20_000), 1000);
    assert.equal(schedule.rateAt(0), 100);
    assert.deepEqual(schedule.stages, [{ from: 0, to: 10_000, startRate: 100, target: 100, due: 1000 }]);
  });

  it('stages ramp linearly from the rate the stage before ended at, from 0', () => {
    const schedule = ArrivalSchedule.ramp(parseStages('10s:100,20s:100,10s:0'));
    assert.equal(schedule.durationMs, 40_000);
    assert.equal(schedule.peakRate, 100);
    assert.equal(schedule.rateAt(5000), 50);
    assert.equal(schedule.rateAt(20_000), 100);
    assert.equal(schedule.rateAt(35_000), 50);
    assert.deepEqual(schedule.stages.map((stage) => stage.due), [500, 2000, 500]);
    // Half of a ramp's requests fall in its last 29 % (1 - 1/sqrt(2)).
    const half = schedule.timeAtShare(0, 10_000, 0.5);
    assert.ok(Math.abs(half - 10_000 / Math.SQRT2) < 1, String(half));
  });

  it('reads --stages in ms, s, m and h, and names the stage it cannot read', () => {
    assert.deepEqual(parseStages('500ms:10, 30s:50,1m:200,1h:0,15:5'), [
      { durationMs: 500, target: 10 },
      { durationMs: 30_000, target: 50 },
      { durationMs: 60_000, target: 200 },
      { durationMs: 3_600_000, target: 0 },
      { durationMs: 15_000, target: 5 },
    ]);
    assert.throws(() => parseStages('30s:50,60x:200'), /--stages: cannot read the stage "60x:200"/);
    assert.throws(() => parseStages('30s'), /cannot read the stage "30s"/);
    assert.throws(() => parseStages('30s:-5'), /cannot read the stage/);
    assert.throws(() => ArrivalSchedule.ramp(parseStages('0s:50')), /last no time/);
  });
});
