/**
 * The customer read API over HTTP (contract 5 and 7): the shape of every one of the eleven
 * endpoints, 404s for unknown ids, 400s for malformed parameters, keyset paging (take bounds, walking
 * every list, tamper-evident and list-bound `next`, stability under inserts), activeOnly, time-range
 * paging of the three telemetry endpoints, and the per-customer read limit.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Trailwire } from '../../../core/trailwire.ts';
import {
  applyTelemetry,
  assertProblem,
  cargosafeReading,
  gpsFix,
  mintToken,
  registerTrailers,
  seedFleet,
  tpmsReading,
  uniqueVin,
  walkPages,
  type SeededFleet,
} from '../../support/fixtures.ts';
import { customerWithToken, startTestApp, type CallResult, type TestApp } from '../../support/test-app.ts';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const iso = (ms: number) => new Date(ms).toISOString();
const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

// --- shape assertions (contract 5) ----------------------------------------------------------------

function assertKeys(record: Record<string, unknown>, keys: string[]): void {
  assert.deepEqual(Object.keys(record).sort(), [...keys].sort());
}

function assertTimestamp(value: unknown): void {
  assert.equal(typeof value, 'string');
  assert.match(value as string, RFC3339_UTC);
}

function assertStatus(status: any): void {
  assertKeys(status, ['name', 'isWarning', 'isFault']);
  assert.ok(['OK', 'Warning', 'Faulted'].includes(status.name));
  assert.equal(status.isWarning, status.name === 'Warning');
  assert.equal(status.isFault, status.name === 'Faulted');
}

function assertFleet(fleet: any): void {
  assertKeys(fleet, ['id', 'name', 'createdAt']);
  assert.ok(Number.isInteger(fleet.id) && fleet.id > 0);
  assert.equal(typeof fleet.name, 'string');
  assertTimestamp(fleet.createdAt);
}

function assertGps(fix: any): void {
  assertKeys(fix, ['timestamp', 'lat', 'long', 'speed', 'heading']);
  assertTimestamp(fix.timestamp);
  for (const field of ['lat', 'long', 'speed']) assert.equal(typeof fix[field], 'number');
  assert.ok(['N', 'NE', 'E', 'SE', 'S', 'SW', 'W', 'NW'].includes(fix.heading));
}

function assertTrailer(trailer: any): void {
  assertKeys(trailer, [
    'id',
    'fleetId',
    'unitId',
    'vin',
    'active',
    'status',
    'statusDate',
    'faultedDevices',
    'warningDevices',
    'telemetry',
  ]);
  assert.equal(typeof trailer.id, 'string');
  assert.doesNotMatch(trailer.id, /^\d+$/, 'a trailer id is never all digits');
  assert.ok(Number.isInteger(trailer.fleetId));
  assert.ok(trailer.unitId === null || typeof trailer.unitId === 'string');
  assert.match(trailer.vin, /^[0-9A-HJ-NPR-Z]{17}$/);
  assert.equal(typeof trailer.active, 'boolean');
  assertStatus(trailer.status);
  assertTimestamp(trailer.statusDate);
  assert.ok(Number.isInteger(trailer.faultedDevices));
  assert.ok(Number.isInteger(trailer.warningDevices));
  if (trailer.telemetry !== null) assertGps(trailer.telemetry);
}

function assertDevice(device: any): void {
  assertKeys(device, ['id', 'trailerId', 'kind', 'serial', 'position', 'active', 'status', 'lastSeen']);
  for (const field of ['id', 'trailerId', 'kind', 'serial']) assert.equal(typeof device[field], 'string');
  assert.ok(device.position === null || typeof device.position === 'string');
  assert.equal(typeof device.active, 'boolean');
  assertStatus(device.status);
  if (device.lastSeen !== null) assertTimestamp(device.lastSeen);
}

function assertDeviceReading(reading: any): void {
  assertKeys(reading, ['timestamp', 'metrics', 'status']);
  assertTimestamp(reading.timestamp);
  for (const value of Object.values(reading.metrics)) assert.equal(typeof value, 'number');
  assertStatus(reading.status);
}

function assertCargosafeReading(reading: any): void {
  assertKeys(reading, ['timestamp', 'doorOpen', 'loadPercent', 'temperatureC', 'humidityPercent']);
  assertTimestamp(reading.timestamp);
  assert.equal(typeof reading.doorOpen, 'boolean');
  for (const field of ['loadPercent', 'temperatureC', 'humidityPercent']) assert.equal(typeof reading[field], 'number');
}

function assertCargosafe(unit: any): void {
  assertKeys(unit, ['id', 'trailerId', 'serial', 'active', 'lastSeen', 'latest']);
  for (const field of ['id', 'trailerId', 'serial']) assert.equal(typeof unit[field], 'string');
  assert.equal(typeof unit.active, 'boolean');
  if (unit.lastSeen !== null) assertTimestamp(unit.lastSeen);
  if (unit.latest !== null) assertCargosafeReading(unit.latest);
}

/** A 200 list page: `data` an array, `next` absent or a string, each item of the given shape. */
function assertPage(response: CallResult, item: (value: any) => void): any[] {
  assert.equal(response.status, 200, JSON.stringify(response.body));
  assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
  assert.ok(Array.isArray(response.body.data));
  const keys = Object.keys(response.body);
  assert.ok(keys.every((key) => key === 'data' || key === 'next'), `unexpected members ${keys}`);
  if ('next' in response.body) assert.equal(typeof response.body.next, 'string');
  response.body.data.forEach(item);
  return response.body.data;
}

