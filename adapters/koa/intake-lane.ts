/**
 * The intake lane of Trailwire's own app: the usual intake POST — a partner whose token this process
 * has verified before, a JSON body, a plain VIN in the path — taken from node:http before Koa builds
 * a context for it, and answered 202 with the same handler (`createIntakePostHandler`), the same
 * headers, metrics and access line as the route under Koa. Every other request, and any intake
 * request the lane would have to treat differently (an unseen token, a browser's `Origin`, an encoded
 * path, another media type), goes to Koa untouched, before the lane has read or counted anything.
 *
 * Why: the intake POST is the one request taken thousands of times a second, and Koa's context, its
 * middleware chain and the router's dispatch cost it 9 µs of the HTTP thread's 61 per 202: 60.8 → 51.7
 * µs, and 0.333 → 0.377 × node:http, in one run of `npm run bench -- intake` (`docs/performance.md`). A refusal is rare: once the lane has taken a
 * request, what it refuses is answered by Koa after all (`answerRefusal`, the edge layer's
 * problem+json, request id and log line), so there is one way to answer an error.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import Koa, { type Context, type Middleware } from 'koa';
import type { Logger } from 'pino';
import { requestIdFrom } from '../../core/audit.ts';
import type { AccessClaims, TokenService } from '../../core/tokens.ts';
import type { AccessLog } from './access-log.ts';
import { writeJsonAtOnce } from './answer-json.ts';
import { usualBearerToken } from './bearer-auth.ts';
import type { ClientAddressOf } from './client-address.ts';
import { declaresPlainJsonBody, INTAKE_PATH, type IntakePostHandler } from './intake-routes.ts';
import type { HttpMetrics } from './metrics.ts';

/** What the lane knows of a request it took and then refused, for Koa to answer as its own. */
export interface TakenRequest {
  requestId: string;
  /** `performance.now()` when the lane took it: the access line's duration counts from here. */
  startedAt: number;
  claims: AccessClaims;
  /** The route pattern, as the router would have matched it. */
  route: string;
  refusal: unknown;
}

export interface IntakeLaneOptions {
  /** The app's path prefix (`/fleet-api`), or ''. */
  prefix: string;
  tokens: TokenService;
  takePost: IntakePostHandler;
  metrics: HttpMetrics;
  accessLog: AccessLog;
  clientAddressOf: ClientAddressOf | undefined;
  /** Answers a taken request that the lane refuses, through Koa's edge layer. */
  answerRefusal: (req: IncomingMessage, res: ServerResponse, taken: TakenRequest) => unknown;
  /** Where a failure to write an answer is logged (a bug: the connection is closed, the process goes on). */
  logger: Logger;
}

/** Takes the request and answers a promise of its end, or answers undefined when it is Koa's to serve. */
export type IntakeLane = (req: IncomingMessage, res: ServerResponse) => Promise<void> | undefined;

/** A VIN as the lane takes it from the path: letters and digits, nothing to decode. The core checks it is a VIN. */
const PLAIN_PATH_SEGMENT = /^[0-9A-Za-z]{1,64}$/;

export function createIntakeLane(options: IntakeLaneOptions): IntakeLane {
  const { tokens, takePost, metrics, accessLog, clientAddressOf, answerRefusal, logger } = options;
  const pathStart = `${options.prefix}${INTAKE_PATH}/`;
  const route = `${options.prefix}${INTAKE_PATH}/:VIN`;

  const serve = async (req: IncomingMessage, res: ServerResponse, vin: string, claims: AccessClaims): Promise<void> => {
    const startedAt = performance.now();
    const requestId = requestIdFrom(req.headers['x-request-id']);
    const clientAddress = () => (clientAddressOf ? clientAddressOf(req) : (req.socket.remoteAddress ?? ''));
    let accepted;
    try {
      await tokens.assertNotRevoked(claims);
      accepted = await takePost({ req, res, vin, claims, jsonBody: true, requestId, clientAddress });
    } catch (refusal) {
      await answerRefusal(req, res, { requestId, startedAt, claims, route, refusal });
      return;
    }
    writeJsonAtOnce(res, 202, accepted.body, accepted.headers, requestId);
    metrics.observe('POST', route, 202, startedAt);
    accessLog.record({ requestId, method: 'POST', route, status: 202, principal: { audience: claims.aud, id: claims.sub }, clientAddress }, startedAt);
  };

  return (req, res) => {
    if (req.method !== 'POST' || req.url === undefined || !req.url.startsWith(pathStart)) return undefined;
    const vin = req.url.slice(pathStart.length);
    const { headers } = req;
    if (!PLAIN_PATH_SEGMENT.test(vin) || headers.origin !== undefined || !declaresPlainJsonBody(headers)) return undefined;
    // A token this process has verified before (the first request of a token goes through Koa's check, which remembers it).
    const token = usualBearerToken(headers.authorization);
    if (token === undefined) return undefined;
    const claims = tokens.cachedClaims(token);
    if (claims === undefined || claims.aud !== 'partners') return undefined;
    // node:http does nothing with the promise: a failure after the answer began is logged here,
    // never left to end the process as an unhandled rejection.
    return serve(req, res, vin, claims).catch((error: unknown) => {
      logger.error({ err: error, route }, 'intake answer failed');
      res.destroy();
    });
  };
}

/**
 * Answers an intake request the lane took and refused as Koa answers any other refusal: through the
 * edge layer (problem+json, request id, metrics, access line), in a Koa app of its own whose first
 * layer gives the edge what the lane already knew (the request id it answered with, when it began).
 */
export function edgeRefusalAnswerer(edge: Middleware, proxy: boolean): (req: IncomingMessage, res: ServerResponse, taken: TakenRequest) => Promise<void> {
  const taken = new WeakMap<IncomingMessage, TakenRequest>();
  const refusals = new Koa({ proxy });
  refusals.silent = true;
  refusals.use((ctx, next) => {
    const { requestId, startedAt, claims, route } = taken.get(ctx.req)!;
    Object.assign(ctx.state, { requestId, startedAt, claims });
    (ctx as Context & { _matchedRoute?: string })._matchedRoute = route;
    return next();
  });
  refusals.use(edge);
  refusals.use((ctx) => {
    throw taken.get(ctx.req)!.refusal;
  });
  const answer = refusals.callback();
  return (req, res, request) => {
    taken.set(req, request);
    return answer(req, res);
  };
}
