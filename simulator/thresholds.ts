/**
 * Thresholds: the pass/fail criteria QA puts on a run's figures in CI (`--threshold 'p99<250ms'`, as
 * k6's thresholds), beside the invariants. A breached threshold makes `trailwire simulate` exit 99
 * (k6's code), while a broken invariant keeps exiting 1. Request latencies are counted from when each
 * request was due, so a server that stalls cannot hide the requests it held up (no coordinated
 * omission). The same judgement runs during the traffic (for `--abort-on-fail`, on what has happened
 * so far) and at the end (on the whole run).
 *
 * The metrics: `p50`, `p90`, `p95`, `p99`, `max` (request latency), `live-p50`, `live-p95`,
 * `live-p99` (from a request's due time to its update on a subscriber's stream), `webhook-p50`,
 * `webhook-p95`, `webhook-p99` (from a payload's 202 to its update at a webhook endpoint), `error-rate`
 * (answers other than 202 and 429, and requests without one, of all sent) and `rate` (the achieved
 * arrival rate as a share of the schedule's). Latencies take `ms` or `s`, the others `%`.
 */
import type { ArrivalSchedule } from './arrival-schedule.ts';
import type { SendRecord } from './run-record.ts';

const LATENCY_METRICS = ['p50', 'p90', 'p95', 'p99', 'max', 'live-p50', 'live-p95', 'live-p99', 'webhook-p50', 'webhook-p95', 'webhook-p99'] as const;
const SHARE_METRICS = ['error-rate', 'rate'] as const;
export type ThresholdMetric = (typeof LATENCY_METRICS)[number] | (typeof SHARE_METRICS)[number];
type Operator = '<' | '<=' | '>' | '>=';

export interface Threshold {
  /** As written, e.g. `p99<250ms`. */
  expression: string;
  metric: ThresholdMetric;
  operator: Operator;
  /** ms for latencies, a fraction (0..1) for shares. */
  value: number;
}

/**
 * Applied unless a `rate` threshold is given: a run that sent under 95 % of what its schedule asked
 * for (a server so slow that `--max-in-flight` held requests back, limits that capped the plan)
 * did not test the load it names.
 */
export const DEFAULT_RATE_THRESHOLD = 'rate>=95%';

/** Reads one `--threshold`; throws a `TypeError` naming it when it is malformed. */
export function parseThreshold(expression: string): Threshold {
  const match = /^\s*([a-z][a-z0-9-]*)\s*(<=|>=|<|>)\s*(\d+(?:\.\d+)?)\s*(ms|s|%)?\s*$/.exec(expression);
  const metrics = [...LATENCY_METRICS, ...SHARE_METRICS].join(', ');
  if (!match) throw new TypeError(`--threshold ${JSON.stringify(expression)}: expected METRIC OP VALUE such as p99<250ms, error-rate<1%, rate>=95% (metrics: ${metrics})`);
  const [, metric, operator, number, unit] = match as unknown as [string, string, Operator, string, string | undefined];
  if ((LATENCY_METRICS as readonly string[]).includes(metric)) {
    if (unit !== 'ms' && unit !== 's') throw new TypeError(`--threshold ${JSON.stringify(expression)}: ${metric} is a latency, give it in ms or s (e.g. ${metric}<250ms)`);
    return { expression, metric: metric as ThresholdMetric, operator, value: Number(number) * (unit === 's' ? 1000 : 1) };
  }
  if ((SHARE_METRICS as readonly string[]).includes(metric)) {
    if (unit !== '%') throw new TypeError(`--threshold ${JSON.stringify(expression)}: ${metric} is a share, give it in % (e.g. ${metric === 'rate' ? 'rate>=95%' : 'error-rate<1%'})`);
    return { expression, metric: metric as ThresholdMetric, operator, value: Number(number) / 100 };
  }
  throw new TypeError(`--threshold ${JSON.stringify(expression)}: unknown metric ${JSON.stringify(metric)}; one of ${metrics}`);
}

/** The thresholds of a run: those given, and the default rate check unless one of them judges the rate. */
export function thresholdsOf(expressions: readonly string[]): Threshold[] {
  const thresholds = expressions.map(parseThreshold);
  if (!thresholds.some((threshold) => threshold.metric === 'rate')) thresholds.push(parseThreshold(DEFAULT_RATE_THRESHOLD));
  return thresholds;
}

/** What thresholds are judged on; a figure left undefined (nothing measured yet) is not judged. */
export interface ThresholdFigures {
  /** Request latencies from the due time, ascending. */
  latenciesMs: readonly number[];
  /** Live-update latencies from the due time, ascending; undefined while unknown (during the traffic). */
  liveLatenciesMs?: readonly number[];
  /** Webhook latencies from the 202, ascending; undefined while unknown (during the traffic) or without webhooks. */
  webhookLatenciesMs?: readonly number[];
  errorRate?: number;
  /** Achieved arrival rate over the schedule's. */
  rateShare?: number;
}

