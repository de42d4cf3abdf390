/**
 * The customer read API's logic (contract 5), independent of HTTP: parses the path and query
 * parameters of the twelve read endpoints, checks that the customer owns what is asked for (anything
 * else is `not_found`, existing or not), pages through the store and renders the JSON views; the four
 * telemetry lists also export their whole range as CSV or NDJSON (`telemetry-export.ts`).
 */
import type { Clock } from './clock.ts';
import { invalidField, TrailwireError } from './errors.ts';
import {
  agreeWithToken,
  type CursorCodec,
  type CursorPosition,
  type Page,
  parseActiveOnly,
  parseTake,
  parseTimeRange,
  parseTimestamp,
  TAKE_DEFAULT,
  toPage,
} from './paging.ts';
import type { CargosafeReading, DeviceReading, GpsFix, Trailer } from './model.ts';
import type { FleetReadStore, FleetTimeKey, Sequenced, TimeKey, TimePageQuery } from './store.ts';
import { type ExportColumns, type ExportFormat, keysetPages, openExport, parseExportRange } from './telemetry-export.ts';
import {
  cargosafeReadingView,
  cargosafeView,
  deviceReadingView,
  deviceView,
  fleetGpsView,
  fleetView,
  gpsView,
  trailerView,
} from './views.ts';

/** Query parameters as a transport hands them over; repeated parameters arrive as arrays. */
export type QueryParams = Record<string, string | string[] | undefined>;

export interface ReadServiceOptions {
  /** A device that has not reported for this long counts as inactive. Default 7 days. */
  deviceStaleAfterMs?: number;
}

const INT32_MAX = 2_147_483_647;

/** Whether a path segment names a fleet (all digits) rather than a trailer (contract 2). */
export function isFleetIdSegment(segment: string): boolean {
  return /^\d+$/.test(segment);
}

export class ReadService {
  private readonly deviceStaleAfterMs: number;

  constructor(
    private readonly store: FleetReadStore,
    private readonly cursors: CursorCodec,
    private readonly clock: Clock,
    options: ReadServiceOptions = {},
  ) {
    this.deviceStaleAfterMs = options.deviceStaleAfterMs ?? 7 * 24 * 60 * 60 * 1000;
    if (!(this.deviceStaleAfterMs > 0)) throw new TypeError('ReadService: `deviceStaleAfterMs` must be positive');
  }

  async listFleets(customerId: string, query: QueryParams): Promise<Page<ReturnType<typeof fleetView>>> {
    // The customer is part of the list's name: another customer's token would silently skip records here.
    const scope = `fleets:${customerId}`;
    const { afterId, take } = this.idPage(query, scope, 'number', false);
    const rows = await this.store.listFleets(customerId, { afterId, limit: take + 1 });
    return toPage(rows, take, fleetView, (last) => this.cursors.encode(scope, { kind: 'id', afterId: last.id, take }));
  }

  async getFleet(customerId: string, fleetSegment: string) {
    return fleetView(await this.ownedFleet(customerId, fleetSegment));
  }

  async listTrailers(customerId: string, fleetSegment: string, query: QueryParams) {
    const fleet = await this.ownedFleet(customerId, fleetSegment);
    const scope = `trailers:${fleet.id}`;
    const { afterId, take, activeOnly } = this.idPage(query, scope, 'string', true);
    const rows = await this.store.listTrailers(customerId, fleet.id, {
      afterId,
      limit: take + 1,
      activeOnly,
      staleBefore: this.staleBefore(),
    });
    return toPage(rows, take, trailerView, (last) => this.cursors.encode(scope, { kind: 'id', afterId: last.id, take, activeOnly }));
  }

  async getTrailer(customerId: string, trailerId: string) {
    return trailerView(await this.ownedTrailer(customerId, trailerId));
  }

  async listGps(customerId: string, trailerId: string, query: QueryParams) {
    return this.timePage(query, await this.gpsList(customerId, trailerId));
  }

  /** The trailer's fixes in the whole `from`–`to` range as CSV or NDJSON text (issue 40). */
  async exportGps(customerId: string, trailerId: string, query: QueryParams, format: ExportFormat) {
    return this.export(query, format, await this.gpsList(customerId, trailerId));
  }

  /**
   * The fixes of every trailer of the fleet, trailer by trailer (by id), each trailer's ascending by
   * time; a row names its trailer (`fleetGpsView`).
   */
  async listFleetGps(customerId: string, fleetSegment: string, query: QueryParams) {
    return this.timePage(query, await this.fleetGpsList(customerId, fleetSegment));
  }

