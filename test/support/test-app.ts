/**
 * Test support: a real Trailwire Koa app on an ephemeral port over a fresh SQLite file, with a
 * manual clock, plus helpers to provision principals and call the API with fetch.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { ManualClock } from '../../core/clock.ts';
import type { TrailwireStore } from '../../core/store.ts';
import { createTrailwire, type Trailwire, type TrailwireOptions } from '../../core/trailwire.ts';
import { createTrailwireApp, type TrailwireAppOptions } from '../../adapters/koa/app.ts';
import { openSqliteStore } from '../../adapters/sqlite/index.ts';
import { openSqliteIntakeQueue } from '../../adapters/sqlite/intake-queue.ts';
import { builtInProducts } from '../../products/index.ts';
import { type ResponseChecker, responseChecker } from './openapi-responses.ts';

export interface TestApp {
  trailwire: Trailwire;
  /** The app's store (for tests that read it as the core does, a live snapshot say). */
  store: TrailwireStore;
  clock: ManualClock;
  url: string;
  server: Server;
  /** fetch against the app: `call('GET', '/api/v1/fleets', { token })`. */
  call(method: string, path: string, options?: CallOptions): Promise<CallResult>;
  close(): Promise<void>;
}

export interface CallOptions {
  token?: string;
  apiKey?: string;
  headers?: Record<string, string>;
  /** A JSON value (serialized, with Content-Type: application/json) or a raw string body. */
  body?: unknown;
}

export interface CallResult {
  status: number;
  headers: Headers;
  // Tests read bodies freely; the shape is asserted there.
  body: any;
}

/**
 * Starts an app. `core` overrides core options (limits...); `app` the Koa app options, or a function
 * of the assembled core answering them (for options built on it, such as a live events route).
 */
export async function startTestApp(
  options: {
    core?: Omit<TrailwireOptions, 'store' | 'clock'>;
    app?: TrailwireAppOptions | ((trailwire: Trailwire) => TrailwireAppOptions);
    clock?: ManualClock;
  } = {},
): Promise<TestApp> {
  const dir = mkdtempSync(join(tmpdir(), 'trailwire-test-'));
  const clock = options.clock ?? new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0));
  const store = await openSqliteStore({ file: join(dir, 'trailwire.db') });
  const trailwire = await createTrailwire({
    products: builtInProducts,
    ...options.core,
    store,
    clock,
    intakeQueue: openSqliteIntakeQueue(store.db),
  });
  // The worker runs as in production; tests that need processing to have happened call drainDue().
  await trailwire.intake!.worker!.start();
  const appOptions = typeof options.app === 'function' ? options.app(trailwire) : options.app;
  const app = createTrailwireApp(trailwire, { logger: pino({ level: 'silent' }), ...appOptions });
  const server = createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // Every answer `call` receives is held to the app's own /openapi.json (openapi-responses.ts).
  let checker: Promise<ResponseChecker> | undefined;
  const documentPath = `${appOptions?.prefix ?? ''}/openapi.json`;
  const checkerOf = () => (checker ??= fetch(url + documentPath).then(async (response) => responseChecker(await response.json())));

  return {
    trailwire,
    store,
    clock,
    url,
    server,
    async call(method, path, callOptions = {}) {
      const headers: Record<string, string> = { ...callOptions.headers };
      if (callOptions.token) headers.authorization = `Bearer ${callOptions.token}`;
      if (callOptions.apiKey !== undefined) headers['x-api-key'] = callOptions.apiKey;
      let body: string | undefined;
      if (typeof callOptions.body === 'string') body = callOptions.body;
      else if (callOptions.body !== undefined) {
        body = JSON.stringify(callOptions.body);
        headers['content-type'] ??= 'application/json';
      }
      const response = await fetch(url + path, { method, headers, body });
      const text = await response.text();
      let parsed: unknown = text;
      const contentType = response.headers.get('content-type') ?? '';
      // An NDJSON export stays text: it is many JSON documents, one a line.
      if (contentType.includes('json') && !contentType.includes('ndjson') && text) parsed = JSON.parse(text);
      (await checkerOf()).check(method, path, response.status, response.headers, parsed);
      return { status: response.status, headers: response.headers, body: parsed };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await trailwire.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Creates a customer and answers its id, API key and a token. */
export async function customerWithToken(app: TestApp, name = 'Acme') {
  const { principal, apiKey } = await app.trailwire.auth.createCustomer({ name });
  const response = await app.call('POST', '/api/v1/customers/authenticate', { apiKey });
  if (response.status !== 200) throw new Error(`authenticate failed: ${response.status}`);
  return { id: principal.id, apiKey, token: response.body.access_token as string };
}

/** Creates a partner of `product` and answers its id, API key and a token. */
export async function partnerWithToken(app: TestApp, product: string, name = 'Partner') {
  const { principal, apiKey } = await app.trailwire.auth.createPartner({ name, product });
  const response = await app.call('POST', '/api/v1/partners/authenticate', { apiKey });
  if (response.status !== 200) throw new Error(`authenticate failed: ${response.status}`);
  return { id: principal.id, apiKey, token: response.body.access_token as string };
}
