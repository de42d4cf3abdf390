/**
 * Paging (contract 5). Lists are keyset pages: a `next` token carries the position after the last
 * record of a page (an id, or a timestamp and sequence), so a page costs the same however deep it is
 * and inserts between pages never duplicate or skip a record. It also carries everything else that
 * shapes the list — the page size, the `activeOnly` filter, the time range — so that `?next=` alone
 * continues the same list, and a parameter beside it that says otherwise is refused rather than
 * silently answered with a page of another list (`agreeWithToken`).
 * Tokens are opaque and tamper-evident: base64url JSON plus an HMAC bound to the list they came from,
 * so a token edited by hand, or replayed on another list, is a 400 rather than a silent wrong page.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { invalidField, TrailwireError } from './errors.ts';
import { parseRfc3339 } from './json-schema.ts';
import type { FleetTimeKey, TimeKey } from './store.ts';

export const TAKE_DEFAULT = 50;
export const TAKE_MAX = 500;
/** The default time range of telemetry lists: the last 24 hours. */
export const DEFAULT_RANGE_MS = 24 * 60 * 60 * 1000;

/** A page of a list as the read API answers it. */
export interface Page<T> {
  data: T[];
  next?: string;
}

/** Parses `take`: absent = 50, else an integer 1..500. */
export function parseTake(raw: string | undefined): number {
  if (raw === undefined) return TAKE_DEFAULT;
  if (!/^\d+$/.test(raw)) throw invalidField('/take', `must be an integer from 1 to ${TAKE_MAX}`);
  const take = Number(raw);
  if (take < 1 || take > TAKE_MAX) throw invalidField('/take', `must be an integer from 1 to ${TAKE_MAX}`);
  return take;
}

/** Parses `activeOnly`: absent = false, else `true` or `false`. */
export function parseActiveOnly(raw: string | undefined): boolean {
  if (raw === undefined || raw === 'false') return false;
  if (raw === 'true') return true;
  throw invalidField('/activeOnly', 'must be true or false');
}

/** Parses an RFC 3339 timestamp with a time zone (`Z` or an offset) into epoch ms. */
export function parseTimestamp(raw: string, path: string): number {
  const ms = parseRfc3339(raw);
  if (ms === null) throw invalidField(path, 'must be an RFC 3339 timestamp such as 2026-01-31T12:00:00Z');
  return ms;
}

export interface TimeRange {
  from: number;
  to: number;
}

/** Parses `from`/`to`: `to` defaults to now, `from` to `to` - 24 h; `from` after `to` is a 400. */
export function parseTimeRange(raw: { from?: string; to?: string }, now: number): TimeRange {
  const to = raw.to === undefined ? now : parseTimestamp(raw.to, '/to');
  const from = raw.from === undefined ? to - DEFAULT_RANGE_MS : parseTimestamp(raw.from, '/from');
  if (from > to) throw invalidField('/from', 'must not be after `to`');
  return { from, to };
}

/**
 * The position a `next` token resumes after, and the shape of its list: the page size, the
 * `activeOnly` filter of trailer and device lists, the time range of telemetry lists (whose position
 * also names the trailer on the fleet-wide GPS list).
 */
export type CursorPosition =
  | { kind: 'id'; afterId: string | number; take: number; activeOnly?: boolean }
  | { kind: 'time'; after: TimeKey | FleetTimeKey; range: TimeRange; take: number };

/** Encodes and decodes `next` tokens with a server secret. */
export class CursorCodec {
  private readonly secret: Buffer;

  /** `secret`: at least 32 bytes, shared by every process serving the same store. */
  constructor(secret: string | Buffer) {
    this.secret = typeof secret === 'string' ? Buffer.from(secret, 'base64url') : secret;
    if (this.secret.length < 32) throw new TypeError('CursorCodec: the secret must be at least 32 bytes');
  }

  /** A token for resuming the list named `scope` after `position`. */
  encode(scope: string, position: CursorPosition): string {
    const body = Buffer.from(JSON.stringify(compact(position))).toString('base64url');
    return `${body}.${this.sign(scope, body)}`;
  }

  /** The position in a token; a malformed, tampered or foreign token is a 400 on `/next`. */
  decode(scope: string, token: string): CursorPosition {
    const [body, signature, extra] = token.split('.');
    const expected = body ? this.sign(scope, body) : '';
    if (!body || !signature || extra !== undefined || !safeEqual(signature, expected)) throw badCursor();
    try {
      return expand(JSON.parse(Buffer.from(body, 'base64url').toString('utf8')));
    } catch {
      throw badCursor();
    }
  }

  private sign(scope: string, body: string): string {
    return createHmac('sha256', this.secret).update(scope).update('\n').update(body).digest('base64url').slice(0, 22);
  }
}

function badCursor(): TrailwireError {
  return invalidField('/next', 'is not a paging token of this list; pass `next` exactly as a previous page returned it');
}

function safeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/**
 * A query parameter given beside `next` must say what the token says (contract 5): `given` is the
 * parsed parameter (undefined when absent), `carried` the token's value. Answers the token's value.
 */
export function agreeWithToken<T>(path: string, given: T | undefined, carried: T, shown: string = String(carried)): T {
  if (given !== undefined && given !== carried)
    throw invalidField(path, `contradicts the \`next\` token, which continues the list with ${path.slice(1)} ${shown}; omit it beside \`next\``);
  return carried;
}

// Short keys keep tokens short in URLs.
function compact(position: CursorPosition): unknown {
  return position.kind === 'id'
    ? { i: position.afterId, n: position.take, ...(position.activeOnly === undefined ? {} : { a: position.activeOnly }) }
    : {
        t: position.after.timestamp,
        s: position.after.seq,
        ...('trailerId' in position.after ? { r: position.after.trailerId } : {}),
        f: position.range.from,
        u: position.range.to,
        n: position.take,
      };
}

function expand(value: unknown): CursorPosition {
  const v = value as Record<string, unknown>;
  const take = v?.n;
  if (!Number.isInteger(take) || (take as number) < 1 || (take as number) > TAKE_MAX) throw new Error('not a cursor');
  if (typeof v.i === 'string' || Number.isSafeInteger(v.i)) {
    if (v.a !== undefined && typeof v.a !== 'boolean') throw new Error('not a cursor');
    return { kind: 'id', afterId: v.i as string | number, take: take as number, ...(v.a === undefined ? {} : { activeOnly: v.a as boolean }) };
  }
  const numbers = [v.t, v.s, v.f, v.u];
  if (numbers.every((n) => Number.isSafeInteger(n)) && (v.r === undefined || typeof v.r === 'string')) {
    const after = { timestamp: v.t as number, seq: v.s as number, ...(v.r === undefined ? {} : { trailerId: v.r as string }) };
    return { kind: 'time', after, range: { from: v.f as number, to: v.u as number }, take: take as number };
  }
  throw new Error('not a cursor');
}

/**
 * Builds a page from `take + 1` rows fetched by the store: the extra row only says that more exist.
 * `nextToken` makes the token that resumes after a row.
 */
export function toPage<Row, View>(
  rows: Row[],
  take: number,
  view: (row: Row) => View,
  nextToken: (lastRow: Row) => string,
): Page<View> {
  const more = rows.length > take;
  const pageRows = more ? rows.slice(0, take) : rows;
  const page: Page<View> = { data: pageRows.map(view) };
  const last = pageRows[pageRows.length - 1];
  if (more && last !== undefined) page.next = nextToken(last);
  return page;
}