  async exportFleetGps(customerId: string, fleetSegment: string, query: QueryParams, format: ExportFormat) {
    return this.export(query, format, await this.fleetGpsList(customerId, fleetSegment));
  }

  async listDevices(customerId: string, trailerId: string, query: QueryParams) {
    const trailer = await this.ownedTrailer(customerId, trailerId);
    const scope = `devices:${trailer.id}`;
    const { afterId, take, activeOnly } = this.idPage(query, scope, 'string', true);
    const rows = await this.store.listDevices(customerId, trailer.id, {
      afterId,
      limit: take + 1,
      activeOnly,
      staleBefore: this.staleBefore(),
    });
    return toPage(rows, take, deviceView, (last) => this.cursors.encode(scope, { kind: 'id', afterId: last.id, take, activeOnly }));
  }

  async getDevice(customerId: string, deviceId: string) {
    const device = await this.store.getDevice(customerId, deviceId, this.staleBefore());
    if (!device) throw notFound('device', deviceId);
    return deviceView(device);
  }

  async listDeviceTelemetry(customerId: string, deviceId: string, query: QueryParams) {
    return this.timePage(query, await this.deviceReadingList(customerId, deviceId));
  }

  async exportDeviceTelemetry(customerId: string, deviceId: string, query: QueryParams, format: ExportFormat) {
    return this.export(query, format, await this.deviceReadingList(customerId, deviceId));
  }

  async listCargosafe(customerId: string, query: QueryParams) {
    const scope = `cargosafe:${customerId}`;
    const { afterId, take } = this.idPage(query, scope, 'string', false);
    const rows = await this.store.listCargosafe(customerId, { afterId, limit: take + 1 });
    return toPage(rows, take, cargosafeView, (last) => this.cursors.encode(scope, { kind: 'id', afterId: last.id, take }));
  }

  async getCargosafe(customerId: string, unitId: string) {
    const unit = await this.store.getCargosafe(customerId, unitId);
    if (!unit) throw notFound('cargosafe unit', unitId);
    return cargosafeView(unit);
  }

  async listCargosafeTelemetry(customerId: string, unitId: string, query: QueryParams) {
    return this.timePage(query, await this.cargosafeReadingList(customerId, unitId));
  }

  async exportCargosafeTelemetry(customerId: string, unitId: string, query: QueryParams, format: ExportFormat) {
    return this.export(query, format, await this.cargosafeReadingList(customerId, unitId));
  }

  // The telemetry lists, each after its owner check: what the JSON pages and the exports both read.

  private async gpsList(customerId: string, trailerId: string): Promise<TelemetryList<TimeKey, GpsFix, ReturnType<typeof gpsView>>> {
    const trailer = await this.ownedTrailer(customerId, trailerId);
    return { scope: `gps:${trailer.id}`, fetch: (page) => this.store.listGps(customerId, trailer.id, page), view: gpsView, columns: GPS_COLUMNS };
  }

  private async fleetGpsList(customerId: string, fleetSegment: string): Promise<TelemetryList<FleetTimeKey, FleetGpsRow, ReturnType<typeof fleetGpsView>>> {
    const fleet = await this.ownedFleet(customerId, fleetSegment);
    return { scope: `fleet-gps:${fleet.id}`, fetch: (page) => this.fleetGpsPage(customerId, fleet.id, page), view: fleetGpsView, columns: FLEET_GPS_COLUMNS };
  }

  private async deviceReadingList(customerId: string, deviceId: string): Promise<TelemetryList<TimeKey, DeviceReading, ReturnType<typeof deviceReadingView>>> {
    const device = await this.store.getDevice(customerId, deviceId, this.staleBefore());
    if (!device) throw notFound('device', deviceId);
    return {
      scope: `device-telemetry:${device.id}`,
      fetch: (page) => this.store.listDeviceReadings(customerId, device.id, page),
      view: deviceReadingView,
      columns: DEVICE_READING_COLUMNS,
    };
  }

  private async cargosafeReadingList(
    customerId: string,
    unitId: string,
  ): Promise<TelemetryList<TimeKey, CargosafeReading, ReturnType<typeof cargosafeReadingView>>> {
    const unit = await this.store.getCargosafe(customerId, unitId);
    if (!unit) throw notFound('cargosafe unit', unitId);
    return {
      scope: `cargosafe-telemetry:${unit.id}`,
      fetch: (page) => this.store.listCargosafeReadings(customerId, unit.id, page),
      view: cargosafeReadingView,
      columns: CARGOSAFE_READING_COLUMNS,
    };
  }

