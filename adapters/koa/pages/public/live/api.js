// @ts-check
// The read API as the page uses it: authenticate with the customer key (held here, in this module's
// memory, and nowhere else), GET with the token, and when a token has expired (401) mint a fresh one
// with the same key and try once more. A failure is an ApiError carrying the problem+json body.

/** An answer other than 2xx: its status and RFC 9457 problem. */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {Problem | undefined} problem
   */
  constructor(status, problem) {
    super(problem?.detail ?? problem?.title ?? `HTTP ${status}`);
    this.name = 'ApiError';
    this.status = status;
    this.problem = problem;
    /** @type {number | undefined} from `Retry-After`, when the answer had one */
    this.retryAfterSeconds = undefined;
  }
}

/**
 * The ApiError of an answer other than 2xx.
 * @param {Response} response
 */
async function failure(response) {
  /** @type {Problem | undefined} */
  let problem;
  try {
    problem = await response.json();
  } catch {
    problem = undefined;
  }
  const error = new ApiError(response.status, problem);
  error.retryAfterSeconds = Number(response.headers.get('retry-after')) || undefined;
  return error;
}

/**
 * A client of the API under `base` ('' or a path prefix), for one customer key.
 * @param {string} base
 * @param {string} apiKey
 */
export function createApiClient(base, apiKey) {
  /** @type {string | undefined} */
  let token;

  async function authenticate() {
    const response = await fetch(`${base}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'X-API-KEY': apiKey } });
    if (!response.ok) throw await failure(response);
    token = (await response.json()).access_token;
    return token;
  }

  /**
   * fetch with the token; a 401 (an expired or revoked token) re-authenticates once and retries.
   * @param {string} path
   * @param {RequestInit & { headers?: Record<string, string> }} [init]
   */
  async function authorizedFetch(path, init = {}) {
    if (!token) await authenticate();
    const send = () => fetch(`${base}${path}`, { ...init, headers: { ...init.headers, Authorization: `Bearer ${token}` } });
    let response = await send();
    if (response.status === 401) {
      await response.body?.cancel();
      await authenticate();
      response = await send();
    }
    return response;
  }

  /** @param {string} path */
  async function get(path) {
    const response = await authorizedFetch(path);
    if (!response.ok) throw await failure(response);
    return response.json();
  }

  /**
   * Every record of a paged list, following `next` (at most `maxPages` pages).
   * @template T
   * @param {string} path
   * @param {number} [maxPages]
   * @returns {Promise<T[]>}
   */
  async function list(path, maxPages = 20) {
    /** @type {T[]} */
    const records = [];
    let url = path;
    for (let page = 0; page < maxPages; page++) {
      const body = await get(url);
      records.push(...body.data);
      if (!body.next) break;
      url = `${path.split('?')[0]}?next=${encodeURIComponent(body.next)}`;
    }
    return records;
  }

  return { authenticate, authorizedFetch, get, list, failure };
}
