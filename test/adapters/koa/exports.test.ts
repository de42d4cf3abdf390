/**
 * Telemetry exports over HTTP (contract 5, issue 40): the three telemetry lists and the fleet-wide GPS
 * list answer `Accept: text/csv` and `application/x-ndjson` with their whole range streamed — the
 * same records as walking the JSON pages, past the page and store-read sizes — with a header row,
 * RFC 4180 quoting and no formula cells in CSV; the JSON form as before; the same 404s as the JSON
 * reads for anything the customer does not own; 400s for a range too long or paging parameters; and
 * one read counted per export; a store failing mid-stream cuts the transfer off. The fleet-wide
 * list and the exports also run on PostgreSQL (with `TRAILWIRE_TEST_DATABASE_URL`).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Writable } from 'node:stream';
import pg from 'pg';
import { pino } from 'pino';
import { openPostgresStore } from '../../../adapters/postgres/index.ts';
import { storeUnavailable } from '../../../core/errors.ts';
import { EXPORT_MAX_RANGE_MS, EXPORT_PAGE_ROWS } from '../../../core/telemetry-export.ts';
import { createTrailwire } from '../../../core/trailwire.ts';
import {
  applyTelemetry,
  assertProblem,
  gpsFix,
  mintToken,
  seedFleet,
  serveTrailwire,
  uniqueVin,
  walkPages,
  type SeededFleet,
} from '../../support/fixtures.ts';
import { customerWithToken, startTestApp, type TestApp } from '../../support/test-app.ts';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const iso = (ms: number) => new Date(ms).toISOString();
const CSV = { accept: 'text/csv' };
const NDJSON = { accept: 'application/x-ndjson' };

/** The lines of a CSV body (CRLF-ended), without the empty string after the last. */
const csvLines = (body: string) => {
  assert.ok(body.endsWith('\r\n'), 'every CSV row ends with CRLF');
  return body.slice(0, -2).split('\r\n');
};
const ndjsonRecords = (body: string) => body.split('\n').filter(Boolean).map((line) => JSON.parse(line));

