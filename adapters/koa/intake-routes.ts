/**
 * Partner intake over HTTP (contract 4): the transport's part is the body — `application/json`
 * only and uncompressed (415), at most the configured size (413, checked on Content-Length and while
 * streaming, so an oversized body is never buffered whole), valid JSON (400) — and the 202 with
 * `Location`, and the status endpoints (one payload's, and up to 100 read together).
 * Everything else (VIN, product schema, grants, idempotency, limits, the durable enqueue) is the core's.
 * Every intake request is first counted against its partner's budget (the core's `admit`), before
 * its body is read: a refused body counts too, and one over budget costs no reading or parsing. A
 * large body is scanned as it arrives against the shape its product allows (the core's
 * `largeBodyScan`) and refused (400) at the first member too many, before it is parsed or read to its
 * end. A refusal given before the body was read in full is held a second, then answered with
 * `Connection: close` (`refuseUnread`): a flood of them costs the server next to nothing (issue 29).
 * A refusal for want of a grant is written to the audit trail, sampled per partner.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import type { TrailwireLogger } from './logger.ts';
import { OncePerWindow } from '../../core/audit.ts';
import { HTTP_STATUS_BY_CODE, isTrailwireError, TrailwireError } from '../../core/errors.ts';
import type { JsonShapeScan } from '../../core/json-shape.ts';
import type { RateLimitState } from '../../core/rate-limit.ts';
import type { AccessClaims } from '../../core/tokens.ts';
import type { Trailwire } from '../../core/trailwire.ts';
import { type AuthenticatedState, bearerAuth } from './bearer-auth.ts';
import { answerJson, rateLimitHeaderList, setRateLimitHeaders } from './answer-headers.ts';
import { mountPathOf } from './mount-path.ts';

export const DEFAULT_INTAKE_BODY_LIMIT = 256 * 1024;
export const INTAKE_PATH = '/api/v1/telemetry/intake';
export const DEFAULT_REFUSAL_DELAY_MS = 1000;

/** Options of the intake endpoints (`createIntakeRouter`) and of their POST route (`createIntakePostRoute`). */
export interface IntakeRouteOptions {
  /** Largest body in bytes. Default 256 KiB. */
  bodyLimitBytes?: number;
  /** The path prefix the app serves its routes under (`/fleet-api`), for the `Location` header. Default none. */
  pathPrefix?: string;
  /**
   * Write the 202 at once, in one `writeHead`, rather than through Koa's response: much cheaper
   * (`answer-headers.ts`), but a middleware above that adds headers after the route returns no longer
   * reaches it. Default false; Trailwire's own app (`createTrailwireApp`) turns it on.
   */
  writeAtOnce?: boolean;
  /**
   * Where audit lines go (`audit: true`): an intake refused `partner_not_granted`, at most one
   * line per partner a minute with the count of those left out. Default: none.
   */
  auditLogger?: TrailwireLogger;
  /**
   * How long a refusal given before the body was read in full (429 over the partner's budget, 415,
   * 413, a large body its product cannot accept) is held before it is answered, in ms; its
   * connection is closed after the answer either way. It slows a client repeating such requests
   * at once to one per connection per `refusalDelayMs` (issue 29). Default 1000; 0 answers at once.
   */
  refusalDelayMs?: number;
}

/**
 * The intake POST route (`POST .../intake/{VIN}`), as Koa middleware: the partner's bearer check, then
 * the partner's budget (contract 4: every request counts, refusals too, before its body is read), the
 * body (JSON only, uncompressed, at most `bodyLimitBytes`, a large one scanned as it arrives), the
 * core's `accept`, and the 202, whose headers are the tighter of the two limits, `Location` and
 * `Idempotent-Replayed`; a refusal is thrown (a `TrailwireError`) for the edge layer to answer. One
 * route, mounted twice over: in the intake router (and so in every app, under the 404/405 and OpenAPI
 * the router gives) and behind the intake door of an app Trailwire owns (`intake-door.ts`), which
 * serves the same request without Koa's routing.
 */