const byId = (a: { id: string | number }, b: { id: string | number }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

// --- the eleven endpoints ---------------------------------------------------------------------------

describe('read API: every endpoint answers the contract shape', () => {
  let app: TestApp;
  let customer: { id: string; apiKey: string; token: string };
  let seeded: SeededFleet;
  let seededAt: number;
  const get = (path: string) => app.call('GET', path, { token: customer.token });

  before(async () => {
    app = await startTestApp();
    customer = await customerWithToken(app, 'Shapes');
    seededAt = app.clock.now();
    seeded = await seedFleet(app.trailwire, customer.id, { name: 'Northern', trailers: 2, devicesPerTrailer: 2 });
  });
  after(() => app.close());

  it('GET /api/v1/fleets lists the customer fleets', async () => {
    const response = await get('/api/v1/fleets');
    const fleets = assertPage(response, assertFleet);
    assert.deepEqual(
      fleets.map((fleet) => [fleet.id, fleet.name]),
      [[seeded.fleet.id, 'Northern']],
    );
    assert.equal(response.body.next, undefined);
    // Every read carries the read limit's headers.
    assert.equal(response.headers.get('ratelimit-limit'), '600');
    assert.ok(Number(response.headers.get('ratelimit-remaining')) < 600);
    assert.ok(Number(response.headers.get('ratelimit-reset')) >= 1);
  });

  it('GET /api/v1/fleets/{fleet} answers one fleet', async () => {
    const response = await get(`/api/v1/fleets/${seeded.fleet.id}`);
    assert.equal(response.status, 200);
    assertFleet(response.body);
    assert.equal(response.body.id, seeded.fleet.id);
    assert.equal(response.body.createdAt, new Date(seeded.fleet.createdAt).toISOString());
  });

  it('GET /api/v1/trailers/{digits} is the list of a fleet, /trailers/{id} one record', async () => {
    const list = assertPage(await get(`/api/v1/trailers/${seeded.fleet.id}`), assertTrailer);
    assert.deepEqual(
      list.map((trailer) => trailer.id),
      seeded.trailers.map(({ trailer }) => trailer.id).sort(),
    );
    const [first] = seeded.trailers;
    const one = await get(`/api/v1/trailers/${first!.trailer.id}`);
    assert.equal(one.status, 200);
    assertTrailer(one.body);
    assert.equal(one.body.data, undefined, 'one record, not a page');
    assert.equal(one.body.id, first!.trailer.id);
    assert.equal(one.body.fleetId, seeded.fleet.id);
    assert.equal(one.body.vin, first!.trailer.vin);
    assert.equal(one.body.unitId, 'U-1');
    assert.equal(one.body.active, true);
    assert.deepEqual(one.body.status, { name: 'OK', isWarning: false, isFault: false });
    // The latest fix of the seed is one minute before now.
    assert.deepEqual(one.body.telemetry, {
      timestamp: iso(seededAt - MINUTE),
      lat: 41.88,
      long: -87.63,
      speed: 55,
      heading: 'E',
    });
    assert.deepEqual(list.find((trailer) => trailer.id === first!.trailer.id), one.body);
  });

  it('a trailer that never reported has "telemetry": null; a faulted device makes it Faulted', async () => {
    const [quiet] = await registerTrailers(app.trailwire, seeded.fleet.id, 1);
    const response = await get(`/api/v1/trailers/${quiet!.id}`);
    assertTrailer(response.body);
    assert.equal(response.body.telemetry, null);
    assert.equal(response.body.unitId, null);

    app.clock.advance(MINUTE);
    const now = app.clock.now();
    await applyTelemetry(app.trailwire, quiet!.vin, {
      devices: [
        tpmsReading('FLAT', now - 1000, { isWarning: false, isFault: true }),
        tpmsReading('WARM', now - 1000, { isWarning: true, isFault: false }),
        tpmsReading('FINE', now - 1000),
      ],
    });
    const faulted = await get(`/api/v1/trailers/${quiet!.id}`);
    assert.deepEqual(faulted.body.status, { name: 'Faulted', isWarning: false, isFault: true });
    assert.equal(faulted.body.faultedDevices, 1);
    assert.equal(faulted.body.warningDevices, 1);
    assert.equal(faulted.body.statusDate, new Date(now).toISOString());
  });

  it('GET /api/v1/trailers/telemetry/gps/{trailer} pages the GPS fixes', async () => {
    const fixes = assertPage(await get(`/api/v1/trailers/telemetry/gps/${seeded.trailers[0]!.trailer.id}`), assertGps);
    assert.equal(fixes.length, 3);
  });

  it('GET /api/v1/devices/{trailer} lists devices; /devices/details/{device} answers one', async () => {
    const trailer = seeded.trailers[0]!;
    const devices = assertPage(await get(`/api/v1/devices/${trailer.trailer.id}`), assertDevice);
    assert.deepEqual(
      devices.map((device) => device.id),
      trailer.deviceIds,
    );
    for (const device of devices) {
      assert.equal(device.trailerId, trailer.trailer.id);
      assert.equal(device.kind, 'tpms');
    }
    const one = await get(`/api/v1/devices/details/${trailer.deviceIds[0]}`);
    assert.equal(one.status, 200);
    assertDevice(one.body);
    assert.deepEqual(one.body, devices[0]);
    assert.equal(one.body.active, true);
    assert.equal(one.body.lastSeen, iso(seededAt - MINUTE));
  });

  it('GET /api/v1/devices/telemetry/{device} pages the readings', async () => {
    const readings = assertPage(await get(`/api/v1/devices/telemetry/${seeded.trailers[0]!.deviceIds[0]}`), assertDeviceReading);
    assert.equal(readings.length, 3);
    assert.deepEqual(readings[0].metrics, { pressurePsi: 105, temperatureC: 30 });
  });

  it('GET /api/v1/cargosafe lists units; /cargosafe/{id} answers one; /cargosafe/telemetry/{id} pages readings', async () => {
    const units = assertPage(await get('/api/v1/cargosafe'), assertCargosafe);
    const expected = seeded.trailers.flatMap((trailer) => trailer.cargosafeIds).sort();
    assert.deepEqual(
      units.map((unit) => unit.id),
      expected,
    );
    const one = await get(`/api/v1/cargosafe/${expected[0]}`);
    assert.equal(one.status, 200);
    assertCargosafe(one.body);
    assert.deepEqual(one.body, units[0]);
    assert.notEqual(one.body.latest, null);
    const readings = assertPage(await get(`/api/v1/cargosafe/telemetry/${expected[0]}`), assertCargosafeReading);
    assert.equal(readings.length, 3);
    assert.deepEqual(one.body.latest, readings[2], 'latest is the newest reading');
  });

  it('answers 404 problem+json for ids the customer cannot see', async () => {
    const unknown = randomUUID();
    for (const path of [
      '/api/v1/fleets/999999',
      '/api/v1/fleets/2147483648',
      '/api/v1/trailers/999999',
      `/api/v1/trailers/${unknown}`,
      `/api/v1/trailers/telemetry/gps/${unknown}`,
      `/api/v1/devices/${unknown}`,
      `/api/v1/devices/details/${unknown}`,
      `/api/v1/devices/telemetry/${unknown}`,
      `/api/v1/cargosafe/${unknown}`,
      `/api/v1/cargosafe/telemetry/${unknown}`,
      // A device id is not a trailer id, nor a trailer id a device id.
      `/api/v1/devices/${seeded.trailers[0]!.deviceIds[0]}`,
      `/api/v1/devices/details/${seeded.trailers[0]!.trailer.id}`,
      `/api/v1/cargosafe/${seeded.trailers[0]!.trailer.id}`,
    ]) {
      const response = await get(path);
      assertProblem(response, 404);
      assert.equal(response.body.type, 'https://trailwire.dev/problems/not-found', path);
    }
  });

  it('answers 400 for a fleet id that is not a positive integer', async () => {
    for (const fleet of ['abc', '-1', '1.5', '1e3', '0x10', '%20']) {
      assertProblem(await get(`/api/v1/fleets/${fleet}`), 400, '/fleet');
    }
  });

  it('no malformed id or query parameter reaches a 500: each is a 400 or 404 problem', async () => {
    const trailer = seeded.trailers[0]!.trailer.id;
    const nasty = ["' OR 1=1 --", '%00', '%ZZ', '..%2F..%2Fetc', 'x'.repeat(3000), '%F0%9F%98%80', '%E0%A4%A', '-0', '1e309',
      'null', '[]', '%20', 'NaN', '9007199254740993', '__proto__', '0', '%C0%AF'];
    const targets = [
      (x: string) => `/api/v1/fleets/${x}`,
      (x: string) => `/api/v1/trailers/${x}`,
      (x: string) => `/api/v1/trailers/telemetry/gps/${x}`,
      (x: string) => `/api/v1/devices/${x}`,
      (x: string) => `/api/v1/devices/details/${x}`,
      (x: string) => `/api/v1/devices/telemetry/${x}`,
      (x: string) => `/api/v1/cargosafe/${x}`,
      (x: string) => `/api/v1/cargosafe/telemetry/${x}`,
      (x: string) => `/api/v1/fleets?take=${x}`,
      (x: string) => `/api/v1/cargosafe?next=${x}`,
      (x: string) => `/api/v1/trailers/${seeded.fleet.id}?activeOnly=${x}`,
      (x: string) => `/api/v1/trailers/telemetry/gps/${trailer}?from=${x}`,
      (x: string) => `/api/v1/trailers/telemetry/gps/${trailer}?to=${x}`,
      (x: string) => `/api/v1/trailers/telemetry/gps/${trailer}?next=${x}`,
    ];
    for (const target of targets) {
      for (const value of nasty) {
        const response = await get(target(value));
        assert.ok([400, 404].includes(response.status), `${target(value).slice(0, 100)}: ${response.status}`);
        assertProblem(response, response.status);
      }
    }
  });

  it('answers 400 for a repeated query parameter', async () => {
    assertProblem(await get('/api/v1/fleets?take=5&take=6'), 400, '/take');
    assertProblem(await get(`/api/v1/trailers/${seeded.fleet.id}?activeOnly=true&activeOnly=false`), 400, '/activeOnly');
  });
});

// --- id paging --------------------------------------------------------------------------------------

/** Ids handed out in order when queued, random otherwise: lets a test place records around a cursor. */
function queuedIds() {
  const queue: string[] = [];
  return { queue, ids: () => queue.shift() ?? randomUUID() };
}

describe('read API: id-ordered lists page by keyset', () => {
  let app: TestApp;
  let customer: { id: string; apiKey: string; token: string };
  let fleetId: number;
  let trailerId: string;
  let otherTrailerId: string;
  let otherFleetId: number;
  const ids = queuedIds();
  const get = (path: string) => app.call('GET', path, { token: customer.token });

  before(async () => {
    app = await startTestApp({ core: { ids: ids.ids } });
    customer = await customerWithToken(app, 'Pager');
    // 23 of everything: fleets, trailers in one fleet, devices on one trailer, cargosafe units.
    for (let i = 0; i < 22; i++) await app.trailwire.admin.createFleet({ customerId: customer.id, name: `Spare ${i}` });
    const fleet = await app.trailwire.admin.createFleet({ customerId: customer.id, name: 'Big' });
    fleetId = fleet.id;
    otherFleetId = fleet.id - 1;
    const trailers = await registerTrailers(app.trailwire, fleetId, 23);
    trailerId = trailers[0]!.id;
    otherTrailerId = trailers[1]!.id;
    const now = app.clock.now();
    await applyTelemetry(app.trailwire, trailers[0]!.vin, {
      devices: Array.from({ length: 23 }, (_, i) => tpmsReading(`S-${i}`, now - MINUTE)),
      cargosafe: Array.from({ length: 23 }, (_, i) => cargosafeReading(`C-${i}`, now - MINUTE)),
    });
    await applyTelemetry(app.trailwire, trailers[1]!.vin, { devices: [tpmsReading('OTHER', now - MINUTE)] });
  });
  after(() => app.close());

  const lists = () => [
    { name: 'fleets', path: '/api/v1/fleets' },
    { name: 'trailers', path: `/api/v1/trailers/${fleetId}` },
    { name: 'devices', path: `/api/v1/devices/${trailerId}` },
    { name: 'cargosafe', path: '/api/v1/cargosafe' },
  ];

  it('walking each list with take=7 yields all 23 once, in id order, in pages of 7, 7, 7, 2', async () => {
    for (const list of lists()) {
      const { pages, items } = await walkPages(get, `${list.path}?take=7`);
      assert.deepEqual(
        pages.map((page) => page.length),
        [7, 7, 7, 2],
        list.name,
      );
      assert.equal(items.length, 23, list.name);
      assert.equal(new Set(items.map((item) => item.id)).size, 23, `${list.name}: no duplicates`);
      assert.deepEqual(items, [...items].sort(byId), `${list.name}: in id order`);
      // The pages are the one full list cut in pieces.
      assert.deepEqual(items, (await get(`${list.path}?take=500`)).body.data, list.name);
    }
  });

  it('an exact last page has no next', async () => {
    const { pages } = await walkPages(get, '/api/v1/fleets?take=23');
    assert.equal(pages.length, 1);
    const split = await walkPages(get, '/api/v1/fleets?take=1');
    assert.equal(split.pages.length, 23);
  });

  it('take defaults to 50 and accepts 1 to 500', async () => {
    await registerTrailers(app.trailwire, otherFleetId, 55);
    const first = await get(`/api/v1/trailers/${otherFleetId}`);
    assert.equal(first.body.data.length, 50);
    assert.equal(typeof first.body.next, 'string');
    const second = await get(`/api/v1/trailers/${otherFleetId}?next=${encodeURIComponent(first.body.next)}`);
    assert.equal(second.body.data.length, 5);
    assert.equal(second.body.next, undefined);
    assert.equal((await get(`/api/v1/trailers/${otherFleetId}?take=1`)).body.data.length, 1);
    assert.equal((await get(`/api/v1/trailers/${otherFleetId}?take=500`)).body.data.length, 55);
  });

  it('answers 400 on /take for 0, 501, -1, 1.5, abc and empty, on every list', async () => {
    const allLists = [
      ...lists().map((list) => list.path),
      `/api/v1/trailers/telemetry/gps/${trailerId}`,
      `/api/v1/devices/telemetry/${(await get(`/api/v1/devices/${trailerId}?take=1`)).body.data[0].id}`,
      `/api/v1/cargosafe/telemetry/${(await get('/api/v1/cargosafe?take=1')).body.data[0].id}`,
    ];
    for (const path of allLists) {
      for (const take of ['0', '501', '-1', '1.5', 'abc', '', '1e2', '%2B5']) {
        const response = await get(`${path}?take=${take}`);
        assertProblem(response, 400, '/take');
        assert.equal(response.body.type, 'https://trailwire.dev/problems/validation-failed');
      }
    }
  });

  it('answers 400 on /next for a garbage, tampered or foreign token', async () => {
    const fleetsNext = (await get('/api/v1/fleets?take=2')).body.next as string;
    const trailersNext = (await get(`/api/v1/trailers/${fleetId}?take=2`)).body.next as string;
    const devicesNext = (await get(`/api/v1/devices/${trailerId}?take=2`)).body.next as string;
    assert.ok(fleetsNext && trailersNext && devicesNext);

    const attempts: [string, string][] = [];
    for (const garbage of ['garbage', '', 'a.b', '...', Buffer.from('{"i":0}').toString('base64url'), 'x'.repeat(4000)])
      attempts.push(['/api/v1/fleets', garbage]);
    // One character changed anywhere: in the position and in the signature.
    for (const at of [0, Math.floor(fleetsNext.length / 2), fleetsNext.indexOf('.') + 1, fleetsNext.length - 1]) {
      const changed = fleetsNext[at] === 'A' ? 'B' : 'A';
      attempts.push(['/api/v1/fleets', fleetsNext.slice(0, at) + changed + fleetsNext.slice(at + 1)]);
    }
    // A position edited by hand and carried with the old signature.
    const [, signature] = fleetsNext.split('.');
    attempts.push(['/api/v1/fleets', `${Buffer.from('{"i":0}').toString('base64url')}.${signature}`]);
    // Tokens of other lists.
    attempts.push(['/api/v1/cargosafe', fleetsNext]);
    attempts.push(['/api/v1/fleets', trailersNext]);
    attempts.push([`/api/v1/trailers/${otherFleetId}`, trailersNext]);
    attempts.push([`/api/v1/devices/${otherTrailerId}`, devicesNext]);
    attempts.push([`/api/v1/trailers/telemetry/gps/${trailerId}`, trailersNext]);

    for (const [path, next] of attempts) {
      const separator = path.includes('?') ? '&' : '?';
      const response = await get(`${path}${separator}next=${encodeURIComponent(next)}`);
      assertProblem(response, 400, '/next');
    }
  });

  it('next carries take and activeOnly: `?next=` alone continues the same list; a contradicting parameter is 400', async () => {
    for (const list of lists()) {
      const first = await get(`${list.path}?take=7`);
      const next = `next=${encodeURIComponent(first.body.next)}`;
      // Alone: the page size of the first page, not the default 50.
      const { pages } = await walkPages(get, list.path, first.body.next);
      assert.deepEqual(
        pages.map((page) => page.length),
        [7, 7, 2],
        list.name,
      );
      assert.equal((await get(`${list.path}?take=7&${next}`)).status, 200, `${list.name}: an agreeing take is fine`);
      assertProblem(await get(`${list.path}?take=8&${next}`), 400, '/take');
      assertProblem(await get(`${list.path}?take=50&${next}`), 400, '/take');
    }
    const filtered = [`/api/v1/trailers/${fleetId}`, `/api/v1/devices/${trailerId}`];
    const trailers = (await get(`${filtered[0]}?take=500`)).body.data as { id: string }[];
    await app.trailwire.admin.setTrailerActive(trailers[5]!.id, false);
    try {
      for (const path of filtered) {
        const first = await get(`${path}?activeOnly=true&take=4`);
        const rest = await walkPages(get, path, first.body.next);
        const all = [...first.body.data, ...rest.items] as { id: string; active: boolean }[];
        assert.ok(all.every((record) => record.active), `${path}: the token kept activeOnly`);
        assert.deepEqual(all, (await get(`${path}?activeOnly=true&take=500`)).body.data, path);
        const next = `next=${encodeURIComponent(first.body.next)}`;
        assert.equal((await get(`${path}?activeOnly=true&${next}`)).status, 200, 'an agreeing activeOnly is fine');
        assertProblem(await get(`${path}?activeOnly=false&${next}`), 400, '/activeOnly');
        const unfiltered = (await get(`${path}?take=4`)).body.next as string;
        assertProblem(await get(`${path}?activeOnly=true&next=${encodeURIComponent(unfiltered)}`), 400, '/activeOnly');
      }
    } finally {
      await app.trailwire.admin.setTrailerActive(trailers[5]!.id, true);
    }
  });

  it('records inserted between page fetches are neither duplicated nor skipped', async () => {
    const fleet = await app.trailwire.admin.createFleet({ customerId: customer.id, name: 'Growing' });
    ids.queue.push('t-10', 't-20', 't-30', 't-40', 't-50', 't-60');
    for (let i = 0; i < 6; i++) await app.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: uniqueVin() });

    const path = `/api/v1/trailers/${fleet.id}?take=2`;
    const first = await get(path);
    assert.deepEqual(
      first.body.data.map((trailer: { id: string }) => trailer.id),
      ['t-10', 't-20'],
    );
    // Before the cursor, between the records still to come, and after the end.
    ids.queue.push('t-05', 't-15', 't-25', 't-45', 't-70');
    for (let i = 0; i < 5; i++) await app.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: uniqueVin() });
    const second = await get(`${path}&next=${encodeURIComponent(first.body.next)}`);
    assert.deepEqual(
      second.body.data.map((trailer: { id: string }) => trailer.id),
      ['t-25', 't-30'],
    );
    // Inserted right after the last record served, and one the walk has passed.
    ids.queue.push('t-31', 't-26');
    for (let i = 0; i < 2; i++) await app.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: uniqueVin() });
    const rest = await walkPages(get, path, second.body.next);
    assert.deepEqual(
      rest.items.map((trailer) => trailer.id),
      ['t-31', 't-40', 't-45', 't-50', 't-60', 't-70'],
    );
  });

  it('activeOnly leaves out deactivated trailers and devices; bad activeOnly is 400', async () => {
    const trailers = (await get(`/api/v1/trailers/${fleetId}?take=500`)).body.data as { id: string }[];
    const off = trailers[3]!.id;
    await app.trailwire.admin.setTrailerActive(off, false);
    const all = (await get(`/api/v1/trailers/${fleetId}?take=500&activeOnly=false`)).body.data as { id: string; active: boolean }[];
    assert.equal(all.length, 23);
    assert.equal(all.find((trailer) => trailer.id === off)?.active, false);
    const active = (await get(`/api/v1/trailers/${fleetId}?take=500&activeOnly=true`)).body.data as { id: string }[];
    assert.deepEqual(
      active.map((trailer) => trailer.id),
      all.filter((trailer) => trailer.id !== off).map((trailer) => trailer.id),
    );
    assert.equal((await get(`/api/v1/trailers/${off}`)).body.active, false);
    // Paging an activeOnly list steps over the inactive record.
    const walked = await walkPages(get, `/api/v1/trailers/${fleetId}?take=2&activeOnly=true`);
    assert.deepEqual(walked.items, active);

    const devices = (await get(`/api/v1/devices/${trailerId}?take=500`)).body.data as { id: string }[];
    const device = devices[5]!.id;
    await app.trailwire.admin.setDeviceActive(device, false);
    const activeDevices = (await get(`/api/v1/devices/${trailerId}?take=500&activeOnly=true`)).body.data as { id: string }[];
    assert.equal(activeDevices.length, 22);
    assert.ok(!activeDevices.some((d) => d.id === device));
    assert.equal((await get(`/api/v1/devices/details/${device}`)).body.active, false);
    assert.equal((await get(`/api/v1/devices/${trailerId}?take=500`)).body.data.length, 23);

    await app.trailwire.admin.setTrailerActive(off, true);
    await app.trailwire.admin.setDeviceActive(device, true);
    assert.equal((await get(`/api/v1/trailers/${fleetId}?take=500&activeOnly=true`)).body.data.length, 23);
    assert.equal((await get(`/api/v1/devices/${trailerId}?take=500&activeOnly=true`)).body.data.length, 23);

    for (const bad of ['1', 'yes', 'TRUE', '']) {
      assertProblem(await get(`/api/v1/trailers/${fleetId}?activeOnly=${bad}`), 400, '/activeOnly');
      assertProblem(await get(`/api/v1/devices/${trailerId}?activeOnly=${bad}`), 400, '/activeOnly');
    }
  });

  it('switching off a faulted device clears its trailer\'s fault at once', async () => {
    const [trailer] = await registerTrailers(app.trailwire, fleetId, 1);
    await applyTelemetry(app.trailwire, trailer!.vin, {
      devices: [tpmsReading('BAD', app.clock.now() - MINUTE, { isWarning: false, isFault: true })],
    });
    assert.equal((await get(`/api/v1/trailers/${trailer!.id}`)).body.status.name, 'Faulted');
    const [device] = (await get(`/api/v1/devices/${trailer!.id}`)).body.data;
    await app.trailwire.admin.setDeviceActive(device.id, false);
    const after = (await get(`/api/v1/trailers/${trailer!.id}`)).body;
    assert.deepEqual(after.status, { name: 'OK', isWarning: false, isFault: false });
    assert.equal(after.faultedDevices, 0);
  });

  it('a device that stopped reporting is inactive for activeOnly (and in its own record)', async (t) => {
    const start = app.clock.now();
    t.after(() => app.clock.set(start));
    const [trailer] = await registerTrailers(app.trailwire, fleetId, 1);
    await applyTelemetry(app.trailwire, trailer!.vin, { devices: [tpmsReading('QUIET', start - MINUTE), tpmsReading('CHATTY', start - MINUTE)] });
    app.clock.advance(8 * DAY);
    await applyTelemetry(app.trailwire, trailer!.vin, { devices: [tpmsReading('CHATTY', app.clock.now() - MINUTE)] });
    const token = await mintToken(app.trailwire, 'customers', customer.id);
    const call = (path: string) => app.call('GET', path, { token });
    const all = (await call(`/api/v1/devices/${trailer!.id}`)).body.data as { id: string; serial: string; active: boolean }[];
    assert.deepEqual(
      all.map((d) => [d.serial, d.active]).sort(),
      [
        ['CHATTY', true],
        ['QUIET', false],
      ],
    );
    const active = (await call(`/api/v1/devices/${trailer!.id}?activeOnly=true`)).body.data as { serial: string }[];
    assert.deepEqual(
      active.map((d) => d.serial),
      ['CHATTY'],
    );
    const quiet = all.find((d) => d.serial === 'QUIET')!;
    assert.equal((await call(`/api/v1/devices/details/${quiet.id}`)).body.active, false);
  });
});

