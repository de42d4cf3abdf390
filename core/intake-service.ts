/**
 * The accept path of partner intake (contract 4 and 7), independent of HTTP: the partner's budget
 * (`admit`, before the transport reads the body), then the VIN, the token's product, the payload
 * against that product's schema, the payload's own times against the clock, the customer's grants,
 * an idempotency key replay, the partner's cap of new VINs, the per-(product, VIN) fixed-window
 * limit, and then the durable enqueue. By the time `accept` resolves the payload is stored; the
 * transport answers 202. Reading the body (size, type, JSON) is the transport's job.
 */
import { isDeepStrictEqual } from 'node:util';
import { MAX_READING_LEAD_MS } from './canonical.ts';
import type { Clock, IdGenerator } from './clock.ts';
import { type FieldError, invalidField, TrailwireError } from './errors.ts';
import { IDEMPOTENCY_WINDOW_MS, type IntakeQueue, type IntakeRecord } from './intake-queue.ts';
import { JsonShapeScan } from './json-shape.ts';
import type { ProductRegistry } from './products.ts';
import type { PartnerIntakeRules } from './partner-intake-rules.ts';
import { FixedWindowLimiter, type RateLimitState, type WindowCounter } from './rate-limit.ts';
import { type AccessClaims, productOfScope } from './tokens.ts';
import { parseVin } from './vin.ts';

export interface IntakeServiceOptions {
  queue: IntakeQueue;
  products: ProductRegistry;
  counter: WindowCounter;
  clock: Clock;
  ids: IdGenerator;
  verifyVinCheckDigit: boolean;
  /** The partners' budgets, new-VIN caps and the customers' grants (`core/partner-intake-rules.ts`). */
  rules: PartnerIntakeRules;
  /** Called after each new payload is stored, to wake the workers. */
  onEnqueued?: () => void;
}

export interface Accepted {
  record: IntakeRecord;
  /** The limit state of this (product, VIN) (a replay counts nothing, and reports the state as it is). */
  rateLimit: RateLimitState;
  replayed: boolean;
}

/**
 * The earlier payload of an idempotency key, if this request repeats it: the same VIN and the same
 * JSON value (whitespace and key order aside, so a client that re-serializes its retry is still a
 * retry). Anything else is a client bug that would otherwise lose the new payload silently behind
 * the old id, so it is refused (contract 4, as the IETF Idempotency-Key draft does with 422).
 * The comparison uses what the queue record already holds, so the queue stores no fingerprint.
 */
function replayOf(earlier: IntakeRecord, vin: string, body: unknown, idempotencyKey: string): IntakeRecord {
  if (earlier.vin === vin && isDeepStrictEqual(parsedPayload(earlier.payload), body)) return earlier;
  throw new TrailwireError(
    'idempotency_key_reused',
    `Idempotency-Key ${JSON.stringify(idempotencyKey)} was used for intake ${earlier.id} with ${earlier.vin === vin ? 'another body' : 'another VIN'}; use a new key for a new payload.`,
  );
}

function parsedPayload(payload: string): unknown {
  try {
    return JSON.parse(payload);
  } catch {
    return undefined;
  }
}

/** What the status endpoint shows a partner of one of its payloads. */
export interface IntakeStatusView {
  id: string;
  vin: string;
  product: string;
  status: IntakeRecord['status'];
  receivedAt: string;
  processedAt: string | null;
  attempts: number;
  error: string | null;
}

/** What the bulk status read shows: the partner's payloads among the ids asked, in their order, and the ids it has none of. */
export interface IntakeStatusesView {
  data: IntakeStatusView[];
  notFound: string[];
}

/** The most ids one bulk status read (`statuses`) takes. */
export const MAX_STATUS_IDS = 100;

/**
 * What an intake id can be: the queue's ids (UUIDv7, a log engine's with `.partition.seq` after it)
 * are URL-unreserved characters, which is also what a comma-separated query carries unescaped.
 */
export const INTAKE_ID_PATTERN = /^[A-Za-z0-9._~-]{1,128}$/;

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/**
 * A refused body longer than this (in characters, about bytes for JSON) has its first problem
 * reported, not all of them: describing each of 24,000 unknown keys cost ~22 ms of CPU (issue 29).
 * A usual payload is a few hundred bytes, and a partner's developer sees every problem of it.
 */
