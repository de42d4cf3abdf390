/**
 * The customer read API's logic (contract 5), independent of HTTP: parses the path and query
 * parameters of the eleven read endpoints, checks that the customer owns what is asked for (anything
 * else is `not_found`, existing or not), pages through the store and renders the JSON views.
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
import type { FleetReadStore, Sequenced, TimePageQuery } from './store.ts';
import {
  cargosafeReadingView,
  cargosafeView,
  deviceReadingView,
  deviceView,
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
    const trailer = await this.ownedTrailer(customerId, trailerId);
    return this.timePage(query, `gps:${trailer.id}`, (page) => this.store.listGps(customerId, trailer.id, page), gpsView);
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
    const device = await this.store.getDevice(customerId, deviceId, this.staleBefore());
    if (!device) throw notFound('device', deviceId);
    return this.timePage(
      query,
      `device-telemetry:${device.id}`,
      (page) => this.store.listDeviceReadings(customerId, device.id, page),
      deviceReadingView,
    );
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
    const unit = await this.store.getCargosafe(customerId, unitId);
    if (!unit) throw notFound('cargosafe unit', unitId);
    return this.timePage(
      query,
      `cargosafe-telemetry:${unit.id}`,
      (page) => this.store.listCargosafeReadings(customerId, unit.id, page),
      cargosafeReadingView,
    );
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
  private async timePage<Row, View>(
    query: QueryParams,
    scope: string,
    fetch: (page: TimePageQuery) => Promise<Sequenced<Row>[]>,
    view: (row: Row) => View,
  ): Promise<Page<View>> {
    const position = this.position(query, scope);
    let page: { range: { from: number; to: number }; after?: Sequenced<Row>['key']; take: number };
    if (position === undefined) {
      page = { range: parseTimeRange({ from: single(query, 'from'), to: single(query, 'to') }, this.clock.now()), take: parseTake(single(query, 'take')) };
    } else {
      if (position.kind !== 'time') throw notThisList();
      const { range, after } = position;
      const bound = (name: 'from' | 'to') => agreeWithToken(`/${name}`, optional(query, name, (raw) => parseTimestamp(raw, `/${name}`)), range[name], new Date(range[name]).toISOString());
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
}

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
