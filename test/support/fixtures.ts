/**
 * Test fixtures for the HTTP-level suites: build a customer's fleet with trailers, devices, cargosafe
 * units and telemetry through the core (the operator's `trailwire.admin` and the canonical
 * `store.applyTelemetry` write), serve any `Trailwire` on an ephemeral port (for tests that need
 * their own store, such as a reopened file or a failing one), and check problem+json responses.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { createTrailwireApp, type TrailwireAppOptions } from '../../adapters/koa/app.ts';
import type { CanonicalCargosafeReading, CanonicalDeviceReading, CanonicalTelemetry } from '../../core/canonical.ts';
import type { NewIntake } from '../../core/intake-queue.ts';
import type { Audience, DeviceState, Fleet, GpsFix, Heading, Trailer } from '../../core/model.ts';
import type { Trailwire } from '../../core/trailwire.ts';
import { withCheckDigit } from '../../core/vin.ts';
import type { CallOptions, CallResult } from './test-app.ts';

const MINUTE = 60_000;
const OK: DeviceState = { isWarning: false, isFault: false };

let vinCounter = 0;
let intakeCounter = 0;

/** When `newIntake`'s payloads are received unless told otherwise. */
export const INTAKE_TIME = Date.UTC(2026, 5, 1);

/** An accepted payload as the intake queue takes it, with an id unique within the process. */
export function newIntake(overrides: Partial<NewIntake> = {}): NewIntake {
  return {
    id: `intake-${++intakeCounter}`,
    partnerId: 'p',
    product: 'gps-basic',
    vin: '1HGCM82633A004352',
    payload: '{}',
    receivedAt: INTAKE_TIME,
    idempotencyKey: null,
    ...overrides,
  };
}

/** A fresh, valid VIN (correct check digit), unique within the process. */
export function uniqueVin(): string {
  vinCounter++;
  // Digits only after a fixed WMI (always in the VIN alphabet); position 9 is the check digit.
  const pid = String(process.pid % 100_000).padStart(5, '0');
  return withCheckDigit(`1TW${pid}0${String(vinCounter).padStart(8, '0')}`);
}

/** A GPS fix at `timestamp` with plausible values. */
export function gpsFix(timestamp: number, overrides: Partial<GpsFix> = {}): GpsFix {
  return { timestamp, lat: 41.88, long: -87.63, speed: 55, heading: 'E' as Heading, ...overrides };
}

/** A tire-sensor reading of device `serial`. */
export function tpmsReading(serial: string, timestamp: number, state: DeviceState = OK): CanonicalDeviceReading {
  return { kind: 'tpms', serial, position: 'LF-outer', timestamp, metrics: { pressurePsi: 105, temperatureC: 30 }, state };
}

/** A cargosafe reading of unit `serial`. */
export function cargosafeReading(serial: string, timestamp: number): CanonicalCargosafeReading {
  return { serial, timestamp, doorOpen: false, loadPercent: 60, temperatureC: 4, humidityPercent: 65 };
}

/** Writes telemetry for `vin` through the store's canonical write (as intake processing does). */
export async function applyTelemetry(trailwire: Trailwire, vin: string, telemetry: Partial<CanonicalTelemetry>): Promise<Trailer> {
  const applied = await trailwire.store.applyTelemetry({
    vin,
    at: trailwire.clock.now(),
    telemetry: { gps: telemetry.gps ?? [], devices: telemetry.devices ?? [], cargosafe: telemetry.cargosafe ?? [] },
  });
  return applied.trailer;
}

export interface SeededTrailer {
  trailer: Trailer;
  /** Device ids, in id order. */
  deviceIds: string[];
  /** Cargosafe unit ids, in id order. */
  cargosafeIds: string[];
}

export interface SeededFleet {
  fleet: Fleet;
  trailers: SeededTrailer[];
}

export interface SeedFleetOptions {
  name?: string;
  /** Trailers registered in the fleet. Default 2. */
  trailers?: number;
  /** Tire sensors per trailer, each with `readings` readings. Default 2. */
  devicesPerTrailer?: number;
  /** Cargosafe units per trailer, each with `readings` readings. Default 1. */
  cargosafePerTrailer?: number;
  /** GPS fixes per trailer. Default 3. */
  gpsFixes?: number;
  /** Readings per device and per cargosafe unit. Default 3. */
  readings?: number;
}

/**
 * Registers a fleet of `customerId` with trailers and writes their telemetry: GPS fixes and readings
 * one minute apart, ending one minute before the clock's now (so inside the default 24-hour range).
 */
