/**
 * Prometheus metrics of the HTTP adapter: request counts and latency by route template (never by raw
 * path, so ids cannot explode the label space). Each app has its own registry, so several apps in
 * one process (tests, embedding) do not collide; other parts register their gauges on it.
 */
import type { Middleware } from 'koa';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { IntakeQueue } from '../../core/intake-queue.ts';

export interface HttpMetrics {
  registry: Registry;
  middleware: Middleware;
}

export function createHttpMetrics(registry: Registry = new Registry()): HttpMetrics {
  collectDefaultMetrics({ register: registry, prefix: 'trailwire_' });
  const requests = new Counter({
    name: 'trailwire_http_requests_total',
    help: 'HTTP requests by method, route template and status.',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'trailwire_http_request_duration_seconds',
    help: 'HTTP request latency by method and route template.',
    labelNames: ['method', 'route'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [registry],
  });
  // The labelled series of each (method, route, status), found once: labelling hashes the label
  // values on every call, a cost paid on every request otherwise. Routes are templates, so few.
  const series = new Map<string, { count: { inc(): void }; latency: { observe(seconds: number): void } }>();
  const seriesOf = (method: string, route: string, status: number) => {
    const key = `${method} ${status} ${route}`;
    let found = series.get(key);
    if (!found) {
      found = { count: requests.labels(method, route, String(status)), latency: duration.labels(method, route) };
      series.set(key, found);
    }
    return found;
  };
  const middleware: Middleware = async (ctx, next) => {
    const started = process.hrtime.bigint();
    try {
      await next();
    } finally {
      const route = (ctx as unknown as { _matchedRoute?: string })._matchedRoute ?? 'unmatched';
      const { count, latency } = seriesOf(ctx.method, route, ctx.status);
      count.inc();
      latency.observe(Number(process.hrtime.bigint() - started) / 1e9);
    }
  };
  return { registry, middleware };
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