describe('telemetry exports (CSV and NDJSON)', () => {
  let app: TestApp;
  let acme: Awaited<ReturnType<typeof customerWithToken>>;
  let globex: Awaited<ReturnType<typeof customerWithToken>>;
  let seeded: SeededFleet;
  let globexFleet: SeededFleet;
  /** A trailer of Acme's fleet with more fixes than a JSON page (500) and a store read (1000) hold. */
  let busyTrailerId: string;
  const busyFixes = EXPORT_PAGE_ROWS + 234;
  let now: number;

  /** What the app logged at error level (an export failing mid-stream is logged there). */
  const logged: Record<string, unknown>[] = [];

  before(async () => {
    const sink = new Writable({ write: (line, _encoding, done) => (logged.push(JSON.parse(String(line))), done()) });
    app = await startTestApp({ app: { logger: pino({ level: 'error' }, sink) } });
    now = app.clock.now();
    acme = await customerWithToken(app, 'Acme');
    globex = await customerWithToken(app, 'Globex');
    seeded = await seedFleet(app.trailwire, acme.id, { trailers: 2 });
    globexFleet = await seedFleet(app.trailwire, globex.id, { trailers: 1 });
    const busy = await app.trailwire.admin.registerTrailer({ fleetId: seeded.fleet.id, vin: uniqueVin(), unitId: '=HYPERLINK("http://x","y")' });
    const start = now - 20 * HOUR;
    await applyTelemetry(app.trailwire, busy.vin, {
      gps: Array.from({ length: busyFixes }, (_, i) => gpsFix(start + i * 30_000, { long: -87.63 - i / 1e4, lat: 41.88 })),
    });
    busyTrailerId = busy.id;
  });
  after(() => app.close());

  const get = (path: string, headers: Record<string, string> = {}, token = acme.token) => app.call('GET', path, { token, headers });

  it('a trailer\'s GPS as CSV: a header row, then every fix of the range, as the JSON pages hold them', async () => {
    const { items } = await walkPages((path) => get(path), `/api/v1/trailers/telemetry/gps/${busyTrailerId}?take=500`);
    assert.equal(items.length, busyFixes);
    const response = await get(`/api/v1/trailers/telemetry/gps/${busyTrailerId}`, CSV);
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('content-type'), 'text/csv; charset=utf-8; header=present');
    assert.match(response.headers.get('vary') ?? '', /Accept/);
    assert.equal(response.headers.get('content-length'), null, 'streamed, not buffered');
    const [header, ...rows] = csvLines(response.body);
    assert.equal(header, 'timestamp,lat,long,speed,heading');
    assert.deepEqual(
      rows,
      items.map((fix) => `${fix.timestamp},${fix.lat},${fix.long},${fix.speed},${fix.heading}`),
    );
    assert.match(rows[1]!, /,-87\.6301,/, 'a negative number is written as a number, not guarded as a formula');
  });

  it('NDJSON holds one JSON record a line, the same records as the JSON pages', async () => {
    const { items } = await walkPages((path) => get(path), `/api/v1/trailers/telemetry/gps/${busyTrailerId}?take=500`);
    const response = await get(`/api/v1/trailers/telemetry/gps/${busyTrailerId}`, NDJSON);
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('content-type'), 'application/x-ndjson');
    assert.ok(response.body.endsWith('\n'));
    assert.deepEqual(ndjsonRecords(response.body), items);
  });

  it('from and to bound an export as they bound the pages; an empty range is the header alone', async () => {
    const from = now - 20 * HOUR + 10 * 30_000;
    const to = from + 5 * 30_000;
    const response = await get(`/api/v1/trailers/telemetry/gps/${busyTrailerId}?from=${iso(from)}&to=${iso(to)}`, NDJSON);
    assert.deepEqual(ndjsonRecords(response.body).map((fix) => fix.timestamp), [0, 1, 2, 3, 4].map((i) => iso(from + i * 30_000)));
    const empty = await get(`/api/v1/trailers/telemetry/gps/${busyTrailerId}?from=${iso(now - 100 * HOUR)}&to=${iso(now - 99 * HOUR)}`, CSV);
    assert.equal(empty.body, 'timestamp,lat,long,speed,heading\r\n');
  });

  it('the fleet-wide GPS list pages and exports every trailer\'s fixes, trailer by trailer, each naming its trailer', async () => {
    const path = `/api/v1/fleets/${seeded.fleet.id}/telemetry/gps`;
    const { items } = await walkPages((p) => get(p), `${path}?take=7`);
    const trailerIds = [...seeded.trailers.map((t) => t.trailer.id), busyTrailerId].sort();
    assert.equal(items.length, 3 + 3 + busyFixes);
    assert.deepEqual([...new Set(items.map((row) => row.trailerId))], trailerIds, 'grouped by trailer, in trailer id order');
    for (const id of trailerIds) {
      const times = items.filter((row) => row.trailerId === id).map((row) => row.timestamp);
      assert.deepEqual(times, [...times].sort(), `the fixes of ${id} ascend by time`);
    }
    const ndjson = await get(path, NDJSON);
    assert.deepEqual(ndjsonRecords(ndjson.body), items);
    const csv = csvLines((await get(path, CSV)).body);
    assert.equal(csv[0], 'trailerId,vin,unitId,timestamp,lat,long,speed,heading');
    assert.equal(csv.length, items.length + 1);
  });

  it('a text cell that a spreadsheet would run as a formula is prefixed with an apostrophe and quoted', async () => {
    const csv = csvLines((await get(`/api/v1/fleets/${seeded.fleet.id}/telemetry/gps`, CSV)).body);
    const busyRow = csv.find((line) => line.startsWith(busyTrailerId))!;
    assert.ok(busyRow.includes(`,"'=HYPERLINK(""http://x"",""y"")",`), busyRow);
    const ndjson = ndjsonRecords((await get(`/api/v1/fleets/${seeded.fleet.id}/telemetry/gps`, NDJSON)).body);
    assert.equal(ndjson.find((row) => row.trailerId === busyTrailerId).unitId, '=HYPERLINK("http://x","y")', 'NDJSON keeps the value as it is');
  });

  it('device readings export their metrics as one JSON cell and the status as its fields; cargosafe readings as theirs', async () => {
    const deviceId = seeded.trailers[0]!.deviceIds[0]!;
    const device = csvLines((await get(`/api/v1/devices/telemetry/${deviceId}`, CSV)).body);
    assert.equal(device[0], 'timestamp,metrics,status.name,status.isWarning,status.isFault');
    assert.equal(device.length, 4);
    assert.match(device[1]!, /^[^,]+Z,"\{""pressurePsi"":105,""temperatureC"":30\}",OK,false,false$/);
    const unitId = seeded.trailers[0]!.cargosafeIds[0]!;
    const units = await get(`/api/v1/cargosafe/telemetry/${unitId}`, NDJSON);
    const pages = await walkPages((p) => get(p), `/api/v1/cargosafe/telemetry/${unitId}`);
    assert.deepEqual(ndjsonRecords(units.body), pages.items);
    const csv = csvLines((await get(`/api/v1/cargosafe/telemetry/${unitId}`, CSV)).body);
    assert.equal(csv[0], 'timestamp,doorOpen,loadPercent,temperatureC,humidityPercent');
    assert.match(csv[1]!, /Z,false,60,4,65$/);
  });

  it('what another customer owns is a 404 problem for an export, as for the JSON read', async () => {
    const theirs = globexFleet.trailers[0]!;
    for (const path of [
      `/api/v1/trailers/telemetry/gps/${theirs.trailer.id}`,
      `/api/v1/fleets/${globexFleet.fleet.id}/telemetry/gps`,
      `/api/v1/devices/telemetry/${theirs.deviceIds[0]}`,
      `/api/v1/cargosafe/telemetry/${theirs.cargosafeIds[0]}`,
      '/api/v1/fleets/999999/telemetry/gps',
    ]) {
      assertProblem(await get(path, CSV), 404);
      assertProblem(await get(path, NDJSON), 404);
    }
    // And Globex's own export holds none of Acme's trailers.
    const own = ndjsonRecords((await get(`/api/v1/fleets/${globexFleet.fleet.id}/telemetry/gps`, NDJSON, globex.token)).body);
    assert.deepEqual([...new Set(own.map((row) => row.trailerId))], [globexFleet.trailers[0]!.trailer.id]);
  });

  it('a range longer than the maximum, from after to, or take / next beside an export are 400 problems', async () => {
    const path = `/api/v1/trailers/telemetry/gps/${busyTrailerId}`;
    const to = now;
    assertProblem(await get(`${path}?from=${iso(to - EXPORT_MAX_RANGE_MS - 1)}&to=${iso(to)}`, CSV), 400, '/from');
    assert.equal((await get(`${path}?from=${iso(to - EXPORT_MAX_RANGE_MS)}&to=${iso(to)}`, CSV)).status, 200, 'exactly the maximum is allowed');
    assertProblem(await get(`${path}?from=${iso(to)}&to=${iso(to - 1)}`, NDJSON), 400, '/from');
    assertProblem(await get(`${path}?take=10`, CSV), 400, '/take');
    const first = await get(`${path}?take=1`);
    assertProblem(await get(`${path}?next=${encodeURIComponent(first.body.next)}`, NDJSON), 400, '/next');
    assertProblem(await get(`/api/v1/fleets/${seeded.fleet.id}/telemetry/gps?from=${iso(to - EXPORT_MAX_RANGE_MS - 1)}&to=${iso(to)}`, NDJSON), 400, '/from');
  });

  it('JSON stays the answer without Accept, for any type, for application/json, and for a type it does not serve', async () => {
    for (const accept of [undefined, '*/*', 'application/json', 'text/html', 'application/json, text/csv;q=0.5']) {
      const response = await get(`/api/v1/trailers/telemetry/gps/${busyTrailerId}`, accept === undefined ? {} : { accept });
      assert.equal(response.status, 200);
      assert.match(response.headers.get('content-type') ?? '', /^application\/json/, String(accept));
      assert.equal(response.body.data.length, 50);
    }
    const preferred = await get(`/api/v1/trailers/telemetry/gps/${busyTrailerId}`, { accept: 'application/json;q=0.5, text/csv' });
    assert.match(preferred.headers.get('content-type') ?? '', /^text\/csv/, 'the quality values choose');
  });

  it('a store failing after the first page cuts the transfer off: the client sees an error, never a clean end', async () => {
    const store = app.trailwire.store;
    const listGps = store.listGps;
    let reads = 0;
    store.listGps = async (...args) => {
      if (++reads > 1) throw new Error('disk I/O error');
      return listGps.apply(store, args);
    };
    try {
      const response = await fetch(`${app.url}/api/v1/trailers/telemetry/gps/${busyTrailerId}`, { headers: { authorization: `Bearer ${acme.token}`, ...CSV } });
      assert.equal(response.status, 200, 'the first page was read before the status');
      await assert.rejects(response.text(), 'the body ends without its last chunk');
      const line = logged.find((entry) => /export failed after its first byte/.test(String(entry.msg)));
      assert.ok(line, 'the operator finds it in the log');
      assert.equal(line.route, '/api/v1/trailers/telemetry/gps/:trailer');
      assert.equal(line.requestId, response.headers.get('x-request-id'));
    } finally {
      store.listGps = listGps;
    }
    // The first page failing is still an answer with a status: the store's 503 (contract 6).
    store.listGps = async () => {
      throw storeUnavailable('the store is failing', new Error('disk I/O error'));
    };
    try {
      assertProblem(await get(`/api/v1/trailers/telemetry/gps/${busyTrailerId}`, CSV), 503);
    } finally {
      store.listGps = listGps;
    }
  });

  it('an export counts as one read, however many rows it streams', async () => {
    const path = `/api/v1/trailers/telemetry/gps/${busyTrailerId}`;
    const before = Number((await get(path)).headers.get('ratelimit-remaining'));
    const exported = await get(path, CSV);
    assert.equal(Number(exported.headers.get('ratelimit-remaining')), before - 1);
    assert.equal(Number((await get(path)).headers.get('ratelimit-remaining')), before - 2);
  });
});