export async function seedFleet(trailwire: Trailwire, customerId: string, options: SeedFleetOptions = {}): Promise<SeededFleet> {
  const fleet = await trailwire.admin.createFleet({ customerId, name: options.name ?? 'Fleet' });
  const now = trailwire.clock.now();
  const times = (count: number) => Array.from({ length: count }, (_, i) => now - (count - i) * MINUTE);
  const trailers: SeededTrailer[] = [];
  for (let t = 0; t < (options.trailers ?? 2); t++) {
    const registered = await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: uniqueVin(), unitId: `U-${t + 1}` });
    const readingTimes = times(options.readings ?? 3);
    const devices = Array.from({ length: options.devicesPerTrailer ?? 2 }, (_, d) => `TPMS-${registered.id.slice(0, 8)}-${d}`);
    const units = Array.from({ length: options.cargosafePerTrailer ?? 1 }, (_, c) => `CS-${registered.id.slice(0, 8)}-${c}`);
    const trailer = await applyTelemetry(trailwire, registered.vin, {
      gps: times(options.gpsFixes ?? 3).map((at) => gpsFix(at)),
      devices: devices.flatMap((serial) => readingTimes.map((at) => tpmsReading(serial, at))),
      cargosafe: units.flatMap((serial) => readingTimes.map((at) => cargosafeReading(serial, at))),
    });
    const deviceRows = await trailwire.store.listDevices(customerId, trailer.id, { limit: 500, activeOnly: false, staleBefore: 0 });
    const cargosafeIds = (await trailwire.store.listCargosafe(customerId, { limit: 500 }))
      .filter((unit) => unit.trailerId === trailer.id)
      .map((unit) => unit.id);
    trailers.push({ trailer, deviceIds: deviceRows.map((device) => device.id), cargosafeIds });
  }
  return { fleet, trailers };
}

/**
 * A fresh token of a principal, minted by the core as authenticate would (without spending the
 * authenticate limit, for tests that move the clock past a token's lifetime).
 */
export async function mintToken(trailwire: Trailwire, audience: Audience, id: string): Promise<string> {
  const principal = await trailwire.store.getPrincipal(audience, id);
  assert.ok(principal, `no ${audience} ${id}`);
  return trailwire.tokens.mint(principal).accessToken;
}

/** Registers `count` trailers (no telemetry) in a fleet and answers them. */
export async function registerTrailers(trailwire: Trailwire, fleetId: number, count: number): Promise<Trailer[]> {
  const trailers: Trailer[] = [];
  for (let i = 0; i < count; i++) trailers.push(await trailwire.admin.registerTrailer({ fleetId, vin: uniqueVin() }));
  return trailers;
}

export interface ServedApp {
  url: string;
  call(method: string, path: string, options?: CallOptions): Promise<CallResult>;
  /** Stops the HTTP server (the caller closes the Trailwire). */
  close(): Promise<void>;
}

/** Serves a Trailwire assembled by the test (its own store) on an ephemeral port. */
export async function serveTrailwire(trailwire: Trailwire, options: TrailwireAppOptions = {}): Promise<ServedApp> {
  const app = createTrailwireApp(trailwire, { logger: pino({ level: 'silent' }), ...options });
  const server = createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    call: (method, path, callOptions) => callJson(url, method, path, callOptions),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** One fetch against `url`, with the same conventions as `TestApp.call`. */
export async function callJson(url: string, method: string, path: string, options: CallOptions = {}): Promise<CallResult> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.apiKey !== undefined) headers['x-api-key'] = options.apiKey;
  const body = options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
  const response = await fetch(url + path, { method, headers, body });
  const text = await response.text();
  const contentType = response.headers.get('content-type') ?? '';
  // An NDJSON export stays text: it is many JSON documents, one a line.
  const parsed = contentType.includes('json') && !contentType.includes('ndjson') && text ? JSON.parse(text) : text;
  return { status: response.status, headers: response.headers, body: parsed };
}

/**
 * Asserts an RFC 9457 problem response of `status`: the media type, the four members with the right
 * `status`, and for a 400 a non-empty `errors` list (whose first path is `path` when given).
 */
export function assertProblem(response: CallResult, status: number, path?: string): void {
  assert.equal(response.status, status, `expected ${status}, got ${response.status}: ${JSON.stringify(response.body)}`);
  assert.match(response.headers.get('content-type') ?? '', /^application\/problem\+json/);
  const body = response.body as Record<string, unknown>;
  assert.match(String(body.type), /^https:\/\/trailwire\.dev\/problems\/[a-z-]+$/);
  assert.equal(typeof body.title, 'string');
  assert.equal(body.status, status);
  assert.equal(typeof body.detail, 'string');
  if (status === 400) {
    assert.ok(Array.isArray(body.errors) && body.errors.length > 0, 'a 400 carries errors');
    for (const error of body.errors as { path: unknown; message: unknown }[]) {
      assert.equal(typeof error.path, 'string');
      assert.equal(typeof error.message, 'string');
    }
    if (path !== undefined) assert.equal((body.errors as { path: string }[])[0]?.path, path);
  }
}

/**
 * Follows `next` through every page of a list (from the first page, or from the page after `from`,
 * a `next` token already in hand); answers each page's data.
 */
export async function walkPages(
  call: (path: string) => Promise<CallResult>,
  path: string,
  from?: string,
): Promise<{ pages: unknown[][]; items: any[] }> {
  const pages: unknown[][] = [];
  let next: string | undefined = from;
  const separator = path.includes('?') ? '&' : '?';
  do {
    const response = await call(next === undefined ? path : `${path}${separator}next=${encodeURIComponent(next)}`);
    assert.equal(response.status, 200, JSON.stringify(response.body));
    pages.push(response.body.data);
    next = response.body.next;
    if (next !== undefined) assert.equal(typeof next, 'string');
    assert.ok(pages.length < 1000, 'paging does not end');
  } while (next !== undefined);
  return { pages, items: pages.flat() };
}