export function createIntakePostRoute(trailwire: Trailwire, options: IntakeRouteOptions = {}): Middleware {
  const intake = trailwire.intake;
  if (!intake) throw new TypeError('createIntakeRouter: the Trailwire core has no intake queue (pass `intakeQueue` to createTrailwire)');
  const bodyLimit = options.bodyLimitBytes ?? DEFAULT_INTAKE_BODY_LIMIT;
  const statusPath = `${options.pathPrefix ?? ''}${INTAKE_PATH}/status`;
  const writeAtOnce = options.writeAtOnce ?? false;
  const refusalDelayMs = options.refusalDelayMs ?? DEFAULT_REFUSAL_DELAY_MS;
  if (!Number.isSafeInteger(refusalDelayMs) || refusalDelayMs < 0)
    throw new TypeError(`createIntakeRouter: \`refusalDelayMs\` must be a whole number of ms ≥ 0, got ${String(refusalDelayMs)}`);
  const partnerOnly = bearerAuth(trailwire.tokens, 'partners');

  const largeBodies = new OnePerTurn();
  const refusals = new OncePerWindow({ windowMs: 60_000, clock: trailwire.clock });
  const auditRefusal = (ctx: Context, claims: AccessClaims, vin: string, error: unknown) => {
    if (!options.auditLogger || !isTrailwireError(error) || error.code !== 'partner_not_granted') return;
    const partnerId = claims.sub;
    const suppressed = refusals.admit(partnerId);
    if (suppressed === null) return;
    const requestId = ctx.state.requestId as string | undefined;
    options.auditLogger.warn(
      { audit: true, event: 'intake.refused', reason: error.code, partnerId, vin: vin.slice(0, 17), requestId, clientAddress: ctx.ip, suppressed },
      'intake refused',
    );
  };

  const take = async (ctx: Context) => {
    const { req, res } = ctx;
    const vin = (ctx.params as { VIN: string }).VIN;
    const { claims } = ctx.state as AuthenticatedState;
    const jsonBody = isJsonBody(ctx);
    // Where the host mounted Trailwire (`mount-path.ts`), or '': the `Location` starts with it.
    const mountPath = mountPathOf(ctx);
    // A parser of the host's above the mount took the body (its stream is read): waiting for it would
    // wait until the client gives up. Not the partner's doing, so not counted against its budget.
    if (req.readableDidRead) throw new TrailwireError('body_already_read', BODY_ALREADY_READ);
    let budget: RateLimitState;
    let rawBody: string;
    try {
      // Before anything else, the body included: every request counts, refusals too (contract 4).
      budget = await intake.service.admit(claims);
      if (!jsonBody) throw new TrailwireError('unsupported_media_type', 'The body must be JSON with Content-Type: application/json.');
      const encoding = req.headers['content-encoding'];
      if (encoding !== undefined && encoding !== '' && encoding.toLowerCase() !== 'identity')
        throw new TrailwireError('unsupported_media_type', `Content-Encoding ${JSON.stringify(encoding.slice(0, 40))} is not supported; send the JSON uncompressed.`);
      rawBody = await readBody(req, bodyLimit, () => intake.service.largeBodyScan(claims));
    } catch (error) {
      if (isTrailwireError(error) && HTTP_STATUS_BY_CODE[error.code].status < 500) await refuseUnread(res, refusalDelayMs);
      throw error;
    }
    if (rawBody.length > LARGE_BODY_BYTES) await largeBodies.nextTurn();
    let body: unknown;
    try {
      body = JSON.parse(rawBody);
    } catch (error) {
      throw new TrailwireError('validation_failed', 'The body is not valid JSON.', {
        errors: [{ path: '', message: (error as Error).message }],
        cause: error,
      });
    }
    let accepted;
    try {
      // Node joins a repeated header of this kind with ", ": always a string here.
      const idempotencyKey = req.headers['idempotency-key'] as string | undefined;
      accepted = await intake.service.accept({ claims, vin, body, rawBody, idempotencyKey: idempotencyKey || undefined });
    } catch (error) {
      auditRefusal(ctx, claims, vin, error);
      throw error;
    }
    const headers = rateLimitHeaderList(tighterOf(budget, accepted.rateLimit));
    headers.push('Location', `${mountPath}${statusPath}/${accepted.record.id}`);
    if (accepted.replayed) headers.push('Idempotent-Replayed', 'true');
    answerJson(ctx, 202, { id: accepted.record.id, status: 'queued' }, headers, writeAtOnce);
  };
  return (ctx) => partnerOnly(ctx, () => take(ctx));
}
/**
 * The intake endpoints, for partner tokens: `POST .../intake/{VIN}` (`postRoute`, by default one built
 * with `options`), `GET .../intake/status/{id}` and `GET .../intake/status?ids=…`.
 */
