/**
 * The arrival schedule of a run (the open model): how many intake requests fall due per second at
 * each moment of the traffic, whatever the server does. A constant `--rate`, or `--stages
 * 30s:50,60s:200,30s:0`: a ramping arrival rate, linear within each stage from the rate the stage
 * before ended at (0 before the first, as k6's ramping-arrival-rate with its default start rate) to
 * the stage's target. The planner asks it how many requests fall due in a span and where, inside a
 * span, a given share of them falls; the report asks it what each stage aimed for. Times are ms from
 * the start of the traffic.
 */

/** One stage of a ramp: over `durationMs`, the rate moves linearly to `target` requests/s. */
export interface Stage {
  durationMs: number;
  target: number;
}

/** A stage as the schedule runs it. */
export interface StageSpan {
  /** ms from the start of the traffic. */
  from: number;
  to: number;
  startRate: number;
  target: number;
  /** Requests due in the stage. */
  due: number;
}

export class ArrivalSchedule {
  private readonly spans: StageSpan[];

  private constructor(stages: readonly Stage[]) {
    if (stages.length === 0) throw new TypeError('ArrivalSchedule: at least one stage');
    this.spans = [];
    let from = 0;
    let rate = 0;
    for (const [index, stage] of stages.entries()) {
      if (!(Number.isFinite(stage.durationMs) && stage.durationMs >= 0)) throw new TypeError(`ArrivalSchedule: stage ${index + 1} needs a duration of 0 or more, got ${stage.durationMs}`);
      if (!(Number.isFinite(stage.target) && stage.target >= 0)) throw new TypeError(`ArrivalSchedule: stage ${index + 1} needs a target rate of 0 or more, got ${stage.target}`);
      const to = from + stage.durationMs;
      this.spans.push({ from, to, startRate: rate, target: stage.target, due: ((rate + stage.target) / 2) * (stage.durationMs / 1000) });
      from = to;
      rate = stage.target;
    }
    if (!(this.durationMs > 0)) throw new TypeError('ArrivalSchedule: the stages last no time');
  }

  /** `rate` requests/s for `durationMs`. */
  static constant(rate: number, durationMs: number): ArrivalSchedule {
    // A zero-length first stage starts the rate at `rate` at once.
    return new ArrivalSchedule([{ durationMs: 0, target: rate }, { durationMs, target: rate }]);
  }

  /** A ramp through `stages`, from 0 requests/s. */
  static ramp(stages: readonly Stage[]): ArrivalSchedule {
    return new ArrivalSchedule(stages);
  }

  get durationMs(): number {
    return this.spans.at(-1)!.to;
  }

  /** The highest rate the schedule asks for. */
  get peakRate(): number {
    return Math.max(...this.spans.map((span) => Math.max(span.startRate, span.target)));
  }

  /** The stages with some duration, as run (a constant rate is one stage). */
  get stages(): StageSpan[] {
    return this.spans.filter((span) => span.to > span.from).map((span) => ({ ...span }));
  }

  /** The stages that make this schedule again with `ramp` (a rate at the start is a zero-length first stage). */
  toStages(): Stage[] {
    const first = this.spans[0]!;
    const stages = this.spans.map((span) => ({ durationMs: span.to - span.from, target: span.target }));
    return first.startRate > 0 ? [{ durationMs: 0, target: first.startRate }, ...stages] : stages;
  }

  /** Requests per second due at `ms`. */
  rateAt(ms: number): number {
    const span = this.spans.find((candidate) => ms >= candidate.from && ms < candidate.to);
    return span ? this.rateAtWithin(span, ms) : 0;
  }

  /** Requests due between `fromMs` and `toMs` (the integral of the rate; clipped to the schedule). */
  requestsBetween(fromMs: number, toMs: number): number {
    let total = 0;
    for (const span of this.spans) {
      const a = Math.max(fromMs, span.from);
      const b = Math.min(toMs, span.to);
      if (b <= a) continue;
      total += ((this.rateAtWithin(span, a) + this.rateAtWithin(span, b)) / 2) * ((b - a) / 1000);
    }
    return total;
  }

  /**
   * The moment in [`fromMs`, `toMs`] by which `share` (0..1) of the requests due in that span are
   * due: how the planner spreads a window's requests along a ramp. An empty span is spread evenly.
   */
  timeAtShare(fromMs: number, toMs: number, share: number): number {
    const total = this.requestsBetween(fromMs, toMs);
    if (total <= 0) return fromMs + share * (toMs - fromMs);
    const wanted = share * total;
    let low = fromMs;
    let high = toMs;
    // The integral is monotone: 40 halvings leave well under a millisecond.
    for (let i = 0; i < 40; i++) {
      const mid = (low + high) / 2;
      if (this.requestsBetween(fromMs, mid) < wanted) low = mid;
      else high = mid;
    }
    return (low + high) / 2;
  }

  /** The rate at `ms` inside `span`, its end included (where `rateAt` would answer the next stage's). */
  private rateAtWithin(span: StageSpan, ms: number): number {
    return span.startRate + ((span.target - span.startRate) * (ms - span.from)) / (span.to - span.from);
  }
}

/**
 * Reads `--stages`: comma-separated `DURATION:RATE`, the duration in `ms`, `s`, `m` or `h` (plain
 * seconds without a unit), the rate in requests/s. Throws a `TypeError` naming the stage it cannot read.
 */
export function parseStages(text: string): Stage[] {
  const entries = text.split(',').map((entry) => entry.trim());
  if (entries.length === 0 || entries.every((entry) => entry === '')) throw new TypeError('--stages: expected DURATION:RATE[,DURATION:RATE...], e.g. 30s:50,60s:200,30s:0');
  return entries.map((entry) => {
    const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?:(\d+(?:\.\d+)?)$/.exec(entry);
    if (!match) throw new TypeError(`--stages: cannot read the stage ${JSON.stringify(entry)}; expected DURATION:RATE such as 30s:50 (units ms, s, m, h)`);
    const unitMs = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(match[2] ?? 's') as 'ms' | 's' | 'm' | 'h'];
    return { durationMs: Number(match[1]) * unitMs, target: Number(match[3]) };
  });
}
