/**
 * The intake door of an app Trailwire owns (`createTrailwireApp`, and so `createTrailwireHandler` and
 * `trailwire serve`): the intake POST, the one request a partner sends thousands of times a second,
 * served by the same layers as in Koa's stack — the CORS layer when configured, the edge (request id,
 * problem answers, metrics, access line) and the intake POST route (bearer check, body, core, 202) —
 * called in turn on a Koa context, without the rest of Koa's request handling: the composition of the
 * whole stack, the pages and router layers it passes through, and the listeners Koa puts on every
 * response. One path: the door runs exactly the functions the stack would, in the same order, and a
 * request it does not take goes to the whole app unchanged (issue 38, STYLE's "speed without a second
 * path"). Its worth is measured in docs/performance.md (`npm run bench -- intake`).
 *
 * The door takes a POST whose path is `<prefix>/api/v1/telemetry/intake/<one segment>`, as the intake
 * router matches it (case-insensitive, one optional trailing slash, the segment decoded as the router
 * decodes parameters); anything else (an absolute-form target, another method, more segments) goes to
 * the app, whose router answers it as it always has.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type Koa from 'koa';
import type { Context, Middleware } from 'koa';
import compose from 'koa-compose';
import { INTAKE_PATH } from './intake-routes.ts';

export interface IntakeDoor {
  /** Serves the request when it is an intake POST, answering its promise; undefined when the app must. */
  serve(req: IncomingMessage, res: ServerResponse): Promise<void> | undefined;
}

export function createIntakeDoor(app: Koa, options: { prefix: string; layers: Middleware[] }): IntakeDoor {
  const { prefix } = options;
  // The intake router's route, spelled as its layer spells it (the metrics' and access log's route).
  const route = `${prefix}${INTAKE_PATH}/:VIN`;
  const pattern = new RegExp(`^${escapeRegExp(`${prefix}${INTAKE_PATH}/`)}([^/]+)/?$`, 'i');
  const run = compose(options.layers);
  return {
    serve(req, res) {
      if (req.method !== 'POST') return undefined;
      const match = pattern.exec(pathOf(req.url ?? ''));
      if (!match) return undefined;
      const ctx = app.createContext(req, res);
      // As Koa starts every answer, and as the router leaves a matched route.
      res.statusCode = 404;
      const routed = ctx as Context & { _matchedRoute: string; params: Record<string, string> };
      routed._matchedRoute = route;
      routed.params = { VIN: safeDecodeURIComponent(match[1]!) };
      return run(ctx).then(
        () => respond(ctx),
        (error: unknown) => ctx.onerror(error as Error),
      );
    },
  };
}

/**
 * What Koa writes after its stack for what the edge leaves: nothing when the route wrote the answer
 * itself (the 202, `ctx.respond = false`), else the JSON body the edge set (a problem answer).
 */
function respond(ctx: Context): void {
  if (ctx.respond === false) return;
  const { res } = ctx;
  if (!ctx.writable || ctx.body === null || ctx.body === undefined) {
    res.end();
    return;
  }
  const json = JSON.stringify(ctx.body);
  if (!res.headersSent) ctx.length = Buffer.byteLength(json);
  res.end(json);
}

function pathOf(url: string): string {
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

/** As @koa/router decodes a parameter: the raw text when it is not valid percent-encoding. */
function safeDecodeURIComponent(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