// --- time paging ------------------------------------------------------------------------------------

interface TimeSeries {
  name: string;
  path: string;
  /** Writes one record at each timestamp. */
  write(timestamps: number[]): Promise<void>;
}

/** One trailer with a GPS series, a device series and a cargosafe series, initially empty. */
async function timeSeries(trailwire: Trailwire, fleetId: number, customerId: string): Promise<TimeSeries[]> {
  const [trailer] = await registerTrailers(trailwire, fleetId, 1);
  const vin = trailer!.vin;
  // One reading far in the past creates the device and the unit.
  const origin = Date.UTC(2020, 0, 1);
  await applyTelemetry(trailwire, vin, { devices: [tpmsReading('SERIES', origin)], cargosafe: [cargosafeReading('SERIES', origin)] });
  const [device] = await trailwire.store.listDevices(customerId, trailer!.id, { limit: 1, activeOnly: false, staleBefore: 0 });
  const unit = (await trailwire.store.listCargosafe(customerId, { limit: 500 })).find((u) => u.trailerId === trailer!.id);
  assert.ok(device && unit);
  return [
    {
      name: 'gps',
      path: `/api/v1/trailers/telemetry/gps/${trailer!.id}`,
      write: async (timestamps) => void (await applyTelemetry(trailwire, vin, { gps: timestamps.map((at) => gpsFix(at)) })),
    },
    {
      name: 'device telemetry',
      path: `/api/v1/devices/telemetry/${device.id}`,
      write: async (timestamps) =>
        void (await applyTelemetry(trailwire, vin, { devices: timestamps.map((at) => tpmsReading('SERIES', at)) })),
    },
    {
      name: 'cargosafe telemetry',
      path: `/api/v1/cargosafe/telemetry/${unit.id}`,
      write: async (timestamps) =>
        void (await applyTelemetry(trailwire, vin, { cargosafe: timestamps.map((at) => cargosafeReading('SERIES', at)) })),
    },
  ];
}

