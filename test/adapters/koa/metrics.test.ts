/**
 * The request metrics as a Prometheus server scrapes them: counts by method, route template and
 * status that do not change between two scrapes with no request between them, and a latency
 * histogram whose buckets are cumulative and agree with its count and sum.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { Context } from 'koa';
import { createHttpMetrics } from '../../../adapters/koa/metrics.ts';

const request = (status: number, route: string | undefined, method = 'GET') => ({ method, status, _matchedRoute: route }) as unknown as Context;
const linesOf = (text: string, name: string) => text.split('\n').filter((line) => line.startsWith(name));

it('counts requests by method, route and status, and keeps the counts from one scrape to the next', async () => {
  const { middleware, registry } = createHttpMetrics();
  await middleware(request(200, '/api/v1/fleets'), async () => {});
  await middleware(request(200, '/api/v1/fleets'), async () => {});
  await middleware(request(429, '/api/v1/fleets'), async () => {});
  await middleware(request(404, undefined, 'POST'), async () => {});
  const first = linesOf(await registry.metrics(), 'trailwire_http_requests_total');
  assert.deepEqual(first.sort(), [
    'trailwire_http_requests_total{method="GET",route="/api/v1/fleets",status="200"} 2',
    'trailwire_http_requests_total{method="GET",route="/api/v1/fleets",status="429"} 1',
    'trailwire_http_requests_total{method="POST",route="unmatched",status="404"} 1',
  ]);
  assert.deepEqual(linesOf(await registry.metrics(), 'trailwire_http_requests_total').sort(), first, 'a scrape changes nothing');
  await middleware(request(200, '/api/v1/fleets'), async () => {});
  assert.ok(linesOf(await registry.metrics(), 'trailwire_http_requests_total').includes('trailwire_http_requests_total{method="GET",route="/api/v1/fleets",status="200"} 3'));
});

it('puts each latency in its bucket, cumulatively, with the sum and count', async () => {
  const { middleware, registry } = createHttpMetrics();
  await middleware(request(200, '/r'), async () => {});
  await middleware(request(200, '/r'), () => new Promise((resolve) => setTimeout(resolve, 30)));
  const text = await registry.metrics();
  const value = (suffix: string) => Number(linesOf(text, `trailwire_http_request_duration_seconds_${suffix}{method="GET",route="/r"`)[0]?.split(' ')[1]);
  const bucket = (le: string) => Number(text.match(new RegExp(`_bucket\\{method="GET",route="/r",le="${le.replace('+', '\\+')}"\\} (\\d+)`))?.[1]);
  assert.equal(bucket('0.025'), 1, 'the quick request only');
  assert.equal(bucket('1'), 2, 'cumulative: both');
  assert.equal(bucket('+Inf'), 2);
  assert.equal(value('count'), 2);
  assert.ok(value('sum') >= 0.029 && value('sum') < 1, `sum ${value('sum')}`);
  assert.match(text, /# TYPE trailwire_http_request_duration_seconds histogram/);
});