export interface ThresholdResult {
  threshold: string;
  /** The measured figure, e.g. `2481 ms` or `97.2 %`; `-` when nothing was measured. */
  actual: string;
  passed: boolean;
}

/** Judges each threshold on `figures`; one with nothing to judge (no live updates, say) passes with actual `-`. */
export function judgeThresholds(thresholds: readonly Threshold[], figures: ThresholdFigures): ThresholdResult[] {
  return thresholds.map((threshold) => {
    const value = figureOf(threshold.metric, figures);
    if (value === undefined) return { threshold: threshold.expression, actual: '-', passed: true };
    const share = (SHARE_METRICS as readonly string[]).includes(threshold.metric);
    const actual = share ? `${round(value * 100, 2)} %` : `${round(value, 1)} ms`;
    return { threshold: threshold.expression, actual, passed: holds(value, threshold.operator, threshold.value) };
  });
}

function figureOf(metric: ThresholdMetric, figures: ThresholdFigures): number | undefined {
  switch (metric) {
    case 'error-rate':
      return figures.errorRate;
    case 'rate':
      return figures.rateShare;
    case 'max':
      return figures.latenciesMs.length > 0 ? figures.latenciesMs.at(-1) : undefined;
    default: {
      // `p99`, `live-p99`, `webhook-p99`: a quantile of the latencies the prefix names.
      const [, of, percent] = /^(live-|webhook-)?p(\d+)$/.exec(metric)!;
      const values = of === 'live-' ? figures.liveLatenciesMs : of === 'webhook-' ? figures.webhookLatenciesMs : figures.latenciesMs;
      if (!values || values.length === 0) return undefined;
      return quantile(values, Number(percent) / 100);
    }
  }
}

function holds(value: number, operator: Operator, bound: number): boolean {
  switch (operator) {
    case '<':
      return value < bound;
    case '<=':
      return value <= bound;
    case '>':
      return value > bound;
    case '>=':
      return value >= bound;
  }
}

/**
 * The achieved and target arrival rates (requests/s) of `sent` requests over the first `spanMs` of
 * the traffic: the target is what the schedule asked for up to then (to its end at most); a run
 * whose requests went out after the schedule's end (held back by `--max-in-flight`) stretches the
 * span, and so lowers the achieved rate.
 */
export function arrivalRates(schedule: ArrivalSchedule, sent: number, spanMs: number): { target: number; achieved: number } {
  const scheduled = Math.min(spanMs, schedule.durationMs);
  if (scheduled <= 0) return { target: 0, achieved: 0 };
  return { target: (schedule.requestsBetween(0, scheduled) * 1000) / scheduled, achieved: (sent * 1000) / spanMs };
}

/**
 * The request figures of the planned `sends` (probes left out) of a run that started at
 * `startedAt`. At the end of the run (`now` absent) every request has its answer. During the
 * traffic (`now` given) a request still unanswered counts as answered now, and so does each one
 * due but not yet sent (`waitingDue`, held back by `--max-in-flight`): a stalled server shows at
 * once, not when its answers finally come.
 */
export function requestFigures(
  sends: readonly SendRecord[],
  schedule: ArrivalSchedule,
  startedAt: number,
  during?: { now: number; waitingDue: readonly number[] },
): ThresholdFigures {
  const latencies: number[] = [];
  let answered = 0;
  let errors = 0;
  let lastSentAt = startedAt;
  for (const send of sends) {
    lastSentAt = Math.max(lastSentAt, send.sentAt);
    if (send.answeredAt === 0) {
      if (during) latencies.push(during.now - send.plannedAt);
      continue;
    }
    answered++;
    if (send.status !== 202 && send.status !== 429) errors++;
    // A request without an answer (a network error) has no latency to count.
    if (send.status !== 0) latencies.push(send.answeredAt - send.plannedAt);
  }
  if (during) for (const due of during.waitingDue) latencies.push(during.now - due);
  latencies.sort((a, b) => a - b);
  const spanMs = during ? during.now - startedAt : Math.max(schedule.durationMs, lastSentAt - startedAt);
  const rates = arrivalRates(schedule, sends.length, spanMs);
  return {
    latenciesMs: latencies,
    errorRate: answered > 0 ? errors / answered : undefined,
    // Too early to tell in the first second of the traffic.
    rateShare: rates.target > 0 && (!during || spanMs >= 1000) ? rates.achieved / rates.target : undefined,
  };
}

/** The `q` quantile of ascending `sorted` values (nearest rank); 0 when empty. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

function round(value: number, digits: number): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}
