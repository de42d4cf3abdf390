/**
 * The simulator against deliberately faulty in-process servers: each invariant check must catch
 * the fault it exists for when the server really misbehaves, not only on made-up records.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemoryLiveBus, type LiveTrailerEvent } from '../../core/live-bus.ts';
import { MemoryWindowCounter } from '../../core/rate-limit.ts';
import { systemClock } from '../../core/clock.ts';
import { simulate } from '../../simulator/simulate.ts';
import type { SimulationProgress } from '../../simulator/simulation.ts';

/** A bus that hands each update to another customer than the trailer's (once it has seen two). */
class MisroutingBus extends MemoryLiveBus {
  private readonly customers = new Set<string>();
  override publish(event: LiveTrailerEvent): Promise<void> {
    this.customers.add(event.customerId);
    const other = [...this.customers].find((id) => id !== event.customerId);
    return super.publish(other === undefined ? event : { ...event, customerId: other });
  }
}

/** A window counter that fails every third intake count: the intake handler answers 500. */
class FailingCounter extends MemoryWindowCounter {
  private calls = 0;
  override async increment(key: string, expiresAt: number): Promise<number> {
    if (key.startsWith('intake:') && ++this.calls % 3 === 0) throw new Error('counter backend down');
    return super.increment(key, expiresAt);
  }
}

const quick = { seed: 7, vins: 6, rate: 30, windowSeconds: 1, customers: 2 } as const;

