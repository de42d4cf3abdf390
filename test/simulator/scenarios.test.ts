import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ArrivalSchedule } from '../../simulator/arrival-schedule.ts';
import { embeddedLimits, planSends, SCENARIOS, sendsFor, type PlanOptions, type ScenarioName } from '../../simulator/scenarios.ts';

const START = Date.UTC(2026, 5, 1, 12, 0, 0) + 250; // not on a window boundary

function plan(scenario: ScenarioName, overrides: Partial<PlanOptions> = {}, durationMs = 6000) {
  const base = { scenario, seed: 7, vins: 10, arrivals: ArrivalSchedule.constant(100, durationMs), startAt: START };
  const limits = embeddedLimits({ scenario, vins: base.vins, rate: 100, windowSeconds: 2 });
  return planSends({ ...base, limits, ...overrides });
}

describe('send plans', () => {
  it('are the same for the same seed and differ for another', () => {
    for (const scenario of SCENARIOS) assert.deepEqual(plan(scenario), plan(scenario));
    assert.notDeepEqual(plan('steady').sends, plan('steady', { seed: 8 }).sends);
  });

  it('keep every send inside its window, away from the edges, in time order', () => {
    for (const scenario of SCENARIOS) {
      const { sends, groups, startAt, endAt } = plan(scenario);
      for (let i = 1; i < sends.length; i++) assert.ok(sends[i - 1]!.at <= sends[i]!.at);
      for (const send of sends) {
        const group = groups[send.group]!;
        assert.ok(send.at >= group.windowStart + 100 && send.at <= group.windowEnd - 100, `${scenario}: ${send.at} in ${group.windowStart}`);
        assert.ok(send.at >= startAt && send.at <= endAt);
      }
      const counted = new Map<number, number>();
      for (const send of sends) counted.set(send.group, (counted.get(send.group) ?? 0) + 1);
      groups.forEach((group, index) => assert.equal(counted.get(index), group.planned));
    }
  });

  it('steady sends the requested rate, nothing over a limit', () => {
    const { sends, groups } = plan('steady', {}, 20_000);
    // Each window's requests are apportioned over the VINs, so the total is the schedule's to
    // within one request per (product, window): 3 products x 11 windows.
    assert.ok(Math.abs(sends.length - 2000) <= 33, `${sends.length} sends`);
    for (const group of groups) assert.ok(group.planned <= group.limit);
  });

  it('burst goes over the limit for every VIN in every window, front-loaded', () => {
    const { groups, sends } = plan('burst');
    assert.ok(groups.length >= 20);
    for (const group of groups) {
      assert.equal(group.intent, 'over');
      assert.ok(group.planned > group.limit);
    }
    for (const send of sends) {
      const group = groups[send.group]!;
      assert.ok(send.at < Math.max(group.windowStart, START) + (group.windowEnd - Math.max(group.windowStart, START)) / 2 + 1);
    }
  });

  it('noisy-vin floods one VIN and keeps the others under their limit', () => {
    const { groups } = plan('noisy-vin');
    for (const group of groups) {
      if (group.vinIndex === 0) assert.ok(group.planned >= 3 * group.limit);
      else assert.ok(group.planned <= group.limit && group.intent === 'under');
    }
  });

  it('multi-product sends all three products for the same VINs with their own intents', () => {
    const { groups } = plan('multi-product');
    const byProduct: Record<string, typeof groups> = {};
    for (const group of groups) (byProduct[group.product] ??= []).push(group);
    assert.ok(byProduct['tpms']!.every((g) => g.planned > g.limit));
    assert.ok(byProduct['cargosafe']!.every((g) => g.planned === g.limit));
    assert.ok(byProduct['gps-basic']!.every((g) => g.planned <= g.limit));
    assert.deepEqual(new Set(byProduct['tpms']!.map((g) => g.vinIndex)), new Set(byProduct['cargosafe']!.map((g) => g.vinIndex)));
  });

  it('aligns windows to the server clock when it differs from the client', () => {
    const offset = 700;
    const { sends, groups } = plan('burst', { clockOffsetMs: offset });
    for (const send of sends) {
      const group = groups[send.group]!;
      assert.ok(send.at + offset >= group.windowStart + 100 && send.at + offset <= group.windowEnd - 100);
    }
  });

  it("leave out the (product, VIN) pairs that do not report (a deployment's trailer without that device)", () => {
    const reports = (product: string, vinIndex: number) => !(product === 'cargosafe' && vinIndex % 2 === 1);
    const { sends, groups } = plan('steady', { reports });
    assert.ok(groups.some((group) => group.product === 'cargosafe'));
    for (const group of groups) assert.ok(reports(group.product, group.vinIndex), `${group.product} for VIN ${group.vinIndex}`);
    for (const send of sends) assert.ok(reports(send.product, send.vinIndex));
    assert.ok(sends.some((send) => send.product === 'tpms' && send.vinIndex % 2 === 1), 'the other products still go');
    // The VINs with a cargosafe unit take the part of those without: the rate is kept.
    assert.ok(Math.abs(sends.length - 600) <= 9, `${sends.length} sends for 100/s over 6 s`);
    // And when no VIN reports a product, the others take its part.
    const gpsOnly = plan('steady', { reports: (product) => product === 'gps-basic' });
    assert.ok(gpsOnly.sends.every((send) => send.product === 'gps-basic'));
    assert.ok(Math.abs(gpsOnly.sends.length - 600) <= 3, `${gpsOnly.sends.length} sends for 100/s over 6 s`);
  });

  it('follow a ramp of stages: each stage gets its requests to within 5 %, along the ramp', () => {
    const arrivals = ArrivalSchedule.ramp([
      { durationMs: 4000, target: 50 },
      { durationMs: 6000, target: 200 },
      { durationMs: 4000, target: 0 },
    ]);
    const { sends, groups } = plan('steady', { arrivals, vins: 20 });
    for (const stage of arrivals.stages) {
      const inStage = sends.filter((send) => send.at - START >= stage.from && send.at - START < stage.to).length;
      assert.ok(Math.abs(inStage - stage.due) <= stage.due * 0.05, `${inStage} sends in a stage due ${stage.due}`);
    }
    // Along the ramp inside the stage, not evenly: the second stage's last two seconds carry more than its first two.
    const between = (from: number, to: number) => sends.filter((send) => send.at - START >= from && send.at - START < to).length;
    assert.ok(between(8000, 10_000) > 1.5 * between(4000, 6000), `${between(4000, 6000)} then ${between(8000, 10_000)}`);
    for (const group of groups) assert.ok(group.planned <= group.limit);
  });

  it('an over intent sends past the limit even when the rate share is small', () => {
    assert.equal(sendsFor('over', 0, 0.2, 8), 10);
    assert.equal(sendsFor('over', 30, 30, 8), 30);
    assert.equal(sendsFor('under', 30, 30, 8), 8);
    assert.equal(sendsFor('at', 3, 3, 8), 8);
    // A stage at 0 asks nothing of any intent.
    assert.equal(sendsFor('over', 0, 0, 8), 0);
  });
});
