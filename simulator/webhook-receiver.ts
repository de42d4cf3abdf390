/**
 * The simulator's webhook receiver: a plain HTTP server (node:http) that takes every `POST`, hands
 * its path, signature headers and raw body to the run, and answers 204 at once, so the server's
 * deliverer is never held up by the receiver and what the run measures is the service. Bodies are
 * capped (a delivery holds at most 100 events); a bigger one is answered 413 and still handed on,
 * so the run sees it.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { WebhookSignatureHeaders } from './webhook-signature-check.ts';

/** What one request brought. `receivedAt` is when its body ended (client epoch ms). */
export interface ReceivedRequest {
  method: string;
  path: string;
  headers: WebhookSignatureHeaders;
  body: string;
  receivedAt: number;
  /** Set when the body was over the cap, and cut there. */
  tooLarge?: boolean;
}

export interface RunningReceiver {
  /** The address it listens on (the port the system chose when asked for 0). */
  host: string;
  port: number;
  close(): Promise<void>;
}

/** Far above a delivery of 100 events (a few hundred KiB): only a broken sender reaches it. */
const MAX_BODY_BYTES = 8 * 1024 * 1024;

/** `host:port` as a listen address; throws a `TypeError` naming the option when it is not one. */
export function parseListenAddress(option: string, value: string): { host: string; port: number } {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s]+)):(\d{1,5})$/.exec(value);
  const port = Number(match?.[3]);
  if (!match || port > 65_535) throw new TypeError(`${option} ${JSON.stringify(value)}: expected host:port, e.g. 127.0.0.1:8787 (port 0: any free one)`);
  return { host: match[1] ?? match[2]!, port };
}

/** Listens on `host:port` and hands each request to `onRequest`. */
export async function startWebhookReceiver(listen: { host: string; port: number }, onRequest: (request: ReceivedRequest) => void): Promise<RunningReceiver> {
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) tooLarge = true;
      else chunks.push(chunk);
    });
    req.on('end', () => {
      onRequest({
        method: req.method ?? '',
        path: new URL(req.url ?? '/', 'http://receiver').pathname,
        headers: { id: header(req, 'webhook-id'), timestamp: header(req, 'webhook-timestamp'), signature: header(req, 'webhook-signature') },
        body: Buffer.concat(chunks).toString('utf8'),
        receivedAt: Date.now(),
        ...(tooLarge ? { tooLarge } : {}),
      });
      res.statusCode = tooLarge ? 413 : 204;
      res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  return {
    host: listen.host,
    port: address.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(' ') : value;
}
