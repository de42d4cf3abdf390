/**
 * The simulation report: what a run did and what it found, computed from its `RunRecord` and the
 * invariant results. `--json` prints `SimulationReport` as is; the final table and the HTML page
 * (`html-report.ts`) are views of it. Latencies are in ms, counted from when each request was due
 * (the service time, from when it left, beside them); the timeline has one entry per second of
 * traffic, by due time. `exitCodeOf` turns a report into the command's exit code.
 */
import type { ArrivalSchedule } from './arrival-schedule.ts';
import type { CheckResult } from './invariants.ts';
import { expectedUpdates, updateKey } from './expected-updates.ts';
import type { RunRecord, SendRecord, WebhookRecord } from './run-record.ts';
import { arrivalRates, judgeThresholds, quantile, requestFigures, type Threshold, type ThresholdResult } from './thresholds.ts';

export interface LatencySummary {
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export interface TimelineEntry {
  /** Seconds since the traffic started. */
  second: number;
  sent: number;
  accepted: number;
  limited: number;
  /** Other 4xx answers. */
  clientErrors: number;
  /** 5xx answers and requests without an answer. */
  serverErrors: number;
  latencyP50: number;
  latencyP99: number;
  liveUpdates: number;
  liveLatencyP50: number;
  /** Requests/s the schedule asked for in the middle of this second. */
  targetRate: number;
}

/** One stage of the schedule (a constant rate is one stage) and what the run did in it. */
export interface StageReport {
  /** Seconds since the traffic started. */
  fromS: number;
  toS: number;
  /** Requests/s at the stage's start and end (linear between). */
  startRate: number;
  targetRate: number;
  /** Requests the schedule asked for, and those the plan had due in the stage that went out. */
  due: number;
  sent: number;
  /** Sent over the stage's length, requests/s, and the mean the schedule asked for. */
  achievedRate: number;
  meanTargetRate: number;
  latencyMs: LatencySummary;
}

export interface SimulationReport {
  scenario: string;
  mode: 'embedded' | 'remote';
  seed: number;
  durationS: number;
  vins: number;
  /** The schedule's mean rate, and what was achieved (requests sent over the span they went out in). */
  rate: { target: number; achieved: number };
  stages: StageReport[];
  sent: number;
  accepted: number;
  limited: number;
  /** Answers other than 202 and 429, and requests without an answer. */
  errors: number;
  statusCounts: Record<string, number>;
  /** From when each request was due to its answer. */
  latencyMs: LatencySummary;
  /** From when each request left to its answer (what a closed-model tool reports as latency). */
  serviceTimeMs: LatencySummary;
  /** The limit assumed for each product, and what each product saw. */
  products: Record<string, { limit: { requests: number; windowSeconds: number }; sent: number; accepted: number; limited: number }>;
  processing: { accepted: number; processed: number; failed: number; pending: number };
  live: {
    /** gRPC and SSE together. */
    subscribers: number;
    sseSubscribers: number;
    slowSubscribers: number;
    /** Updates received, summed over subscribers. */
    updates: number;
    heartbeats: number;
    reconnects: number;
    /** From the intake request's due time to the update on a (non-slow) subscriber's stream, gRPC or SSE. */
    latencyMs: LatencySummary;
  };
  rotations: Array<{ audience: string; subject: string; oldTokenStatus: number | null; oldKeyStatus: number | null }>;
  /** What the run's webhook endpoints received (`--webhooks`); absent when it registered none. */
  webhooks?: WebhookReport;
  /** Each invariant check, with its own violations. */
  checks: Array<{ name: string; judged: string; passed: boolean; violations: string[] }>;
  /** Every check's violations, in check order; any makes the command exit 1. */
  violations: string[];
  /** Each threshold with the figure it was judged on; a breach makes the command exit 99. */
  thresholds: ThresholdResult[];
  /** Set when `--abort-on-fail` stopped the traffic: seconds into it, and what was breached then. */
  aborted?: { atS: number; breached: string[] };
  timeline: TimelineEntry[];
  /** Histograms for the HTML report: [upper bound ms, count]. */
  histograms: { latency: Array<[number, number]>; liveLatency: Array<[number, number]> };
}

export interface WebhookReport {
  endpoints: number;
  /** Requests received at the endpoints, redeliveries included. */
  deliveries: number;
  /** Deliveries again under a `webhook-id` already received (allowed: at least once). */
  redeliveries: number;
  /** Deliveries a Standard Webhooks receiver would refuse (signature, headers, body). */
  invalid: number;
  /** Events in the first delivery of each `webhook-id`. */
  events: number;
  /** Endpoints the simulator deleted at the end. */
  deleted: number;
  /** Requests at no endpoint's path (an endpoint an earlier run left behind): not judged. */
  stray: number;
  /** From the 202 of each processed payload to the first arrival of its update at each endpoint of its customer. */
  latencyMs: LatencySummary;
}

const HISTOGRAM_BOUNDS = [1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 75, 100, 150, 200, 300, 500, 750, 1000, 2000, 5000, Infinity];

/** Builds the report of a run: its figures, its invariant `checks`, and `thresholds` judged on it. */
export function buildReport(record: RunRecord, checks: CheckResult[], options: { arrivals: ArrivalSchedule; thresholds: readonly Threshold[] }): SimulationReport {
  const { arrivals } = options;
  const planned = record.sends.filter((send) => send.group !== null);
  const statusCounts: Record<string, number> = {};
  for (const send of planned) statusCounts[String(send.status || 'no answer')] = (statusCounts[String(send.status || 'no answer')] ?? 0) + 1;
  const accepted = planned.filter((send) => send.status === 202);
  const limited = planned.filter((send) => send.status === 429);
  const answered = planned.filter((send) => send.status !== 0);

  const products: SimulationReport['products'] = {};
  for (const [product, limit] of Object.entries(record.limits)) {
    const mine = planned.filter((send) => send.product === product);
    products[product] = {
      limit: { requests: limit.requests, windowSeconds: limit.windowSeconds },
      sent: mine.length,
      accepted: mine.filter((send) => send.status === 202).length,
      limited: mine.filter((send) => send.status === 429).length,
    };
  }

  const outcomes = accepted.map((send) => (send.id ? record.outcomes[send.id]?.status : undefined) ?? 'unknown');
  const live = liveLatencies(record);
  const webhookLatencies = record.webhooks ? webhookLatenciesOf(record) : undefined;
  const figures = {
    ...requestFigures(planned, arrivals, record.startedAt),
    liveLatenciesMs: live.map((entry) => entry.latency).sort((a, b) => a - b),
    webhookLatenciesMs: webhookLatencies?.sort((a, b) => a - b),
  };
  const lastSentAt = Math.max(record.startedAt, ...planned.map((send) => send.sentAt));
  const rate = arrivalRates(arrivals, planned.length, Math.max(arrivals.durationMs, lastSentAt - record.startedAt));
  const violations = checks.flatMap((check) => check.violations);
  return {
    scenario: record.scenario,
    mode: record.mode,
    seed: record.seed,
    durationS: arrivals.durationMs / 1000,
    vins: new Set(planned.map((send) => send.vin)).size,
    rate: { target: round(rate.target, 1), achieved: round(rate.achieved, 1) },
    stages: stagesOf(record, planned, arrivals),
    sent: planned.length,
    accepted: accepted.length,
    limited: limited.length,
    errors: planned.length - accepted.length - limited.length,
    statusCounts,
    latencyMs: summary(answered.map((send) => send.answeredAt - send.plannedAt)),
    serviceTimeMs: summary(answered.map((send) => send.answeredAt - send.sentAt)),
    products,
    processing: {
      accepted: accepted.length,
      processed: outcomes.filter((s) => s === 'processed').length,
      failed: outcomes.filter((s) => s === 'failed').length,
      pending: outcomes.filter((s) => s !== 'processed' && s !== 'failed').length,
    },
    live: {
      subscribers: record.subscribers.length,
      sseSubscribers: record.subscribers.filter((s) => s.transport === 'sse').length,
      slowSubscribers: record.subscribers.filter((s) => s.slow).length,
      updates: record.subscribers.reduce((sum, s) => sum + s.updates.length, 0),
      heartbeats: record.subscribers.reduce((sum, s) => sum + s.connections.reduce((n, c) => n + c.heartbeats.length, 0), 0),
      reconnects: record.subscribers.reduce((sum, s) => sum + Math.max(0, s.connections.length - 1), 0),
      latencyMs: summary(live.map((entry) => entry.latency)),
    },
    rotations: record.rotations.map((r) => ({ audience: r.audience, subject: r.subject, oldTokenStatus: r.oldTokenStatus ?? null, oldKeyStatus: r.oldKeyStatus ?? null })),
    ...(record.webhooks ? { webhooks: webhookReportOf(record.webhooks, figures.webhookLatenciesMs ?? []) } : {}),
    checks: checks.map((check) => ({ name: check.name, judged: check.judged, passed: check.violations.length === 0, violations: check.violations })),
    violations,
    thresholds: judgeThresholds(options.thresholds, figures),
    ...(record.aborted ? { aborted: { atS: round((record.aborted.at - record.startedAt) / 1000, 1), breached: record.aborted.breached } } : {}),
    timeline: timelineOf(record, planned, live, arrivals),
    histograms: { latency: histogram(figures.latenciesMs), liveLatency: histogram(figures.liveLatenciesMs) },
  };
}

/**
 * The command's exit code for a report: 1 when an invariant broke (the service is wrong), else 99
 * when a threshold was breached (it is too slow, as k6 exits), else 0.
 */
export function exitCodeOf(report: SimulationReport): 0 | 1 | 99 {
  if (report.violations.length > 0) return 1;
  return report.thresholds.some((threshold) => !threshold.passed) ? 99 : 0;
}

/** Each stage: what the schedule asked for and what the requests due in it did. */
function stagesOf(record: RunRecord, sends: SendRecord[], arrivals: ArrivalSchedule): StageReport[] {
  return arrivals.stages.map((stage) => {
    const mine = sends.filter((send) => send.plannedAt - record.startedAt >= stage.from && send.plannedAt - record.startedAt < stage.to);
    const seconds = (stage.to - stage.from) / 1000;
    return {
      fromS: stage.from / 1000,
      toS: stage.to / 1000,
      startRate: stage.startRate,
      targetRate: stage.target,
      due: round(stage.due, 1),
      sent: mine.length,
      achievedRate: round(mine.length / seconds, 1),
      meanTargetRate: round(stage.due / seconds, 1),
      latencyMs: summary(mine.filter((send) => send.status !== 0).map((send) => send.answeredAt - send.plannedAt)),
    };
  });
}

/** Update latencies: intake request due to update received, for non-slow subscribers. */
function liveLatencies(record: RunRecord): Array<{ at: number; latency: number }> {
  const sentAtByKey = new Map<string, number>();
  for (const send of record.sends) {
    const processedAt = send.id ? record.outcomes[send.id]?.processedAt : undefined;
    if (processedAt !== undefined) sentAtByKey.set(updateKey(send.vin, processedAt), send.plannedAt);
  }
  const entries: Array<{ at: number; latency: number }> = [];
  for (const subscriber of record.subscribers) {
    if (subscriber.slow) continue;
    for (const update of subscriber.updates) {
      const sentAt = sentAtByKey.get(updateKey(update.vin, update.ts));
      if (sentAt !== undefined) entries.push({ at: update.receivedAt, latency: update.receivedAt - sentAt });
    }
  }
  return entries;
}

/**
 * Webhook latencies: for each endpoint, from the 202 of each processed payload of its customer to the
 * first valid delivery of its update there (payloads processed together share that arrival).
 */
function webhookLatenciesOf(record: RunRecord): number[] {
  const expected = expectedUpdates(record);
  const latencies: number[] = [];
  for (const endpoint of record.webhooks!.endpoints) {
    const firstArrival = new Map<string, number>();
    for (const delivery of endpoint.deliveries) {
      if (delivery.invalid !== undefined) continue;
      for (const event of delivery.events) if (event.type === 'trailer.updated' && !firstArrival.has(updateKey(event.vin, event.ts))) firstArrival.set(updateKey(event.vin, event.ts), delivery.receivedAt);
    }
    for (const update of expected) {
      const arrivedAt = update.owner === endpoint.customer ? firstArrival.get(update.key) : undefined;
      if (arrivedAt !== undefined) latencies.push(arrivedAt - update.acceptedAt);
    }
  }
  return latencies;
}

function webhookReportOf(webhooks: WebhookRecord, latenciesMs: readonly number[]): WebhookReport {
  const deliveries = webhooks.endpoints.flatMap((endpoint) => endpoint.deliveries);
  const firstOfId = new Map<string, (typeof deliveries)[number]>();
  for (const endpoint of webhooks.endpoints)
    for (const delivery of endpoint.deliveries) if (!firstOfId.has(`${endpoint.index}|${delivery.webhookId}`)) firstOfId.set(`${endpoint.index}|${delivery.webhookId}`, delivery);
  return {
    endpoints: webhooks.endpoints.length,
    deliveries: deliveries.length,
    redeliveries: deliveries.length - firstOfId.size,
    invalid: deliveries.filter((delivery) => delivery.invalid !== undefined).length,
    events: [...firstOfId.values()].reduce((sum, delivery) => sum + delivery.events.length, 0),
    deleted: webhooks.endpoints.filter((endpoint) => endpoint.deleted).length,
    stray: webhooks.stray,
    latencyMs: summary([...latenciesMs]),
  };
}

function timelineOf(record: RunRecord, sends: SendRecord[], live: Array<{ at: number; latency: number }>, arrivals: ArrivalSchedule): TimelineEntry[] {
  const seconds = Math.max(1, Math.ceil((record.trafficEndedAt - record.startedAt) / 1000));
  const buckets = Array.from({ length: seconds }, (_, second) => ({
    entry: {
      second,
      sent: 0,
      accepted: 0,
      limited: 0,
      clientErrors: 0,
      serverErrors: 0,
      latencyP50: 0,
      latencyP99: 0,
      liveUpdates: 0,
      liveLatencyP50: 0,
      targetRate: round(arrivals.rateAt(second * 1000 + 500), 1),
    },
    latencies: [] as number[],
    live: [] as number[],
  }));
  const bucketOf = (at: number) => buckets[Math.min(seconds - 1, Math.max(0, Math.floor((at - record.startedAt) / 1000)))]!;
  for (const send of sends) {
    const bucket = bucketOf(send.plannedAt);
    bucket.entry.sent++;
    if (send.status === 202) bucket.entry.accepted++;
    else if (send.status === 429) bucket.entry.limited++;
    else if (send.status === 0 || send.status >= 500) bucket.entry.serverErrors++;
    else bucket.entry.clientErrors++;
    if (send.status !== 0) bucket.latencies.push(send.answeredAt - send.plannedAt);
  }
  for (const entry of live) {
    if (entry.at > record.trafficEndedAt + 1000) continue;
    const bucket = bucketOf(entry.at);
    bucket.entry.liveUpdates++;
    bucket.live.push(entry.latency);
  }
  return buckets.map(({ entry, latencies, live: liveLatency }) => {
    latencies.sort((a, b) => a - b);
    liveLatency.sort((a, b) => a - b);
    return { ...entry, latencyP50: quantile(latencies, 0.5), latencyP99: quantile(latencies, 0.99), liveLatencyP50: quantile(liveLatency, 0.5) };
  });
}

function summary(values: number[]): LatencySummary {
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: quantile(sorted, 0.5), p90: quantile(sorted, 0.9), p99: quantile(sorted, 0.99), max: sorted.at(-1) ?? 0 };
}