export function createIntakeRouter(trailwire: Trailwire, options: IntakeRouteOptions = {}, postRoute = createIntakePostRoute(trailwire, options)): Router {
  const intake = trailwire.intake!;
  const router = new Router();
  const partnerOnly = bearerAuth(trailwire.tokens, 'partners');

  router.post(`${INTAKE_PATH}/:VIN`, postRoute);

  /**
   * Status polling counts against the same per-principal read limit as the customer read API: one
   * read a request, whether it asks one payload or a hundred (the bulk read is how a client checks
   * thousands of payloads within that limit). Answers the partner's id, once counted.
   */
  const countRead = async (ctx: Context): Promise<string> => {
    const { claims } = ctx.state as AuthenticatedState;
    setRateLimitHeaders(ctx, await trailwire.readLimiter.enforce(`partners:${claims.sub}`));
    ctx.set('Cache-Control', 'no-store');
    return claims.sub;
  };
  router.get(`${INTAKE_PATH}/status`, partnerOnly, async (ctx) => {
    const partnerId = await countRead(ctx);
    ctx.body = await intake.service.statuses(partnerId, idsOf(ctx.query.ids));
  });
  router.get(`${INTAKE_PATH}/status/:id`, partnerOnly, async (ctx) => {
    const partnerId = await countRead(ctx);
    ctx.body = await intake.service.status(partnerId, (ctx.params as { id: string }).id);
  });
  return router;
}

/** The `ids` of a bulk status read: comma-separated, or the parameter repeated; none when absent. */
function idsOf(query: string | string[] | undefined): string[] {
  return ([] as string[]).concat(query ?? []).flatMap((value) => value.split(','));
}

const BODY_ALREADY_READ =
  'The server that mounts Trailwire read this request body before Trailwire could (a body parser such as express.json() above the mount, or a route of the host that parsed it). Mount Trailwire above the body parser, or keep the parser off its paths. Nothing was stored.';

/**
 * Bodies longer than this are scanned against their product's shape as they are read, counted in
 * bytes (`IntakeService.largeBodyScan`), then parsed and validated one per event-loop turn, counted
 * in characters (never more than its bytes). A usual payload is a few hundred bytes: never scanned,
 * never waits.
 */
const LARGE_BODY_BYTES = 16 * 1024;

/**
 * Hands out event-loop turns one at a time: each `nextTurn()` resolves in a later turn than the one
 * before it (a `setImmediate` each), so that what its caller does next — parsing and validating a
 * large body, ~5-10 ms for 250 KB of 24,000 keys — runs with the poll phase between it and the next.
 * Without it, 32 connections finishing their bodies together were all parsed in one poll phase, and a
 * `/healthz` arriving behind them waited for every one (issue 29: 3.4 s; 6.9 s on a loaded test
 * machine before this gate).
 */
class OnePerTurn {
  private last: Promise<void> = Promise.resolve();

  nextTurn(): Promise<void> {
    const turn = this.last.then(() => new Promise<void>((resolve) => setImmediate(resolve)));
    this.last = turn;
    return turn;
  }
}

