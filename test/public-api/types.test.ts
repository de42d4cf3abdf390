/**
 * Type-level tests of the public API: the types the docs promise, imported by the package's own name
 * as an integrator's code imports them. `npm run typecheck` (tsc over `test/`) is what checks them:
 * every `assertType<Equals<...>>()` must hold, every plain assignment must compile, and every line
 * under `// @ts-expect-error` must fail to compile (tsc reports an unused directive otherwise). The
 * runtime test at the end makes the same calls so the file is also exercised by `node --test`.
 */
import assert from 'node:assert/strict';
import type { Server } from '@grpc/grpc-js';
import type Koa from 'koa';
import { it } from 'node:test';
import {
  type CanonicalTelemetry,
  checkCanonicalTelemetry,
  createTrailwire,
  defineProduct,
  type ErrorCode,
  ERROR_CODES,
  type FieldError,
  type Heading,
  type IntakeQueue,
  type LiveBus,
  type Product,
  type ProductDefinition,
  type ReadingTime,
  type Trailwire,
  type TrailwireOptions,
  TrailwireError,
  type TrailwireStore,
  type WindowCounter,
} from 'trailwire/core';
import { addLiveFeedService, type GrpcServerOptions, type RunningGrpcServer } from 'trailwire/grpc';
import { createTrailwireApp, createTrailwireMiddleware, type TrailwireMiddlewareOptions } from 'trailwire/koa';
import { builtInProducts, gpsBasic } from 'trailwire/products';
import gpsBasicModule, { type GpsBasicPayload } from 'trailwire/products/gps-basic';
import { openSqliteIntakeQueue, openSqliteStore, type SqliteStore } from 'trailwire/sqlite';
import type { RunningServer, ServerOptions } from 'trailwire/server';
import type { LiveFeedHandlers, LiveUpdate, TrailwireClientOptions } from 'trailwire/client';
import type { runProductConformance } from 'trailwire/testing';

/** True when A and B are the same type (not merely assignable either way). */
type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function assertType<_T extends true>(): void {}

// ── Products: defineProduct infers and checks the payload type ──────────────────────────────────
interface DoorPayload {
  doorId: string;
  open: boolean;
  at: number;
}
const doorDefinition: ProductDefinition<DoorPayload> = {
  name: 'door-sensor',
  description: 'A door sensor.',
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['doorId', 'open', 'at'],
    properties: { doorId: { type: 'string', minLength: 1, maxLength: 20 }, open: { type: 'boolean' }, at: { type: 'integer', minimum: 0 } },
  },
  limit: { requests: 10, windowSeconds: 60 },
  examples: [{ doorId: 'D1', open: true, at: 1_767_268_800_000 }],
  transform(_vin, payload) {
    assertType<Equals<typeof payload, DoorPayload>>();
    return {
      gps: [],
      devices: [{ kind: 'door', serial: payload.doorId, position: null, timestamp: payload.at, metrics: {}, state: { isWarning: payload.open, isFault: false } }],
      cargosafe: [],
    };
  },
};
const door = defineProduct(doorDefinition);
assertType<Equals<typeof door, Product<DoorPayload>>>();
assertType<Equals<ReturnType<typeof door.transform>, CanonicalTelemetry>>();
assertType<Equals<ReturnType<typeof door.validate>, FieldError[]>>();
assertType<Equals<ReturnType<typeof door.parse>, DoorPayload>>();
assertType<Equals<Parameters<ProductDefinition<DoorPayload>['transform']>, [vin: string, payload: DoorPayload, receivedAt: number]>>();

// Only compiled, never run: each call under a directive must be a type error (defineProduct would also throw at runtime).
function productsThatMustNotCompile(): void {
  // @ts-expect-error examples must be payloads of the product's type
  defineProduct<DoorPayload>({ ...doorDefinition, examples: [{ doorId: 'D1', open: 'yes', at: 0 }] });
  // @ts-expect-error at least one example
  defineProduct<DoorPayload>({ ...doorDefinition, examples: [] });
  // @ts-expect-error a limit has a window
  defineProduct<DoorPayload>({ ...doorDefinition, limit: { requests: 10 } });
  // @ts-expect-error the root schema is an object schema
  defineProduct<DoorPayload>({ ...doorDefinition, schema: { type: 'array', properties: {} } });
  // @ts-expect-error a transform answers all three record lists
  defineProduct<DoorPayload>({ ...doorDefinition, transform: () => ({ gps: [], devices: [] }) });
  defineProduct<DoorPayload>({
    ...doorDefinition,
    // @ts-expect-error a GPS heading is one of the eight cardinal points
    transform: () => ({ gps: [{ timestamp: 0, lat: 0, long: 0, speed: 0, heading: 'North' }], devices: [], cargosafe: [] }),
  });
  // @ts-expect-error a reading time is epoch ms, not the payload's text
  defineProduct<DoorPayload>({ ...doorDefinition, readingTimes: () => [{ pointer: '/at', at: '2026-01-01T00:00:00Z' }] });
}
// A readingTimes hook says where the payload states its times; the product keeps it, typed by the payload.
const datedDoor = defineProduct<DoorPayload>({ ...doorDefinition, readingTimes: (payload) => [{ pointer: '/at', at: payload.at }] });
assertType<Equals<typeof datedDoor.readingTimes, ((payload: DoorPayload) => ReadingTime[]) | undefined>>();
// A validate hook answers field errors.
defineProduct<DoorPayload>({ ...doorDefinition, validate: (payload) => (payload.doorId === 'X' ? [{ path: '/doorId', message: 'not X' }] : []) });
assertType<Equals<Heading, 'N' | 'NE' | 'E' | 'SE' | 'S' | 'SW' | 'W' | 'NW'>>();