function histogram(values: readonly number[]): Array<[number, number]> {
  const counts = HISTOGRAM_BOUNDS.map(() => 0);
  for (const value of values) counts[HISTOGRAM_BOUNDS.findIndex((bound) => value <= bound)]!++;
  // Trailing empty buckets say nothing. JSON has no Infinity: the open-ended last bound is written as -1.
  let last = counts.length - 1;
  while (last > 0 && counts[last] === 0) last--;
  return HISTOGRAM_BOUNDS.slice(0, last + 1).map((bound, index) => [Number.isFinite(bound) ? bound : -1, counts[index]!]);
}

function round(value: number, digits: number): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

/** The final table, for a terminal. */
export function formatReportTable(report: SimulationReport): string {
  const lines: string[] = [];
  const row = (label: string, value: string) => lines.push(`  ${label.padEnd(22)} ${value}`);
  lines.push(`Trailwire simulation: ${report.scenario} (${report.mode}, seed ${report.seed}, ${report.durationS} s, ${report.vins} VINs)`);
  row('rate', `${report.rate.achieved}/s (target ${report.rate.target}/s)`);
  row('sent', String(report.sent));
  row('accepted (202)', String(report.accepted));
  row('limited (429)', String(report.limited));
  row('errors', `${report.errors}${report.errors > 0 ? `  ${JSON.stringify(report.statusCounts)}` : ''}`);
  if (report.stages.length > 1)
    for (const stage of report.stages)
      row(
        `  ${stage.fromS}-${stage.toS} s`,
        `${stage.startRate}->${stage.targetRate}/s: ${stage.achievedRate}/s of ${stage.meanTargetRate}/s, p99 ${stage.latencyMs.p99} ms`,
      );
  row('latency', `p50 ${report.latencyMs.p50} ms  p90 ${report.latencyMs.p90} ms  p99 ${report.latencyMs.p99} ms  max ${report.latencyMs.max} ms  (from when due)`);
  row('service time', `p50 ${report.serviceTimeMs.p50} ms  p90 ${report.serviceTimeMs.p90} ms  p99 ${report.serviceTimeMs.p99} ms  max ${report.serviceTimeMs.max} ms  (from when sent)`);
  for (const [product, stats] of Object.entries(report.products))
    row(`  ${product}`, `limit ${stats.limit.requests}/${stats.limit.windowSeconds}s: sent ${stats.sent}, accepted ${stats.accepted}, limited ${stats.limited}`);
  row('processed', `${report.processing.processed} of ${report.processing.accepted} accepted (${report.processing.failed} failed, ${report.processing.pending} pending)`);
  row(
    'live',
    `${report.live.subscribers} subscribers${report.live.sseSubscribers ? ` (${report.live.sseSubscribers} SSE)` : ''}${report.live.slowSubscribers ? ` (${report.live.slowSubscribers} slow)` : ''}, ${report.live.updates} updates, ${report.live.heartbeats} heartbeats, ${report.live.reconnects} reconnects`,
  );
  row('live latency', `p50 ${report.live.latencyMs.p50} ms  p99 ${report.live.latencyMs.p99} ms  max ${report.live.latencyMs.max} ms`);
  if (report.webhooks) {
    const hooks = report.webhooks;
    row(
      'webhooks',
      `${hooks.endpoints} endpoints, ${hooks.deliveries} deliveries (${hooks.redeliveries} redelivered, ${hooks.invalid} invalid), ${hooks.events} events, ${hooks.deleted} deleted${hooks.stray ? `, ${hooks.stray} stray requests` : ''}`,
    );
    row('webhook latency', `p50 ${hooks.latencyMs.p50} ms  p99 ${hooks.latencyMs.p99} ms  max ${hooks.latencyMs.max} ms  (from the 202)`);
  }
  for (const rotation of report.rotations)
    row(`rotation`, `${rotation.audience} ${rotation.subject}: old token ${rotation.oldTokenStatus ?? '-'}, old key ${rotation.oldKeyStatus ?? '-'}`);
  lines.push('');
  for (const check of report.checks) lines.push(`  ${check.passed ? 'ok  ' : 'FAIL'} ${check.name} (${check.judged})`);
  for (const threshold of report.thresholds) lines.push(`  ${threshold.passed ? 'ok  ' : 'FAIL'} threshold ${threshold.threshold} (${threshold.actual})`);
  if (report.aborted) lines.push(`  aborted at ${report.aborted.atS} s: ${report.aborted.breached.join(', ')}`);
  lines.push('');
  if (report.violations.length === 0) lines.push('No violations.');
  else {
    lines.push(`${report.violations.length} violation(s):`);
    for (const violation of report.violations) lines.push(`  - ${violation}`);
  }
  const breached = report.thresholds.filter((threshold) => !threshold.passed);
  if (breached.length > 0) lines.push(`${breached.length} threshold(s) breached: ${breached.map((threshold) => threshold.threshold).join(', ')}`);
  return `${lines.join('\n')}\n`;
}