/**
 * The limit a client should heed: the one with fewer requests left (the partner's budget, or the
 * VIN's window). One RateLimit policy per answer, as the headers carry one.
 */
function tighterOf(a: RateLimitState, b: RateLimitState): RateLimitState {
  return b.remaining < a.remaining || (b.remaining === a.remaining && b.resetSeconds > a.resetSeconds) ? b : a;
}

/**
 * Whether a request declares a JSON body in one of the usual spellings, with a length or chunks:
 * answered without parsing the media type, which costs most of a microsecond.
 */
function declaresPlainJsonBody(headers: IncomingHttpHeaders): boolean {
  const type = headers['content-type'];
  return (type === 'application/json' || type === 'application/json; charset=utf-8') && (headers['content-length'] !== undefined || headers['transfer-encoding'] !== undefined);
}

/** Whether the request has a body declared `application/json` (as `ctx.is` answers), the usual spellings first. */
export function isJsonBody(ctx: Context): boolean {
  return declaresPlainJsonBody(ctx.req.headers) || Boolean(ctx.is('application/json'));
}

/**
 * Reads the request body as UTF-8 text, refusing (413) as soon as it passes `limit` bytes. Once it
 * passes `LARGE_BODY_BYTES`, every chunk goes through the scan `largeBodyScan` answers (none: not
 * scanned), which refuses (400) a body its product cannot accept before the rest of it is read.
 * Plain stream events rather than `for await`: the async iterator costs several microseconds a request.
 */
export function readBody(req: IncomingMessage, limit: number, largeBodyScan: () => JsonShapeScan | undefined): Promise<string> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(new TrailwireError('payload_too_large', `The body exceeds ${limit} bytes.`));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let scan: JsonShapeScan | undefined | null = null;
    const settle = (error: unknown, text?: string) => {
      req.off('data', onData).off('end', onEnd).off('error', settle).off('close', onClose);
      if (error) reject(error);
      else resolve(text!);
    };
    /** Refuses the body before its end: nothing more of it is read (`refuseUnread` closes the connection after the answer). */
    const refuse = (error: TrailwireError) => {
      req.pause();
      settle(error);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return refuse(new TrailwireError('payload_too_large', `The body exceeds ${limit} bytes.`));
      chunks.push(chunk);
      if (size <= LARGE_BODY_BYTES) return;
      let unscanned = [chunk];
      if (scan === null) {
        // Crossing into a large body: the scan reads what came before too.
        scan = largeBodyScan();
        unscanned = chunks;
      }
      if (scan === undefined) return;
      for (const part of unscanned) {
        const problem = scan.feed(part);
        if (problem) return refuse(new TrailwireError('validation_failed', "The payload cannot match its product's schema; it was refused before parsing.", { errors: [problem] }));
      }
    };
    const onEnd = () => settle(null, (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)).toString('utf8'));
    const onClose = () => settle(new Error('the client closed the connection before the body ended'));
    req.on('data', onData).on('end', onEnd).on('error', settle).on('close', onClose);
  });
}

/**
 * Prepares the answer to a refusal given before the body was read in full (429 over the budget, 415,
 * 413, the shape scan's 400): `Connection: close`, so that Node closes the connection after the
 * answer rather than reading the rest of the body off it to reuse the connection (250 KB read and
 * dropped for each 429 of an invalid-body flood kept the event loop busy, issue 29), and the answer
 * held for `delayMs` while the connection sits unread, which costs the server nothing: a client that
 * repeats such a request at once on 32 connections (the flood) gets 32 answers a second, not the
 * thousands whose connections the server would otherwise open and close. A client that heeds the
 * refusal loses nothing: a 429's `Retry-After` is at least a second, and the others are refusals it
 * must fix, not retry.
 */
async function refuseUnread(res: ServerResponse, delayMs: number): Promise<void> {
  if (!res.headersSent) res.setHeader('Connection', 'close');
  if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
}