export const FULL_REPORT_MAX_CHARACTERS = 16 * 1024;

export class IntakeService {
  private readonly limiters = new Map<string, FixedWindowLimiter>();

  constructor(private readonly options: IntakeServiceOptions) {}

  /**
   * Counts one intake request against the partner's budget, throwing `rate_limited` once it is spent
   * (contract 4). The transport calls it for every intake request before it reads the body, so that a
   * refused or malformed body counts too and a partner over its budget costs no parsing.
   */
  admit(claims: AccessClaims): Promise<RateLimitState> {
    return this.options.rules.admit(claims.sub);
  }

  /**
   * A scan that refuses, chunk by chunk as the transport reads it, the text of a large body
   * (over `FULL_REPORT_MAX_CHARACTERS`) that the token's product cannot accept: an object or array
   * with more members than its schema allows anywhere, or nesting deeper (`core/json-shape.ts`).
   * Such a body is refused before it is parsed, or even read whole (issue 29: `JSON.parse` alone of
   * 250 KB holding 24,000 unknown keys costs 12–25 ms of the event loop). Small bodies are not
   * scanned, so an object that repeats a name, which the scan counts each time, is refused only in
   * a body no product's payload is near the size of. Answers undefined when the schema bounds nothing
   * or the token has no product (`accept` refuses it with the reason).
   */
  largeBodyScan(claims: AccessClaims): JsonShapeScan | undefined {
    const productName = productOfScope(claims.scope);
    if (productName === undefined || !this.options.products.has(productName)) return undefined;
    const bounds = this.options.products.shapeBoundsOf(productName);
    return bounds === null ? undefined : new JsonShapeScan(bounds);
  }

  /** Validates, limits and durably enqueues one payload (`body` is the parsed JSON). */
  async accept(input: { claims: AccessClaims; vin: string; body: unknown; rawBody: string; idempotencyKey?: string }): Promise<Accepted> {
    const { queue, products, clock } = this.options;
    const vin = parseVin(input.vin, { verifyCheckDigit: this.options.verifyVinCheckDigit, path: '/vin' });
    const productName = productOfScope(input.claims.scope);
    if (productName === undefined) throw new TrailwireError('forbidden', 'The token carries no product scope.');
    products.get(productName);
    // Every problem of a small body; the first one of a large body, which might hold thousands (issue 29).
    const errors = products.validate(productName, input.body, { describeAll: input.rawBody.length <= FULL_REPORT_MAX_CHARACTERS });
    if (errors.length > 0)
      throw new TrailwireError('validation_failed', `The payload does not match the ${productName} schema.`, { errors });
    const now = clock.now();
    // A reading from a device whose clock is wrong would become the latest state and hide every
    // correct reading after it (contract 4, "Time sanity"): refused here, where the partner sees why.
    const ahead = products.readingsAhead(productName, input.body, now);
    if (ahead.length > 0)
      throw new TrailwireError('validation_failed', `The payload is dated more than ${MAX_READING_LEAD_MS / 60_000} minutes after the server's clock.`, {
        errors: ahead,
      });
    const idempotencyKey = input.idempotencyKey ?? null;
    if (idempotencyKey !== null && !IDEMPOTENCY_KEY.test(idempotencyKey))
      throw new TrailwireError('validation_failed', 'Idempotency-Key must be 1 to 255 visible ASCII characters.', {
        errors: [{ path: '/headers/idempotency-key', message: 'must be 1 to 255 visible ASCII characters' }],
      });

    // Refused before a replay too: a grant withdrawn since the first attempt withdraws its retries.
    const owner = await this.options.rules.checkGrant(input.claims.sub, vin);

    const limiter = this.limiterOf(productName);
    if (idempotencyKey !== null) {
      const earlier = await queue.findByIdempotencyKey(input.claims.sub, idempotencyKey, now - IDEMPOTENCY_WINDOW_MS);
      if (earlier) return { record: replayOf(earlier, vin, input.body, idempotencyKey), rateLimit: await limiter.peek(vin, now), replayed: true };
    }
    // A VIN no trailer has yet would become an unassigned trailer: counted against the partner's daily cap.
    if (!owner.known) await this.options.rules.admitNewVin(input.claims.sub, vin, now);
    // The payload counts in the window of its receive time, the time its status reports.
    const rateLimit = await limiter.enforce(vin, now);
    const { record, created } = await queue.enqueue({
      id: this.options.ids(),
      partnerId: input.claims.sub,
      product: productName,
      vin,
      payload: input.rawBody,
      receivedAt: now,
      idempotencyKey,
    });
    if (created) this.options.onEnqueued?.();
    // Not created: a concurrent request with the same key won the race; the same rule applies to it.
    return { record: created ? record : replayOf(record, vin, input.body, idempotencyKey!), rateLimit, replayed: !created };
  }

