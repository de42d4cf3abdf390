/**
 * `trailwire/client`: a small HTTP client for Trailwire's APIs, the one the load simulator is built
 * on and the one we recommend to integrators. It does what the specification asks of clients:
 * caches the token and refreshes it before it expires, re-authenticates once when a token is
 * rejected (after a rotation elsewhere), waits out 429s for `Retry-After` plus jitter and backs off
 * exponentially on 5xx and network errors, and follows `next` tokens for paged lists and time ranges.
 */
import type { Audience } from '../../core/model.ts';

export interface TrailwireClientOptions {
  /** Base URL of the data API, e.g. `http://localhost:8080`. */
  baseUrl: string;
  /** Base URL of the auth API. Default: `baseUrl`. */
  authUrl?: string;
  audience: Audience;
  apiKey: string;
  /** Refresh the token this many seconds before it expires. Default 60. */
  refreshBeforeSeconds?: number;
  /** Retries of a 429, 5xx or network error before giving up. Default 5. */
  maxRetries?: number;
  /** First backoff delay for 5xx and network errors, doubled each retry. Default 200 ms. */
  backoffBaseMs?: number;
  /** Upper bound of the random jitter added to every wait. Default 250 ms. */
  jitterMs?: number;
  /** Injected for tests. */
  fetch?: typeof fetch;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
}

export interface ClientResponse<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
}

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  headers?: Record<string, string>;
  /** Do not retry 429s (the caller wants to see them, like the simulator). Default false. */
  noRetryOnRateLimit?: boolean;
  /**
   * Answer the first response as it is, whatever its status (no retry of 429, 5xx or network
   * errors; a 401 still re-authenticates once). For callers that count every answer, like the
   * simulator. Default false.
   */
  noRetry?: boolean;
}

/** What `GET /api/v1/telemetry/intake/status/{id}` answers. */
export interface IntakeStatus {
  id: string;
  vin: string;
  product: string;
  status: 'queued' | 'processing' | 'processed' | 'failed';
  receivedAt: string;
  processedAt: string | null;
  attempts: number;
  error: string | null;
}

/** What `GET /api/v1/telemetry/intake/status?ids=…` answers: the partner's payloads among the ids, in order, and the ids it has none of. */
export interface IntakeStatuses {
  data: IntakeStatus[];
  notFound: string[];
}

/** The most ids one bulk status read takes (`intakeStatuses`). */
export const MAX_INTAKE_STATUS_IDS = 100;

/** An error response that retries did not cure: the RFC 9457 problem and the status. */
export class TrailwireHttpError extends Error {
  override readonly name = 'TrailwireHttpError';
  constructor(
    readonly status: number,
    readonly problem: { type?: string; title?: string; detail?: string; errors?: Array<{ path: string; message: string }> } | undefined,
    options?: { cause?: unknown },
  ) {
    super(`${status} ${problem?.title ?? 'error'}: ${problem?.detail ?? ''}`.trim(), options);
  }
}

export class TrailwireClient {
  private apiKey: string;
  private token: { value: string; expiresAt: number } | undefined;
  private pendingToken: Promise<string> | undefined;
  private readonly settings: Required<Omit<TrailwireClientOptions, 'apiKey' | 'authUrl'>> & { authUrl: string };

  constructor(options: TrailwireClientOptions) {
    if (!options.baseUrl) throw new TypeError('TrailwireClient: `baseUrl` is required');
    if (!options.apiKey) throw new TypeError('TrailwireClient: `apiKey` is required');
    if (options.audience !== 'partners' && options.audience !== 'customers')
      throw new TypeError('TrailwireClient: `audience` must be "partners" or "customers"');
    this.apiKey = options.apiKey;
    this.settings = {
      refreshBeforeSeconds: 60,
      maxRetries: 5,
      backoffBaseMs: 200,
      jitterMs: 250,
      fetch: globalThis.fetch.bind(globalThis),
      now: Date.now,
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
      random: Math.random,
      ...options,
      baseUrl: options.baseUrl.replace(/\/$/, ''),
      authUrl: (options.authUrl ?? options.baseUrl).replace(/\/$/, ''),
    };
  }

  /** The current token, authenticating when there is none or it is about to expire. */
  async accessToken(): Promise<string> {
    const { now, refreshBeforeSeconds } = this.settings;
    if (this.token && this.token.expiresAt - refreshBeforeSeconds * 1000 > now()) return this.token.value;
    // One authentication at a time, however many requests are waiting for it.
    this.pendingToken ??= this.authenticate().finally(() => {
      this.pendingToken = undefined;
    });
    return this.pendingToken;
  }

  /** Forgets the cached token (the next request authenticates). */
  dropToken(): void {
    this.token = undefined;
  }

  /** Rotates the key: the new key replaces the old one in this client, and a new token is fetched. */
  async rotateKey(): Promise<{ apiKey: string; rotatedAt: string }> {
    const response = await this.request<{ api_key: string; rotated_at: string }>('PUT', `/api/v1/${this.settings.audience}/rotate`, {}, this.settings.authUrl);
    this.apiKey = response.body.api_key;
    this.token = undefined;
    return { apiKey: response.body.api_key, rotatedAt: response.body.rotated_at };
  }

  /** The key this client authenticates with (changes after `rotateKey`). */
  get currentApiKey(): string {
    return this.apiKey;
  }

