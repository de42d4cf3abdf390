/**
 * `GET /metrics` on a listener of its own (issue 29, finding 8: `/metrics` answered anyone on every
 * interface). With `serve --metrics-port`, the Prometheus registry is served here — by default on
 * 127.0.0.1 only, where a local scraper or a sidecar reads it — and not on the public HTTP port.
 * Plain `node:http`: one route, no parser, nothing of the API's stack.
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface MetricsListenerOptions {
  /** The port; 0 picks a free one. Required. */
  port: number;
  /** The interface to listen on. Default `127.0.0.1`. */
  host?: string;
}

export interface MetricsListener {
  /** The port actually bound. */
  port: number;
  close(): Promise<void>;
}

/** Serves `registry` at `GET /metrics` on `host:port`; everything else is 404. */
export async function startMetricsListener(registry: Registry, options: MetricsListenerOptions): Promise<MetricsListener> {
  const server = createServer({ headersTimeout: 15_000, requestTimeout: 30_000 }, (req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff' }).end('Not found: this port serves GET /metrics only.\n');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' }).end(req.method === 'HEAD' ? undefined : text),
      () => res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('The metrics could not be collected.\n'),
    );
  });
  server.listen(options.port, options.host ?? '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
