/**
 * Prometheus metrics of the HTTP adapter: request counts and latency by route template (never by raw
 * path, so ids cannot explode the label space). Each app has its own registry, so several apps in
 * one process (tests, embedding) do not collide; other parts register their gauges on it.
 *
 * The request path only adds to plain numbers, per series, and the registry reads them at scrape
 * time: prom-client hashes a series' label values on every `inc` and `observe`, even through a bound
 * child, which cost the HTTP thread about a microsecond a request for the two metrics (a CPU profile
 * of `npm run bench -- accept-path`). The counter is prom-client's, told its new counts when scraped
 * (`collect`); the latency histogram is answered in prom-client's own metric format (`get`), since
 * prom-client takes histogram observations one at a time only.
 */
import type { Context, Middleware } from 'koa';
import { collectDefaultMetrics, Counter, Gauge, Histogram, type Metric, type MetricValueWithName, Registry } from 'prom-client';
import type { IntakeQueue } from '../../core/intake-queue.ts';
import type { WebhookDeliverer } from '../../core/webhook-deliverer.ts';

export interface HttpMetrics {
  registry: Registry;
  /** Counts and times each request below it (Trailwire's app calls `observe` from its edge layer instead). */
  middleware: Middleware;
  /** Counts an answered request: its method, route pattern (undefined: no route matched) and status; `started` is its `performance.now()` when it came in. */
  observe(method: string, route: string | undefined, status: number, started: number): void;
}

/** Latency buckets of `trailwire_http_request_duration_seconds`, in seconds. */
const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1] as const;

/** The requests of one method and route: their latencies, and their counts by status not yet told to the counter. */
interface RouteSeries {
  readonly labels: { method: string; route: string };
  /** Observations per bucket (not cumulative); the last slot is above the largest bound. */
  readonly buckets: number[];
  sum: number;
  count: number;
  readonly untold: Map<number, number>;
}

export function createHttpMetrics(registry: Registry = new Registry()): HttpMetrics {
  collectDefaultMetrics({ register: registry, prefix: 'trailwire_' });
  // By route, then method: the route is the router's pattern string and the method a constant of
  // Node's parser, so both lookups hash strings whose hash is already known.
  const routes = new Map<string, Map<string, RouteSeries>>();
  const seriesOf = (method: string, route: string): RouteSeries => {
    let methods = routes.get(route);
    if (!methods) routes.set(route, (methods = new Map()));
    let series = methods.get(method);
    if (!series) {
      series = { labels: { method, route }, buckets: new Array<number>(LATENCY_BUCKETS.length + 1).fill(0), sum: 0, count: 0, untold: new Map() };
      methods.set(method, series);
    }
    return series;
  };
  const everySeries = function* (): Generator<RouteSeries> {
    for (const methods of routes.values()) yield* methods.values();
  };
  new Counter({
    name: 'trailwire_http_requests_total',
    help: 'HTTP requests by method, route template and status.',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
    collect() {
      for (const series of everySeries()) {
        for (const [status, count] of series.untold) this.inc({ ...series.labels, status: String(status) }, count);
        series.untold.clear();
      }
    },
  });
  registry.registerMetric(latencyHistogram(everySeries) as unknown as Metric);
  const observe = (method: string, route: string | undefined, status: number, started: number) => {
    const series = seriesOf(method, route ?? 'unmatched');
    const seconds = (performance.now() - started) / 1000;
    let bucket = 0;
    while (bucket < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[bucket]!) bucket++;
    series.buckets[bucket]!++;
    series.sum += seconds;
    series.count++;
    series.untold.set(status, (series.untold.get(status) ?? 0) + 1);
  };
  const middleware: Middleware = async (ctx, next) => {
    const started = performance.now();
    try {
      await next();
    } finally {
      observe(ctx.method, matchedRouteOf(ctx), ctx.status, started);
    }
  };
  return { registry, middleware, observe };
}

/** The route pattern the router matched (`_matchedRoute`, which @koa/router sets), or undefined. */
export function matchedRouteOf(ctx: Context): string | undefined {
  const route = (ctx as unknown as { _matchedRoute?: unknown })._matchedRoute;
  return typeof route === 'string' ? route : undefined;
}