  /**
   * A request with the Bearer token. 2xx answers; 429/5xx/network errors are retried; a 401 is
   * retried once with a fresh token; anything else throws `TrailwireHttpError`.
   */
  async request<T = unknown>(method: string, path: string, options: RequestOptions = {}, base = this.settings.baseUrl): Promise<ClientResponse<T>> {
    const url = new URL(base + path);
    for (const [name, value] of Object.entries(options.query ?? {})) if (value !== undefined) url.searchParams.set(name, String(value));
    let reauthenticated = false;
    for (let attempt = 0; ; attempt++) {
      const headers: Record<string, string> = { ...options.headers, authorization: `Bearer ${await this.accessToken()}` };
      let body: string | undefined;
      if (options.body !== undefined) {
        body = JSON.stringify(options.body);
        headers['content-type'] ??= 'application/json';
      }
      let response: Response;
      try {
        response = await this.settings.fetch(url, { method, headers, body });
      } catch (error) {
        if (options.noRetry || attempt >= this.settings.maxRetries) throw error;
        await this.settings.sleep(this.backoff(attempt));
        continue;
      }
      const parsed = await readBody(response);
      if (response.ok) return { status: response.status, headers: response.headers, body: parsed as T };
      if (response.status === 401 && !reauthenticated) {
        reauthenticated = true;
        this.token = undefined;
        continue;
      }
      if (options.noRetry) return { status: response.status, headers: response.headers, body: parsed as T };
      const retryable = (response.status === 429 && !options.noRetryOnRateLimit) || response.status >= 500;
      if (!retryable || attempt >= this.settings.maxRetries) {
        if (response.status === 429 && options.noRetryOnRateLimit) return { status: 429, headers: response.headers, body: parsed as T };
        throw new TrailwireHttpError(response.status, parsed as never);
      }
      await this.settings.sleep(this.waitBeforeRetry(response, attempt));
    }
  }

  /** Every item of a paged list, following `next` until the last page. */
  async *paginate<T = unknown>(path: string, query: Record<string, string | number | boolean | undefined> = {}): AsyncGenerator<T> {
    let next: string | undefined;
    do {
      // `next` carries everything that shapes the list (take, activeOnly, the range): it goes alone.
      const page = await this.request<{ data: T[]; next?: string }>('GET', path, { query: next === undefined ? query : { next } });
      yield* page.body.data;
      next = page.body.next;
    } while (next !== undefined);
  }

  /**
   * Posts one telemetry payload (partner clients). Answers the 202 body, or the 429 when told not to
   * retry, or any answer with `noRetry`.
   */
  async sendTelemetry(vin: string, payload: unknown, options: { idempotencyKey?: string; noRetryOnRateLimit?: boolean; noRetry?: boolean } = {}) {
    return this.request<{ id: string; status: string }>('POST', `/api/v1/telemetry/intake/${encodeURIComponent(vin)}`, {
      body: payload,
      headers: options.idempotencyKey ? { 'idempotency-key': options.idempotencyKey } : {},
      noRetryOnRateLimit: options.noRetryOnRateLimit,
      noRetry: options.noRetry,
    });
  }

  /** The state of one of this partner's intake payloads (`queued`, `processing`, `processed`, `failed`). */
  async intakeStatus(id: string, options: { noRetry?: boolean } = {}) {
    return this.request<IntakeStatus>('GET', `/api/v1/telemetry/intake/status/${encodeURIComponent(id)}`, { noRetry: options.noRetry });
  }

  /**
   * The state of up to `MAX_INTAKE_STATUS_IDS` of this partner's payloads in one request, counted as
   * one read against the partner's read limit; ids of no payload of this partner are in `notFound`.
   */
  async intakeStatuses(ids: readonly string[], options: { noRetry?: boolean } = {}) {
    return this.request<IntakeStatuses>('GET', '/api/v1/telemetry/intake/status', { query: { ids: ids.join(',') }, noRetry: options.noRetry });
  }

  private async authenticate(): Promise<string> {
    const { fetch: doFetch, authUrl, audience, now } = this.settings;
    for (let attempt = 0; ; attempt++) {
      const response = await doFetch(`${authUrl}/api/v1/${audience}/authenticate`, { method: 'POST', headers: { 'x-api-key': this.apiKey } });
      const body = (await readBody(response)) as { access_token?: string; expires_in?: number } | undefined;
      if (response.ok && body?.access_token) {
        this.token = { value: body.access_token, expiresAt: now() + (body.expires_in ?? 1800) * 1000 };
        return body.access_token;
      }
      const retryable = response.status === 429 || response.status >= 500;
      if (!retryable || attempt >= this.settings.maxRetries) throw new TrailwireHttpError(response.status, body as never);
      await this.settings.sleep(this.waitBeforeRetry(response, attempt));
    }
  }

  /** A 429 waits until its window ends (Retry-After); other failures back off exponentially. Both get jitter. */
  private waitBeforeRetry(response: Response, attempt: number): number {
    const retryAfter = Number(response.headers.get('retry-after'));
    if (response.status === 429 && Number.isFinite(retryAfter) && retryAfter >= 0) return retryAfter * 1000 + this.jitter();
    return this.backoff(attempt);
  }

  private backoff(attempt: number): number {
    return this.settings.backoffBaseMs * 2 ** attempt + this.jitter();
  }

  private jitter(): number {
    return Math.floor(this.settings.random() * this.settings.jitterMs);
  }
}

async function readBody(response: Response): Promise<unknown> {
  const text = await response.text();
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
