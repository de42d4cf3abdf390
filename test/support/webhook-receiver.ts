/**
 * Test support: a webhook receiver on an ephemeral port of 127.0.0.1 that records every request
 * (its headers and body) and answers as the test says — 204 by default, a status of its choice, or
 * nothing at all (a receiver that never answers).
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedDelivery {
  headers: IncomingHttpHeaders;
  body: string;
  /** The status answered; null when the request was left unanswered. */
  status: number | null;
}

export interface WebhookReceiver {
  url: string;
  received: ReceivedDelivery[];
  /** How the next requests are answered: a status, or `'hang'` to never answer. */
  answer: number | 'hang';
  /** The deliveries answered with a 2xx, in order. */
  delivered(): ReceivedDelivery[];
  close(): Promise<void>;
}

export async function startWebhookReceiver(path = '/hook'): Promise<WebhookReceiver> {
  const receiver: WebhookReceiver = {
    url: '',
    received: [],
    answer: 204,
    delivered: () => receiver.received.filter((delivery) => delivery.status !== null && delivery.status >= 200 && delivery.status < 300),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const answer = receiver.answer;
      receiver.received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), status: answer === 'hang' ? null : answer });
      if (answer === 'hang') return;
      res.statusCode = answer;
      if (answer >= 300 && answer < 400) res.setHeader('Location', 'http://127.0.0.1:1/elsewhere');
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`;
  return receiver;
}