// Each case starts its own embedded server and asserts that a fault is caught, which a busier event
// loop does not hide: they run side by side.
describe('simulate against faulty servers', { concurrency: true }, () => {
  it('catches a bigger limit than assumed, updates sent to the wrong customer, and heartbeats slower than assumed', async () => {
    const progress: SimulationProgress[] = [];
    const { report } = await simulate({
      ...quick,
      onProgress: (snapshot) => progress.push(snapshot),
      scenario: 'burst',
      durationS: 2,
      subscribers: 2,
      heartbeatMs: 150,
      heartbeatSlackMs: 150,
      embeddedServer: {
        heartbeatIntervalMs: 1200,
        core: { productLimits: { 'gps-basic': { requests: 100, windowSeconds: 1 } }, live: { bus: new MisroutingBus() } },
      },
    });
    const violations = report.violations.join('\n');
    assert.match(violations, /gps-basic VIN \w{17}: \d+ accepted in the window starting .*, over its limit of \d+/);
    assert.match(violations, /accepted, expected exactly the limit of/);
    assert.match(violations, /received \d+ update\(s\) of trailers that are not its customer's/);
    assert.match(violations, /missed \d+ of \d+ update\(s\)/);
    assert.match(violations, /ms without a heartbeat from .* \(interval 150 ms \+ slack 150 ms\)/);
    assert.equal(report.checks.find((c) => c.name === 'no 5xx')?.passed, true);
    // The last progress is the check of the accepted payloads' states: all of them settled.
    assert.deepEqual(progress.at(-1)?.checking, { settled: report.accepted, accepted: report.accepted });
    assert.ok(progress.some((snapshot) => snapshot.checking === undefined && snapshot.sent > 0), 'the traffic phase reported too');
  });

  it('holds heartbeats to the default slack when none is given (an option left undefined once turned the check off)', async () => {
    const { report } = await simulate({
      ...quick,
      scenario: 'steady',
      durationS: 4,
      subscribers: 1,
      heartbeatMs: 500,
      heartbeatSlackMs: undefined,
      embeddedServer: { heartbeatIntervalMs: 3000 },
    });
    assert.match(report.violations.join('\n'), /ms without a heartbeat from .* \(interval 500 ms \+ slack 1000 ms\)/);
  });

  it('catches 5xx answers and accepted payloads that are never processed', async () => {
    const progress: SimulationProgress[] = [];
    const { report } = await simulate({
      ...quick,
      onProgress: (snapshot) => progress.push(snapshot),
      scenario: 'steady',
      durationS: 1.5,
      subscribers: 1,
      processingWaitS: 0.5,
      embeddedServer: { intakeWorker: false, core: { windowCounter: new FailingCounter(systemClock) } },
    });
    const violations = report.violations.join('\n');
    assert.match(violations, /\d+ intake request\(s\) answered 5xx \(\d+×500\)/);
    assert.match(violations, /\d+ accepted payload\(s\) not processed within 0.5 s after the traffic stopped \(\d+ queued\)/);
    assert.ok(report.accepted > 0);
    assert.deepEqual(progress.at(-1)?.checking, { settled: 0, accepted: report.accepted });
  });
});

/** A window counter that counts the partners' status reads (the read limiter's keys). */
class ReadCounter extends MemoryWindowCounter {
  partnerReads = 0;
  override async increment(key: string, expiresAt: number): Promise<number> {
    if (key.startsWith('read:partners:')) this.partnerReads++;
    return super.increment(key, expiresAt);
  }
}

/** A window counter that takes 60 ms a count: each intake answer waits for it. */
class SlowCounter extends MemoryWindowCounter {
  override async increment(key: string, expiresAt: number): Promise<number> {
    if (key.startsWith('intake:')) await new Promise((resolve) => setTimeout(resolve, 60));
    return super.increment(key, expiresAt);
  }
}

describe('simulate as a load tool', () => {
  it('counts the wait of a request held back by --max-in-flight in its latency, and fails the rate check', async () => {
    // One request at a time, each answered after 60 ms or more: about 16/s can go out of the 30/s due.
    const { report } = await simulate({ ...quick, scenario: 'steady', durationS: 3, subscribers: 0, maxInFlight: 1, embeddedServer: { core: { windowCounter: new SlowCounter(systemClock) } } });
    assert.ok(report.latencyMs.p99 > 2 * report.serviceTimeMs.p99, `latency p99 ${report.latencyMs.p99} ms, service time p99 ${report.serviceTimeMs.p99} ms`);
    assert.ok(report.rate.achieved < 0.95 * report.rate.target, JSON.stringify(report.rate));
    assert.equal(report.thresholds.find((t) => t.threshold === 'rate>=95%')?.passed, false);
  });

  it('holds SSE subscribers beside gRPC ones to the same delivery, order and heartbeat invariants', async () => {
    // The slow SSE reader's run (checked below) has its own embedded server: both run at once.
    const [{ report, record }, slow] = await Promise.all([
      simulate({ ...quick, scenario: 'steady', durationS: 3, subscribers: 2, sseSubscribers: 2, heartbeatMs: 500 }),
      simulate({ ...quick, scenario: 'slow-subscriber', durationS: 3, subscribers: 0, sseSubscribers: 4 }),
    ]);
    assert.deepEqual(report.violations, []);
    assert.equal(report.live.sseSubscribers, 2);
    for (const subscriber of record.subscribers) {
      assert.ok(subscriber.updates.length > 0, `${subscriber.transport} subscriber ${subscriber.index} got updates`);
      assert.ok(subscriber.connections[0]!.heartbeats.length >= 3, `${subscriber.transport} subscriber ${subscriber.index} heartbeats`);
    }
    assert.deepEqual(record.subscribers.map((s) => s.transport), ['grpc', 'grpc', 'sse', 'sse']);
    // Each update, on either wire, carries the time the server made it: its payload's processed time.
    const processed = new Set(record.sends.flatMap((send) => (send.id && record.outcomes[send.id]?.processedAt !== undefined ? [`${send.vin}|${record.outcomes[send.id]!.processedAt}`] : [])));
    for (const subscriber of record.subscribers)
      assert.deepEqual(subscriber.updates.filter((update) => !processed.has(`${update.vin}|${update.ts}`)), [], `${subscriber.transport} subscriber ${subscriber.index}: updates at their payload's processed time`);
    const measured = report.histograms.liveLatency.reduce((sum, [, count]) => sum + count, 0);
    assert.equal(measured, report.live.updates, 'the live latency of every update, SSE ones too');
    // A slow SSE reader (its body left unread) is held to the latest state of each trailer.
    assert.deepEqual(slow.report.violations, []);
    assert.equal(slow.report.live.slowSubscribers, 2);
  });

  it('catches updates sent to the wrong customer on the SSE stream, and an SSE stream rotated away ends UNAUTHENTICATED and resubscribes', async () => {
    // Two embedded servers, two runs at once.
    const [misrouted, rotated] = await Promise.all([
      simulate({ ...quick, scenario: 'steady', durationS: 2, subscribers: 0, sseSubscribers: 2, embeddedServer: { core: { live: { bus: new MisroutingBus() } } } }),
      simulate({ ...quick, scenario: 'rotation', durationS: 3, subscribers: 0, sseSubscribers: 2 }),
    ]);
    const violations = misrouted.report.violations.join('\n');
    assert.match(violations, /SSE subscriber \d \(customer \d\) received \d+ update\(s\) of trailers that are not its customer's/);
    assert.match(violations, /SSE subscriber \d \(customer \d\) missed \d+ of \d+ update\(s\)/);
    assert.deepEqual(rotated.report.violations, []);
    assert.equal(rotated.report.rotations.length, 2);
    assert.ok(rotated.report.live.reconnects >= 1);
  });

  it("follows a ramp of stages: each stage's achieved rate within 5 % of what it asked for", async () => {
    const { report } = await simulate({ ...quick, vins: 10, scenario: 'steady', durationS: 0, stages: [{ durationMs: 2000, target: 40 }, { durationMs: 3000, target: 40 }, { durationMs: 2000, target: 80 }], subscribers: 0 });
    assert.deepEqual(report.violations, []);
    assert.equal(report.stages.length, 3);
    for (const stage of report.stages) assert.ok(Math.abs(stage.sent - stage.due) <= stage.due * 0.05, `${stage.sent} sent in ${stage.fromS}-${stage.toS} s, ${stage.due} due`);
    assert.deepEqual(report.thresholds, [{ threshold: 'rate>=95%', actual: report.thresholds[0]!.actual, passed: true }]);
    assert.equal(report.timeline[6]!.targetRate, 70);
  });

  it('reads back hundreds of accepted payloads in a few status reads, within a partner read limit of 20 a minute', async () => {
    const counter = new ReadCounter(systemClock);
    const plenty = { requests: 100_000, windowSeconds: 60 };
    const limits = { authenticate: plenty, failedAuthenticatePerAddress: plenty, read: { requests: 20, windowSeconds: 60 } };
    const { report } = await simulate({ ...quick, vins: 30, rate: 150, scenario: 'steady', durationS: 3, subscribers: 0, embeddedServer: { core: { windowCounter: counter, limits } } });
    const { accepted, processed } = report.processing;
    assert.ok(accepted >= 200, `${accepted} accepted`);
    assert.equal(processed, accepted, 'every accepted payload read back processed');
    assert.ok(counter.partnerReads <= 20, `${counter.partnerReads} status reads for ${accepted} payloads`);
  });

  it('stops the traffic at the first breached threshold with abortOnFail, and judges what it sent', async () => {
    const { report } = await simulate({ ...quick, scenario: 'steady', durationS: 30, subscribers: 0, thresholds: ['p50<0ms'], abortOnFail: true });
    assert.ok(report.aborted, 'aborted');
    assert.deepEqual(report.aborted.breached.filter((b) => b.startsWith('p50<0ms')).length, 1);
    assert.ok(report.aborted.atS < 5, `aborted at ${report.aborted.atS} s`);
    assert.ok(report.sent < 30 * 30 / 2, `${report.sent} sent of 900`);
    assert.deepEqual(report.violations, [], 'what was sent is judged like any run');
    assert.equal(report.thresholds.find((t) => t.threshold === 'p50<0ms')?.passed, false);
  });
});