/** `trailwire_http_request_duration_seconds` as prom-client's registry reads a histogram: cumulative buckets, then the sum and the count. */
function latencyHistogram(everySeries: () => Iterable<RouteSeries>) {
  const name = 'trailwire_http_request_duration_seconds';
  return {
    name,
    help: 'HTTP request latency by method and route template.',
    type: 'histogram',
    aggregator: 'sum',
    async get() {
      const values: MetricValueWithName<string>[] = [];
      for (const { labels, buckets, sum, count } of everySeries()) {
        let cumulative = 0;
        LATENCY_BUCKETS.forEach((le, i) => {
          cumulative += buckets[i]!;
          values.push({ metricName: `${name}_bucket`, labels: { ...labels, le }, value: cumulative });
        });
        values.push({ metricName: `${name}_bucket`, labels: { ...labels, le: '+Inf' }, value: count });
        values.push({ metricName: `${name}_sum`, labels, value: sum });
        values.push({ metricName: `${name}_count`, labels, value: count });
      }
      return { name, help: this.help, type: 'histogram', aggregator: 'sum', values };
    },
    reset(): void {
      for (const series of everySeries()) {
        series.buckets.fill(0);
        series.sum = 0;
        series.count = 0;
      }
    },
  };
}

/**
 * The intake queue's depth (payloads queued or processing), read from the queue at each scrape: the
 * one figure that says whether processing keeps up with intake, for every backend and every process
 * sharing the queue.
 */
export function registerIntakeMetrics(registry: Registry, queue: IntakeQueue): void {
  new Gauge({
    name: 'trailwire_intake_queue_depth',
    help: 'Intake payloads queued or being processed, read from the queue at scrape time.',
    registers: [registry],
    async collect() {
      this.set(await queue.depth());
    },
  });
}

/**
 * The webhook deliverer's attempts (contract 14): `trailwire_webhook_attempts_total{outcome}`
 * (`delivered`, `retry`: failed and to be tried again, `failing`: failed for the whole retry period),
 * `trailwire_webhook_events_delivered_total`, and `trailwire_webhook_attempt_duration_seconds`, from
 * the POST to its answer (or its timeout).
 */
export function registerWebhookMetrics(registry: Registry, deliverer: WebhookDeliverer): void {
  const attempts = new Counter({
    name: 'trailwire_webhook_attempts_total',
    help: 'Webhook delivery attempts by outcome: delivered, retry (failed, tried again later), failing (failed for the whole retry period).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  const events = new Counter({ name: 'trailwire_webhook_events_delivered_total', help: 'Events delivered to webhook endpoints.', registers: [registry] });
  const duration = new Histogram({
    name: 'trailwire_webhook_attempt_duration_seconds',
    help: 'Webhook delivery attempts, from the POST to the answer or the timeout.',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  deliverer.onAttempt(({ outcome, delivery, durationMs }) => {
    attempts.inc({ outcome: outcome.kind });
    if (outcome.kind === 'delivered') events.inc(delivery.eventCount);
    duration.observe(durationMs / 1000);
  });
}

/**
 * `trailwire_dependency_up{dependency}`: 1 while each dependency answers, 0 while it does not, read
 * at scrape time (issue 28). An alert on it says which dependency an outage is, beside `/readyz`
 * (which turns 503 only for the dependencies whose absence refuses requests, not for Redis).
 */
export function registerDependencyMetrics(registry: Registry, dependencies: Record<string, () => boolean | Promise<boolean>>): void {
  new Gauge({
    name: 'trailwire_dependency_up',
    help: 'Whether each dependency (redis, postgres) answers: 1 up, 0 down; read at scrape time.',
    labelNames: ['dependency'] as const,
    registers: [registry],
    async collect() {
      await Promise.all(
        Object.entries(dependencies).map(async ([dependency, isUp]) => {
          const up = await Promise.resolve()
            .then(isUp)
            .catch(() => false);
          this.set({ dependency }, up ? 1 : 0);
        }),
      );
    },
  });
}
