/**
 * What another tenant sees during a flood: `GET /healthz` every 10 ms on one keep-alive connection,
 * each answer's latency. Run it in a process that does nothing else (not the flooder's), so that the
 * latency is the server's and the machine's, not the prober's own event loop.
 */
import { Agent, request } from 'node:http';

/** Probes `/healthz` until `deadline` (a `performance.now()` time); answers the latencies in ms, sorted. Throws on an answer other than 200. */
export async function probeHealthzUntil(url: URL, deadline: number): Promise<number[]> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const latencies: number[] = [];
  try {
    while (performance.now() < deadline) {
      const started = performance.now();
      const status = await new Promise<number>((resolve, reject) => {
        const req = request({ agent, host: url.hostname, port: url.port, path: '/healthz' }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
        req.on('error', reject);
        req.end();
      });
      if (status !== 200) throw new Error(`/healthz answered ${status}`);
      latencies.push(performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  } finally {
    agent.destroy();
  }
  return latencies.sort((a, b) => a - b);
}

/** The value of one unlabelled metric on the server's `/metrics` (Prometheus text). */
export async function scrapeMetric(url: URL, name: string): Promise<number> {
  const text = await (await fetch(new URL('/metrics', url))).text();
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${name} `));
  if (line === undefined) throw new Error(`/metrics has no ${name}`);
  return Number(line.slice(name.length + 1));
}