// The shipped products carry their payload types.
assertType<Equals<typeof gpsBasic, Product<GpsBasicPayload>>>();
assertType<Equals<typeof gpsBasicModule, Product<GpsBasicPayload>>>();
const installable: TrailwireOptions['products'] = [...builtInProducts, door];
// The conformance suite takes any product.
assertType<Equals<Parameters<typeof runProductConformance>[0], Product<any>>>();

// ── Errors ───────────────────────────────────────────────────────────────────────────────────────
assertType<Equals<ErrorCode, (typeof ERROR_CODES)[number]>>();
const notFound = new TrailwireError('not_found', 'no such trailer');
assertType<Equals<typeof notFound.code, ErrorCode>>();
function errorsThatMustNotCompile(): void {
  // @ts-expect-error only the documented codes exist
  new TrailwireError('teapot', 'short and stout');
  // @ts-expect-error the store is required
  void createTrailwire({});
}

// ── The core and its seams ───────────────────────────────────────────────────────────────────────
async function assemble(): Promise<Trailwire> {
  const store = await openSqliteStore({ file: ':memory:' });
  assertType<Equals<typeof store, SqliteStore>>();
  const asStore: TrailwireStore = store;
  const queue: IntakeQueue = openSqliteIntakeQueue(store.db);
  const trailwire = await createTrailwire({ store: asStore, intakeQueue: queue, products: installable });
  return trailwire;
}
// A backend implements the seams structurally; these are the shapes it must meet.
assertType<Equals<Parameters<WindowCounter['increment']>, [key: string, expiresAt: number]>>();
assertType<Equals<ReturnType<LiveBus['listen']>, Promise<() => void>>>();

// ── Transports ───────────────────────────────────────────────────────────────────────────────────
function mount(trailwire: Trailwire): void {
  const app: Koa = createTrailwireApp(trailwire, { prefix: '/fleet-api', trustProxy: true });
  const middleware: Koa.Middleware = createTrailwireMiddleware(trailwire, { prefix: '/fleet-api', data: true, auth: false });
  app.use(middleware);
}
function liveFeedOn(server: Server, trailwire: Trailwire): void {
  const service = addLiveFeedService(server, { tokens: trailwire.tokens, hub: trailwire.live, heartbeatIntervalMs: 5000 });
  service.endAllStreams();
}
function transportsThatMustNotCompile(trailwire: Trailwire, server: Server): void {
  // @ts-expect-error intake exists only when a queue was given: check it
  void trailwire.intake.worker;
  // @ts-expect-error trustProxy belongs to the host app (its `proxy` setting), not to the middleware
  createTrailwireMiddleware(trailwire, { trustProxy: true } satisfies TrailwireMiddlewareOptions);
  // @ts-expect-error the LiveFeed needs the hub
  addLiveFeedService(server, { tokens: trailwire.tokens });
}
assertType<Equals<RunningGrpcServer['port'], number>>();
assertType<Equals<GrpcServerOptions['port'], number | undefined>>();

// ── The standalone server ────────────────────────────────────────────────────────────────────────
assertType<Equals<ServerOptions['productModules'], readonly string[] | undefined>>();
assertType<Equals<RunningServer['url'], string>>();
assertType<Equals<RunningServer['trailwire'], Trailwire>>();
// @ts-expect-error the HTTP port is a number (parse the environment at the edge)
const badPort: ServerOptions = { port: '8080' };

// ── The client ───────────────────────────────────────────────────────────────────────────────────
assertType<Equals<TrailwireClientOptions['audience'], 'partners' | 'customers'>>();
assertType<Equals<Parameters<NonNullable<LiveFeedHandlers['onUpdate']>>, [update: LiveUpdate]>>();

it('the typed calls above also run: a product defined from the typed definition transforms its example into valid telemetry', async () => {
  assert.deepEqual(checkCanonicalTelemetry(door.transform('1HGCM82633A004352', door.examples[0]!, 0)), []);
  const trailwire = await assemble();
  try {
    assert.deepEqual(trailwire.products.list().map((p) => p.name), ['gps-basic', 'tpms', 'cargosafe', 'door-sensor']);
    assert.equal(typeof mount, 'function');
    assert.equal(typeof liveFeedOn, 'function');
    assert.equal(notFound.code, 'not_found');
    assert.equal(badPort.port, '8080');
  } finally {
    await trailwire.close();
  }
});
