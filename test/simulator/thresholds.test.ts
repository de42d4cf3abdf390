import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ArrivalSchedule } from '../../simulator/arrival-schedule.ts';
import type { SendRecord } from '../../simulator/run-record.ts';
import { judgeThresholds, parseThreshold, requestFigures, thresholdsOf } from '../../simulator/thresholds.ts';

const T0 = 1_000_000;

function send(plannedAt: number, answeredAt: number, status = 202, sentAt = plannedAt): SendRecord {
  return { product: 'gps-basic', vin: 'V', group: 0, plannedAt, sentAt, answeredAt, status };
}

describe('thresholds', () => {
  it('reads latencies in ms or s, shares in %, and names what it cannot read', () => {
    assert.deepEqual(parseThreshold('p99<250ms'), { expression: 'p99<250ms', metric: 'p99', operator: '<', value: 250 });
    assert.deepEqual(parseThreshold('live-p95 <= 1.5s'), { expression: 'live-p95 <= 1.5s', metric: 'live-p95', operator: '<=', value: 1500 });
    assert.deepEqual(parseThreshold('error-rate<1%'), { expression: 'error-rate<1%', metric: 'error-rate', operator: '<', value: 0.01 });
    assert.deepEqual(parseThreshold('rate>=95%'), { expression: 'rate>=95%', metric: 'rate', operator: '>=', value: 0.95 });
    assert.deepEqual(parseThreshold('webhook-p99<2s'), { expression: 'webhook-p99<2s', metric: 'webhook-p99', operator: '<', value: 2000 });
    assert.throws(() => parseThreshold('webhook-p90<2s'), /unknown metric "webhook-p90"/);
    assert.throws(() => parseThreshold('p99 < fast'), /--threshold "p99 < fast": expected METRIC OP VALUE/);
    assert.throws(() => parseThreshold('p98<250ms'), /unknown metric "p98"/);
    assert.throws(() => parseThreshold('p99<250'), /p99 is a latency, give it in ms or s/);
    assert.throws(() => parseThreshold('error-rate<1ms'), /error-rate is a share, give it in %/);
  });

  it('adds the rate check unless one is given', () => {
    assert.deepEqual(thresholdsOf(['p99<1s']).map((t) => t.expression), ['p99<1s', 'rate>=95%']);
    assert.deepEqual(thresholdsOf(['rate>=50%']).map((t) => t.expression), ['rate>=50%']);
  });

  it('counts latency from the due time: a request held back by a stall is as late as its answer', () => {
    const schedule = ArrivalSchedule.constant(10, 1000);
    // Ten requests due every 100 ms; the server stalled, and the last five went out together at 900 ms.
    const sends = Array.from({ length: 10 }, (_, k) => (k < 5 ? send(T0 + k * 100, T0 + k * 100 + 5) : send(T0 + k * 100, T0 + 905, 202, T0 + 900)));
    const figures = requestFigures(sends, schedule, T0);
    assert.equal(figures.latenciesMs.at(-1), 405);
    assert.deepEqual(
      judgeThresholds(thresholdsOf(['p90<100ms', 'max<=405ms', 'error-rate<1%']), figures),
      [
        { threshold: 'p90<100ms', actual: '305 ms', passed: false },
        { threshold: 'max<=405ms', actual: '405 ms', passed: true },
        { threshold: 'error-rate<1%', actual: '0 %', passed: true },
        { threshold: 'rate>=95%', actual: '100 %', passed: true },
      ],
    );
  });

  it('during the traffic, an unanswered request and one not yet sent count as answered now', () => {
    const schedule = ArrivalSchedule.constant(10, 10_000);
    const sends = [send(T0, T0 + 5), send(T0 + 100, 0, 0)];
    const figures = requestFigures(sends, schedule, T0, { now: T0 + 3000, waitingDue: [T0 + 200, T0 + 300] });
    assert.deepEqual(figures.latenciesMs, [5, 2700, 2800, 2900]);
    // 2 sent in 3 s when 30 were due.
    assert.ok(Math.abs(figures.rateShare! - 2 / 30) < 1e-9);
    assert.equal(judgeThresholds(thresholdsOf([]), figures)[0]!.passed, false);
  });

  it('a run whose requests went out after the schedule ended (held back) falls short of the rate', () => {
    const schedule = ArrivalSchedule.constant(10, 1000);
    const sends = Array.from({ length: 10 }, (_, k) => send(T0 + k * 100, T0 + 2000 + k, 202, T0 + 1999));
    const [rate] = judgeThresholds(thresholdsOf([]), requestFigures(sends, schedule, T0));
    assert.deepEqual(rate, { threshold: 'rate>=95%', actual: '50.03 %', passed: false });
  });

  it('error-rate counts answers other than 202 and 429, and requests without one; a figure with nothing measured passes', () => {
    const schedule = ArrivalSchedule.constant(4, 1000);
    const sends = [send(T0, T0 + 1), send(T0 + 250, T0 + 251, 429), send(T0 + 500, T0 + 501, 503), send(T0 + 750, T0 + 751, 0)];
    assert.deepEqual(judgeThresholds([parseThreshold('error-rate<=50%'), parseThreshold('live-p99<1ms')], requestFigures(sends, schedule, T0)), [
      { threshold: 'error-rate<=50%', actual: '50 %', passed: true },
      { threshold: 'live-p99<1ms', actual: '-', passed: true },
    ]);
  });

  it('judges webhook-p50/p95/p99 on the webhook latencies alone, not on the request or live ones', () => {
    const figures = { latenciesMs: [1, 2, 3], liveLatenciesMs: [4, 5, 6], webhookLatenciesMs: Array.from({ length: 100 }, (_, i) => 1000 + i * 10) };
    assert.deepEqual(judgeThresholds(['webhook-p50<1.5s', 'webhook-p95<=1940ms', 'webhook-p99<1.98s'].map(parseThreshold), figures), [
      { threshold: 'webhook-p50<1.5s', actual: '1490 ms', passed: true },
      { threshold: 'webhook-p95<=1940ms', actual: '1940 ms', passed: true },
      { threshold: 'webhook-p99<1.98s', actual: '1980 ms', passed: false },
    ]);
    assert.equal(judgeThresholds([parseThreshold('live-p99<7ms')], figures)[0]!.actual, '6 ms');
  });
});