const timestampsOf = (items: { timestamp: string }[]) => items.map((item) => item.timestamp);

describe('read API: the telemetry endpoints page a time range', () => {
  let app: TestApp;
  let customer: { id: string; apiKey: string; token: string };
  let fleetId: number;
  const get = (path: string) => app.call('GET', path, { token: customer.token });

  before(async () => {
    app = await startTestApp();
    customer = await customerWithToken(app, 'Timekeeper');
    fleetId = (await app.trailwire.admin.createFleet({ customerId: customer.id, name: 'Timed' })).id;
  });
  after(() => app.close());

  it('default range is the last 24 hours: from inclusive, to (now) exclusive, ascending', async () => {
    const now = app.clock.now();
    for (const series of await timeSeries(app.trailwire, fleetId, customer.id)) {
      // Written out of order, to see the answer sorted.
      await series.write([now, now - DAY - 1, now - 1, now - DAY, now - HOUR, now + HOUR]);
      const page = await get(series.path);
      assert.equal(page.status, 200, series.name);
      assert.deepEqual(timestampsOf(page.body.data), [iso(now - DAY), iso(now - HOUR), iso(now - 1)], series.name);
      assert.equal(page.body.next, undefined);
    }
  });

  it('explicit from and to: from inclusive, to exclusive; from = to is empty', async () => {
    const base = Date.UTC(2026, 4, 1, 0, 0, 0);
    for (const series of await timeSeries(app.trailwire, fleetId, customer.id)) {
      await series.write([0, 1, 2, 3, 4].map((i) => base + i * MINUTE));
      const page = await get(`${series.path}?from=${iso(base + MINUTE)}&to=${iso(base + 3 * MINUTE)}`);
      assert.deepEqual(timestampsOf(page.body.data), [iso(base + MINUTE), iso(base + 2 * MINUTE)], series.name);
      // Offsets other than Z name the same instants.
      const offset = await get(`${series.path}?from=2026-05-01T02:01:00%2B02:00&to=2026-04-30T19:03:00-05:00`);
      assert.deepEqual(offset.body.data, page.body.data, series.name);
      assert.deepEqual((await get(`${series.path}?from=${iso(base)}&to=${iso(base)}`)).body.data, []);
    }
  });

  it('walking a range with take=7 yields every record once, ascending, next absent at the end', async () => {
    const now = app.clock.now();
    const written = Array.from({ length: 30 }, (_, i) => now - (30 - i) * MINUTE);
    for (const series of await timeSeries(app.trailwire, fleetId, customer.id)) {
      await series.write(written);
      const { pages, items } = await walkPages(get, `${series.path}?take=7`);
      assert.deepEqual(
        pages.map((page) => page.length),
        [7, 7, 7, 7, 2],
        series.name,
      );
      assert.deepEqual(timestampsOf(items), written.map(iso), series.name);
    }
  });

  it('answers 400 for from after to, malformed times, and foreign or tampered tokens', async () => {
    const [gps, device] = await timeSeries(app.trailwire, fleetId, customer.id);
    await gps!.write([app.clock.now() - 2 * MINUTE, app.clock.now() - MINUTE]);
    for (const series of [gps!, device!]) {
      assertProblem(await get(`${series.path}?from=2026-05-02T00:00:00Z&to=2026-05-01T00:00:00Z`), 400, '/from');
      for (const bad of ['yesterday', '2026-05-01', '2026-02-30T00:00:00Z', '2026-05-01T25:00:00Z', '2026-05-01T00:00:00', '1714521600'])
        assertProblem(await get(`${series.path}?from=${encodeURIComponent(bad)}`), 400, '/from');
      assertProblem(await get(`${series.path}?to=not-a-time`), 400, '/to');
    }
    const next = (await get(`${gps!.path}?take=1`)).body.next as string;
    assert.ok(next);
    assertProblem(await get(`${device!.path}?next=${encodeURIComponent(next)}`), 400, '/next');
    assertProblem(await get(`/api/v1/fleets?next=${encodeURIComponent(next)}`), 400, '/next');
    const tampered = next.slice(0, 3) + (next[3] === 'A' ? 'B' : 'A') + next.slice(4);
    assertProblem(await get(`${gps!.path}?next=${encodeURIComponent(tampered)}`), 400, '/next');
    // A next beside bounds of another range is a confused client, not a silent other page.
    assertProblem(await get(`${gps!.path}?next=${encodeURIComponent(next)}&from=2026-01-01T00:00:00Z`), 400, '/from');
  });

  it('next carries the range and take: `?next=` alone continues; a contradicting from, to or take is 400', async () => {
    const now = app.clock.now();
    const written = Array.from({ length: 9 }, (_, i) => now - (20 - i) * MINUTE);
    for (const series of await timeSeries(app.trailwire, fleetId, customer.id)) {
      await series.write(written);
      const range = `from=${iso(now - 20 * MINUTE)}&to=${iso(now - 11 * MINUTE)}`;
      const first = await get(`${series.path}?${range}&take=4`);
      const rest = await walkPages(get, series.path, first.body.next);
      assert.deepEqual(
        rest.pages.map((page) => page.length),
        [4, 1],
        series.name,
      );
      assert.deepEqual(timestampsOf([...first.body.data, ...rest.items]), written.map(iso), series.name);
      const next = `next=${encodeURIComponent(first.body.next)}`;
      assert.equal((await get(`${series.path}?${range}&take=4&${next}`)).status, 200, 'agreeing parameters are fine');
      assertProblem(await get(`${series.path}?take=5&${next}`), 400, '/take');
      assertProblem(await get(`${series.path}?to=${iso(now)}&${next}`), 400, '/to');
    }
  });

  it('next keeps the range of the first page even after the clock moves', async (t) => {
    const start = app.clock.now();
    t.after(() => app.clock.set(start));
    for (const series of await timeSeries(app.trailwire, fleetId, customer.id)) {
      app.clock.set(start);
      const before = [5, 4, 3, 2, 1].map((m) => start - m * MINUTE);
      await series.write(before);
      const first = await get(`${series.path}?take=2`);
      assert.deepEqual(timestampsOf(first.body.data), before.slice(0, 2).map(iso));

      app.clock.advance(2 * HOUR);
      // Newer than the first page's `to`: in today's default range, not in the range being paged.
      await series.write([start + 30 * MINUTE]);
      const token = await mintToken(app.trailwire, 'customers', customer.id);
      const call = (path: string) => app.call('GET', path, { token });
      const rest = await walkPages(call, `${series.path}?take=2`, first.body.next);
      assert.deepEqual(timestampsOf(rest.items), before.slice(2).map(iso), series.name);
      // A fresh first page does see it.
      const fresh = await call(`${series.path}?take=500`);
      assert.equal(fresh.body.data.at(-1).timestamp, iso(start + 30 * MINUTE));
    }
  });

  it('records inserted between page fetches: later ones appear once, earlier ones do not', async () => {
    const now = app.clock.now();
    for (const series of await timeSeries(app.trailwire, fleetId, customer.id)) {
      await series.write([10, 20, 30, 40].map((m) => now - 60 * MINUTE + m * MINUTE));
      const first = await get(`${series.path}?take=2`);
      assert.deepEqual(timestampsOf(first.body.data), [iso(now - 50 * MINUTE), iso(now - 40 * MINUTE)]);
      await series.write([now - 55 * MINUTE, now - 35 * MINUTE, now - 5 * MINUTE]);
      const rest = await walkPages(get, `${series.path}?take=2`, first.body.next);
      assert.deepEqual(
        timestampsOf(rest.items),
        [35, 30, 20, 5].map((m) => iso(now - m * MINUTE)),
        series.name,
      );
    }
  });
});

