/**
 * The one error type of Trailwire. Every failure the core reports carries a stable `code`; each
 * transport maps codes to its own statuses with one table (`HTTP_STATUS_BY_CODE` here, the gRPC
 * table in `adapters/grpc`). A test checks that every code is mapped and documented.
 */

/** What one limit says about one subject now: the data of the RateLimit-* headers. */
export interface RateLimitState {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the window ends (at least 1). */
  resetSeconds: number;
}

export const ERROR_CODES = [
  'validation_failed',
  'invalid_api_key',
  'missing_token',
  'invalid_token',
  'wrong_audience',
  'forbidden',
  'partner_not_granted',
  'not_found',
  'method_not_allowed',
  'conflict',
  'idempotency_key_reused',
  'payload_too_large',
  'unsupported_media_type',
  'rate_limited',
  'unavailable',
  'store_unavailable',
  'body_already_read',
  'internal',
] as const;

/** Seconds a 503 tells its client to wait (`Retry-After`) unless the error says otherwise. */
export const DEFAULT_RETRY_AFTER_SECONDS = 2;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** One problem with one input field: a JSON pointer-ish path (`/take`, `/sensors/0/wheel`) and why. */
export interface FieldError {
  path: string;
  message: string;
}

export interface TrailwireErrorOptions {
  /** Per-field details of a `validation_failed`. */
  errors?: FieldError[];
  /** For `rate_limited`: the limit that was exhausted, for the RateLimit-* headers. */
  rateLimit?: RateLimitState;
  /** For a 503 code: seconds until a retry may succeed (`Retry-After`). Default `DEFAULT_RETRY_AFTER_SECONDS`. */
  retryAfterSeconds?: number;
  cause?: unknown;
}

export class TrailwireError extends Error {
  override readonly name = 'TrailwireError';
  readonly code: ErrorCode;
  readonly errors: FieldError[] | undefined;
  readonly rateLimit: RateLimitState | undefined;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, message: string, options: TrailwireErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.errors = options.errors;
    this.rateLimit = options.rateLimit;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

/**
 * A refusal caused by a dependency — the disk or the database full or failing, the intake log
 * (contract 6): 503 `store_unavailable` with `Retry-After`, never a 500. The
 * message is shown to the client, so it names what failed in the operator's terms, not the error
 * itself (that goes in `cause`, for the log).
 */
export function storeUnavailable(message: string, cause?: unknown, retryAfterSeconds?: number): TrailwireError {
  return new TrailwireError('store_unavailable', message, { cause, retryAfterSeconds });
}

/** A `validation_failed` error with one field error. */
export function invalidField(path: string, message: string): TrailwireError {
  return new TrailwireError('validation_failed', `${path.replace(/^\//, '')}: ${message}`, {
    errors: [{ path, message }],
  });
}

export function isTrailwireError(error: unknown): error is TrailwireError {
  return error instanceof TrailwireError;
}

/** HTTP status and problem title of each code: the HTTP transport's mapping table. */
export const HTTP_STATUS_BY_CODE: Record<ErrorCode, { status: number; title: string }> = {
  validation_failed: { status: 400, title: 'Bad Request' },
  invalid_api_key: { status: 401, title: 'Unauthorized' },
  missing_token: { status: 401, title: 'Unauthorized' },
  invalid_token: { status: 401, title: 'Unauthorized' },
  wrong_audience: { status: 403, title: 'Forbidden' },
  forbidden: { status: 403, title: 'Forbidden' },
  partner_not_granted: { status: 403, title: 'Forbidden' },
  not_found: { status: 404, title: 'Not Found' },
  method_not_allowed: { status: 405, title: 'Method Not Allowed' },
  conflict: { status: 409, title: 'Conflict' },
  idempotency_key_reused: { status: 422, title: 'Unprocessable Content' },
  payload_too_large: { status: 413, title: 'Content Too Large' },
  unsupported_media_type: { status: 415, title: 'Unsupported Media Type' },
  rate_limited: { status: 429, title: 'Too Many Requests' },
  unavailable: { status: 503, title: 'Service Unavailable' },
  store_unavailable: { status: 503, title: 'Service Unavailable' },
  body_already_read: { status: 500, title: 'Internal Server Error' },
  internal: { status: 500, title: 'Internal Server Error' },
};

/** What each code means, for the docs (`/openapi.json`, README) and the problem `type` URIs. */
export const ERROR_DESCRIPTIONS: Record<ErrorCode, string> = {
  validation_failed: 'The request is malformed: a path or query parameter, header or body failed validation. `errors` lists each field.',
  invalid_api_key: 'The X-API-KEY header is missing or does not match a current key of this audience.',
  missing_token: 'The Authorization header with a Bearer token is missing.',
  invalid_token: 'The token is malformed, badly signed, expired, from another issuer, or was minted before a key rotation.',
  wrong_audience: 'The token is valid but for the other audience (a partner token on a customer endpoint or the reverse).',
  forbidden: 'The token does not grant this operation.',
  partner_not_granted:
    "The VIN belongs to a customer that takes intake only from partners it granted (`trailwire grants add`), and this partner is not one of them; nothing was enqueued.",
  not_found: 'No such resource is visible to this caller.',
  method_not_allowed: 'The path exists but not with this method; the Allow header lists the methods it takes.',
  conflict: 'The request conflicts with the current state (for example a VIN that is already registered).',
  idempotency_key_reused:
    'The Idempotency-Key was already used by this partner within 24 hours for another VIN or another body; nothing was enqueued. Use a new key for a new payload.',
  payload_too_large: 'The request body exceeds the configured limit.',
  unsupported_media_type: 'The request body must be application/json.',
  rate_limited: 'A fixed-window rate limit is exhausted; retry after the number of seconds in Retry-After.',
  unavailable: 'The service is starting or shutting down, or not ready; retry after the seconds in Retry-After.',
  store_unavailable:
    'A dependency cannot take the request now: the disk or database is full or failing, or the intake log cannot be written. Nothing was stored; retry after the seconds in Retry-After (`/readyz` names the failing check).',
  body_already_read:
    "The server that mounts Trailwire read the request body before Trailwire could (a body parser such as express.json() above the mount, or a route of the host that parsed it): mount Trailwire above the parser. Nothing was stored.",
  internal: 'An unexpected error; the log has the details under the request id.',
};

/** The problem `type` URI of a code (RFC 9457): stable, and documented in the README. */
export function problemType(code: ErrorCode): string {
  return `https://trailwire.dev/problems/${code.replace(/_/g, '-')}`;
}
