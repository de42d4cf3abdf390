/**
 * Sends one webhook delivery (contract 14): a signed `POST` of the delivery's body, answered within
 * the timeout (10 s by default) by a 2xx — anything else, a redirect included (never followed), is a
 * failed attempt with its reason. The connection goes only where the address rules allow, checked
 * after DNS (`core/webhook-address.ts`); an IP literal, which no lookup sees, is checked here.
 */
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { guardedLookup, hostOf, isNonPublicAddress, type WebhookAddressRules } from './webhook-address.ts';
import { webhookHeaders } from './webhook-signature.ts';

export interface WebhookPost {
  url: string;
  secret: string;
  /** The `webhook-id`. */
  id: string;
  body: string;
  /** The signing time (epoch ms). */
  at: number;
}

/** The answer to one attempt: `delivered` on a 2xx; otherwise the status (if any) and why it failed. */
export type WebhookPostResult = { delivered: true; status: number } | { delivered: false; status: number | null; error: string };

export interface WebhookSenderOptions {
  rules: WebhookAddressRules;
  /** The whole attempt, connection to answer, in ms. Default 10,000. */
  timeoutMs?: number;
  /** Sent as `User-Agent`. */
  userAgent?: string;
}

/** Bytes of an answer read before the connection is let go: receivers are told to answer with little. */
const ANSWER_READ_LIMIT = 64 * 1024;

/** Posts deliveries over keep-alive connections (one pool per scheme). */
export class WebhookSender {
  private readonly lookup;
  private readonly timeoutMs: number;
  private readonly userAgent: string;
  private readonly agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

  constructor(private readonly options: WebhookSenderOptions) {
    this.lookup = guardedLookup(options.rules);
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.userAgent = options.userAgent ?? 'Trailwire-Webhooks';
  }

  /** One attempt; never rejects. */
  post(delivery: WebhookPost): Promise<WebhookPostResult> {
    let url: URL;
    try {
      url = new URL(delivery.url);
    } catch {
      return Promise.resolve({ delivered: false, status: null, error: 'the URL is not valid' });
    }
    const host = hostOf(url);
    if (isIP(host) && !this.options.rules.allowPrivate && isNonPublicAddress(host))
      return Promise.resolve({ delivered: false, status: null, error: `${host} is not a public address` });
    const secure = url.protocol === 'https:';
    if (!secure && !(url.protocol === 'http:' && this.options.rules.allowHttp))
      return Promise.resolve({ delivered: false, status: null, error: `${url.protocol} URLs are not allowed` });
    const body = Buffer.from(delivery.body);
    return new Promise((resolve) => {
      let settled = false;
      const finish = (result: WebhookPostResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(result);
      };
      const request = (secure ? https : http).request(url, {
        method: 'POST',
        agent: secure ? this.agents.https : this.agents.http,
        // Node's types want the overloads of dns.lookup; the guard answers both forms it is asked for.
        lookup: this.lookup as never,
        headers: {
          'content-type': 'application/json',
          'content-length': String(body.length),
          'user-agent': this.userAgent,
          ...webhookHeaders(delivery.secret, delivery.id, delivery.at, delivery.body),
        },
      });
      const timer = setTimeout(() => {
        finish({ delivered: false, status: null, error: `no answer within ${this.timeoutMs} ms` });
        request.destroy();
      }, this.timeoutMs);
      request.on('error', (error) => finish({ delivered: false, status: null, error: error.message }));
      request.on('response', (response) => {
        const status = response.statusCode ?? 0;
        if (status >= 200 && status < 300) finish({ delivered: true, status });
        else if (status >= 300 && status < 400) finish({ delivered: false, status, error: `answered ${status}: redirects are not followed` });
        else finish({ delivered: false, status, error: `answered ${status}` });
        // The answer's body is read (so that the connection can be kept) but not kept, up to a limit.
        let read = 0;
        response.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > ANSWER_READ_LIMIT) response.destroy();
        });
        response.on('error', () => {});
      });
      request.end(body);
    });
  }

  /** Closes the kept connections. */
  close(): void {
    this.agents.http.destroy();
    this.agents.https.destroy();
  }
}