const DATABASE_URL = process.env.TRAILWIRE_TEST_DATABASE_URL;

describe('telemetry exports on PostgreSQL', { skip: DATABASE_URL === undefined ? 'TRAILWIRE_TEST_DATABASE_URL is not set' : false }, () => {
  const schema = `tw_test_${randomBytes(6).toString('hex')}`;
  let trailwire: Awaited<ReturnType<typeof createTrailwire>>;
  let served: Awaited<ReturnType<typeof serveTrailwire>>;

  before(async () => {
    const store = await openPostgresStore({ connectionString: DATABASE_URL!, schema, poolSize: 4 });
    trailwire = await createTrailwire({ store, worker: false });
    served = await serveTrailwire(trailwire);
  });
  after(async () => {
    await served.close();
    await trailwire.close();
    const admin = new pg.Pool({ connectionString: DATABASE_URL!, max: 1 });
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  });

  it('pages and exports the fleet-wide GPS list and a trailer\'s fixes, past a store read, as on SQLite', async () => {
    const { principal } = await trailwire.auth.createCustomer({ name: 'Acme' });
    const token = await mintToken(trailwire, 'customers', principal.id);
    const seeded = await seedFleet(trailwire, principal.id, { trailers: 2, gpsFixes: 4 });
    const busy = await trailwire.admin.registerTrailer({ fleetId: seeded.fleet.id, vin: uniqueVin() });
    const now = trailwire.clock.now();
    await applyTelemetry(trailwire, busy.vin, { gps: Array.from({ length: EXPORT_PAGE_ROWS + 5 }, (_, i) => gpsFix(now - HOUR + i * 1000)) });
    const get = (path: string, headers: Record<string, string> = {}) => served.call('GET', path, { token, headers });

    const fleetPath = `/api/v1/fleets/${seeded.fleet.id}/telemetry/gps`;
    const { items } = await walkPages(get, `${fleetPath}?take=500`);
    assert.equal(items.length, 4 + 4 + EXPORT_PAGE_ROWS + 5);
    assert.deepEqual(ndjsonRecords((await get(fleetPath, NDJSON)).body), items);
    const csv = csvLines((await get(`/api/v1/trailers/telemetry/gps/${busy.id}`, CSV)).body);
    assert.equal(csv.length, 1 + EXPORT_PAGE_ROWS + 5);
    const { principal: stranger } = await trailwire.auth.createCustomer({ name: 'Globex' });
    const strangerToken = await mintToken(trailwire, 'customers', stranger.id);
    assertProblem(await served.call('GET', fleetPath, { token: strangerToken, headers: CSV }), 404);
  });
});