  /**
   * A page of the fleet-wide GPS list: the rest of the trailer the position names (while it is still
   * in this fleet), then the next trailers with fixes in the range, each read by its own index range.
   */
  private async fleetGpsPage(customerId: string, fleetId: number, page: TimePage<FleetTimeKey>): Promise<Sequenced<FleetGpsRow, FleetTimeKey>[]> {
    const { from, to, limit } = page;
    const rows: Sequenced<FleetGpsRow, FleetTimeKey>[] = [];
    let trailer = page.after === undefined ? null : await this.store.getTrailer(customerId, page.after.trailerId);
    if (trailer?.fleetId !== fleetId) trailer = null;
    let after: TimeKey | undefined = trailer === null ? undefined : page.after;
    let lastTrailerId = page.after?.trailerId ?? '';
    while (rows.length < limit) {
      trailer ??= await this.store.nextFleetTrailerWithGps(customerId, fleetId, lastTrailerId, { from, to });
      if (trailer === null) break;
      const wanted = limit - rows.length;
      const fixes = await this.store.listGps(customerId, trailer.id, { from, to, after, limit: wanted });
      for (const { key, record } of fixes) rows.push({ key: { trailerId: trailer.id, ...key }, record: { trailer, fix: record } });
      if (fixes.length === wanted) break;
      lastTrailerId = trailer.id;
      trailer = null;
      after = undefined;
    }
    return rows;
  }

  private async ownedFleet(customerId: string, fleetSegment: string) {
    if (!isFleetIdSegment(fleetSegment)) throw invalidField('/fleet', 'must be a positive integer fleet id');
    const fleetId = Number(fleetSegment);
    const fleet = fleetId >= 1 && fleetId <= INT32_MAX ? await this.store.getFleet(customerId, fleetId) : null;
    if (!fleet) throw notFound('fleet', fleetSegment);
    return fleet;
  }

  private async ownedTrailer(customerId: string, trailerId: string) {
    const trailer = await this.store.getTrailer(customerId, trailerId);
    if (!trailer) throw notFound('trailer', trailerId);
    return trailer;
  }

  private staleBefore(): number {
    return this.clock.now() - this.deviceStaleAfterMs;
  }

  /**
   * The shape of a page of an id-ordered list: from the `next` token when one is given (the token
   * must come from this list and hold an id of `type`; `take` and, on a `filtered` list, `activeOnly`
   * beside it must agree with it), else from the query parameters and their defaults.
   */
  private idPage<T extends 'number' | 'string'>(query: QueryParams, scope: string, type: T, filtered: boolean) {
    return idPageOf(this.cursors, query, scope, type, filtered);
  }

  private position(query: QueryParams, scope: string): CursorPosition | undefined {
    const next = single(query, 'next');
    return next === undefined ? undefined : this.cursors.decode(scope, next);
  }

  /**
   * A page of a time range. The first page fixes the range (defaults resolved against now) and the
   * page size; `next` carries both, so following pages read the same range even as time moves on,
   * and `from`, `to` or `take` beside it must agree with it.
   */
  private async timePage<Key extends TimeKey, Row, View>(query: QueryParams, list: TelemetryList<Key, Row, View>): Promise<Page<View>> {
    const { scope, fetch, view } = list;
    const position = this.position(query, scope);
    let page: { range: { from: number; to: number }; after?: Key; take: number };
    if (position === undefined) {
      page = { range: parseTimeRange({ from: single(query, 'from'), to: single(query, 'to') }, this.clock.now()), take: parseTake(single(query, 'take')) };
    } else {
      if (position.kind !== 'time') throw notThisList();
      const { range } = position;
      const bound = (name: 'from' | 'to') => agreeWithToken(`/${name}`, optional(query, name, (raw) => parseTimestamp(raw, `/${name}`)), range[name], new Date(range[name]).toISOString());
      // The token is bound to this list's scope (paging.ts), so its position is one of this list's keys.
      const after = position.after as Key;
      page = { range: { from: bound('from'), to: bound('to') }, after, take: agreeWithToken('/take', optional(query, 'take', parseTake), position.take) };
    }
    const { range, after, take } = page;
    const rows = await fetch({ from: range.from, to: range.to, after, limit: take + 1 });
    return toPage(
      rows,
      take,
      (row) => view(row.record),
      (last) => this.cursors.encode(scope, { kind: 'time', after: last.key, range, take }),
    );
  }

  /**
   * The whole range of a list as CSV or NDJSON: the range from `from`/`to` (at most
   * `EXPORT_MAX_RANGE_MS`), the rows in keyset pages of `EXPORT_PAGE_ROWS`.
   */
  private async export<Key extends TimeKey, Row, View>(query: QueryParams, format: ExportFormat, list: TelemetryList<Key, Row, View>): Promise<AsyncIterable<string>> {
    const { from, to } = parseExportRange(
      { from: single(query, 'from'), to: single(query, 'to'), take: single(query, 'take'), next: single(query, 'next') },
      this.clock.now(),
    );
    const pages = keysetPages<Key, Sequenced<Row, Key>>((after, limit) => list.fetch({ from, to, after, limit }));
    return openExport(format, pages, (row) => list.view(row.record), list.columns);
  }
}