  /** The state of one of the partner's payloads; another partner's (or no) payload is not found. */
  async status(partnerId: string, id: string): Promise<IntakeStatusView> {
    const record = await this.options.queue.get(id);
    if (!record || record.partnerId !== partnerId) throw new TrailwireError('not_found', `No intake ${JSON.stringify(id.slice(0, 100))} of this partner.`);
    return statusViewOf(record);
  }

  /**
   * The state of up to `MAX_STATUS_IDS` of the partner's payloads, read together: a client checking
   * thousands of payloads asks a hundred at a time instead of one. As with `status`, another
   * partner's payload is among `notFound`, as an unknown one is. Refused (400) without ids, with too
   * many, with one that cannot be an intake id, or with one repeated.
   */
  async statuses(partnerId: string, ids: readonly string[]): Promise<IntakeStatusesView> {
    checkStatusIds(ids);
    const records = await this.options.queue.getMany(ids);
    const view: IntakeStatusesView = { data: [], notFound: [] };
    for (const id of ids) {
      const record = records.get(id);
      if (record && record.partnerId === partnerId) view.data.push(statusViewOf(record));
      else view.notFound.push(id);
    }
    return view;
  }

  /** One limiter per product: each product has its own window, and no product shares another's quota. */
  private limiterOf(product: string): FixedWindowLimiter {
    let limiter = this.limiters.get(product);
    if (!limiter) {
      const limit = this.options.products.limitOf(product);
      limiter = new FixedWindowLimiter({
        name: `intake:${product}`,
        limit: limit.requests,
        windowSeconds: limit.windowSeconds,
        counter: this.options.counter,
        clock: this.options.clock,
      });
      this.limiters.set(product, limiter);
    }
    return limiter;
  }
}

function statusViewOf(record: IntakeRecord): IntakeStatusView {
  return {
    id: record.id,
    vin: record.vin,
    product: record.product,
    status: record.status,
    receivedAt: new Date(record.receivedAt).toISOString(),
    processedAt: record.processedAt === null ? null : new Date(record.processedAt).toISOString(),
    attempts: record.attempts,
    error: record.error,
  };
}

/** The ids of a bulk status read: 1 to `MAX_STATUS_IDS`, each an intake id, none twice; every bad one named. */
function checkStatusIds(ids: readonly string[]): void {
  if (ids.length === 0) throw invalidField('/ids', `must list 1 to ${MAX_STATUS_IDS} intake ids, comma-separated`);
  if (ids.length > MAX_STATUS_IDS) throw invalidField('/ids', `must hold at most ${MAX_STATUS_IDS} intake ids, got ${ids.length}`);
  const errors: FieldError[] = [];
  const first = new Map<string, number>();
  ids.forEach((id, i) => {
    if (!INTAKE_ID_PATTERN.test(id)) errors.push({ path: `/ids/${i}`, message: 'is not an intake id (1 to 128 of A-Z, a-z, 0-9, ".", "_", "~", "-")' });
    else if (first.has(id)) errors.push({ path: `/ids/${i}`, message: `repeats /ids/${first.get(id)}` });
    else first.set(id, i);
  });
  if (errors.length > 0) throw new TrailwireError('validation_failed', `ids: ${errors.length} of the ${ids.length} ids cannot be read (malformed or repeated).`, { errors });
}