// --- the read limit ---------------------------------------------------------------------------------

describe('read API: per-customer read limit', () => {
  it('answers 429 with RateLimit headers and Retry-After past the limit, per customer, until the window ends', async () => {
    const app = await startTestApp({ core: { limits: { read: { requests: 3, windowSeconds: 60 } } } });
    try {
      const noisy = await customerWithToken(app, 'Noisy');
      const quiet = await customerWithToken(app, 'Quiet');
      app.clock.set(Date.UTC(2026, 5, 1, 12, 0, 20));
      for (let i = 1; i <= 3; i++) {
        const response = await app.call('GET', '/api/v1/fleets', { token: noisy.token });
        assert.equal(response.status, 200);
        assert.equal(response.headers.get('ratelimit-limit'), '3');
        assert.equal(response.headers.get('ratelimit-remaining'), String(3 - i));
        assert.equal(response.headers.get('ratelimit-reset'), '40');
      }
      const limited = await app.call('GET', '/api/v1/cargosafe', { token: noisy.token });
      assertProblem(limited, 429);
      assert.equal(limited.body.type, 'https://trailwire.dev/problems/rate-limited');
      assert.equal(limited.headers.get('ratelimit-limit'), '3');
      assert.equal(limited.headers.get('ratelimit-remaining'), '0');
      assert.equal(limited.headers.get('ratelimit-reset'), '40');
      assert.equal(limited.headers.get('retry-after'), '40');
      assert.equal(limited.body.data, undefined);

      assert.equal((await app.call('GET', '/api/v1/fleets', { token: quiet.token })).status, 200, 'another customer is not limited');
      app.clock.set(Date.UTC(2026, 5, 1, 12, 1, 0));
      assert.equal((await app.call('GET', '/api/v1/fleets', { token: noisy.token })).status, 200, 'a new window');
    } finally {
      await app.close();
    }
  });
});