/** A time page of a list whose keys are `Key`. */
type TimePage<Key extends TimeKey> = Omit<TimePageQuery, 'after'> & { after?: Key };

/** One telemetry list: the name its `next` tokens are bound to, how a page is read, its JSON view and its CSV columns. */
interface TelemetryList<Key extends TimeKey, Row, View> {
  scope: string;
  fetch: (page: TimePage<Key>) => Promise<Sequenced<Row, Key>[]>;
  view: (row: Row) => View;
  columns: ExportColumns<View>;
}

/** A row of the fleet-wide GPS list: the fix and the trailer it belongs to. */
interface FleetGpsRow {
  trailer: Trailer;
  fix: GpsFix;
}

// CSV columns: the JSON record's fields in its order; a nested object's fields as `object.field`,
// and a device's metrics (their names differ by kind) as one JSON cell.
type GpsView = ReturnType<typeof gpsView>;
const gpsCells = (v: GpsView) => [v.timestamp, v.lat, v.long, v.speed, v.heading];
const GPS_COLUMNS: ExportColumns<GpsView> = { names: ['timestamp', 'lat', 'long', 'speed', 'heading'], cells: gpsCells };
const FLEET_GPS_COLUMNS: ExportColumns<ReturnType<typeof fleetGpsView>> = {
  names: ['trailerId', 'vin', 'unitId', ...GPS_COLUMNS.names],
  cells: (v) => [v.trailerId, v.vin, v.unitId, ...gpsCells(v)],
};
const DEVICE_READING_COLUMNS: ExportColumns<ReturnType<typeof deviceReadingView>> = {
  names: ['timestamp', 'metrics', 'status.name', 'status.isWarning', 'status.isFault'],
  cells: (v) => [v.timestamp, JSON.stringify(v.metrics), v.status.name, v.status.isWarning, v.status.isFault],
};
const CARGOSAFE_READING_COLUMNS: ExportColumns<ReturnType<typeof cargosafeReadingView>> = {
  names: ['timestamp', 'doorOpen', 'loadPercent', 'temperatureC', 'humidityPercent'],
  cells: (v) => [v.timestamp, v.doorOpen, v.loadPercent, v.temperatureC, v.humidityPercent],
};

/**
 * The page an id-ordered list is asked for: from `next` (the token of the list named `scope`, whose
 * page size and filter `take` and `activeOnly` beside it must agree with) or from the query
 * parameters and their defaults. `filtered`: the list takes `activeOnly`.
 */
export function idPageOf<T extends 'number' | 'string'>(
  cursors: CursorCodec,
  query: QueryParams,
  scope: string,
  type: T,
  filtered: boolean,
): { afterId: (T extends 'number' ? number : string) | undefined; take: number; activeOnly: boolean } {
  const take = optional(query, 'take', parseTake);
  const activeOnly = filtered ? optional(query, 'activeOnly', parseActiveOnly) : undefined;
  const next = single(query, 'next');
  if (next === undefined) return { afterId: undefined, take: take ?? TAKE_DEFAULT, activeOnly: activeOnly ?? false };
  const position = cursors.decode(scope, next);
  if (position.kind !== 'id' || typeof position.afterId !== type || filtered !== (position.activeOnly !== undefined)) throw notThisList();
  return {
    afterId: position.afterId as T extends 'number' ? number : string,
    take: agreeWithToken('/take', take, position.take),
    activeOnly: filtered ? agreeWithToken('/activeOnly', activeOnly, position.activeOnly!) : false,
  };
}

/** The single value of a query parameter; a repeated parameter is a 400. */
export function single(query: QueryParams, name: string): string | undefined {
  const value = query[name];
  if (Array.isArray(value)) throw invalidField(`/${name}`, 'must be given at most once');
  return value;
}

/** A query parameter parsed when given, undefined when absent. */
function optional<T>(query: QueryParams, name: string, parse: (raw: string) => T): T | undefined {
  const raw = single(query, name);
  return raw === undefined ? undefined : parse(raw);
}

function notThisList(): TrailwireError {
  return invalidField('/next', 'is not a paging token of this list');
}

function notFound(kind: string, id: string): TrailwireError {
  return new TrailwireError('not_found', `No ${kind} ${JSON.stringify(id.slice(0, 100))} is visible to this customer.`);
}
