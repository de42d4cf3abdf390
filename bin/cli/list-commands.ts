/**
 * The operator's list commands (contract 9): `customers list`, `partners list`, `fleets list
 * [--customer C]`, `trailers list [--fleet F | --unassigned]`, `devices list --trailer T`, and
 * `trailers history <trailer>`, the GPS fixes of one trailer. Each prints an aligned table, or with
 * `--json` one document `{"data": [...]}`. `trailers list --unassigned` is how an operator finds the
 * VINs intake met before anyone registered them; `trailers create --fleet F --vin V` then assigns one.
 * They read the store alone (`OperatorReadStore`), so they run beside `serve` on the same store.
 */
import type { Argv, CommandModule } from 'yargs';
import { invalidField, TrailwireError } from '../../core/errors.ts';
import type { Device, GpsFix } from '../../core/model.ts';
import type { IdPageQuery, OperatorTrailer, TrailerScope, TrailwireStore } from '../../core/store.ts';
import { type StoreArguments, withStore } from './open-core.ts';
import { printFailure, printResult } from './output.ts';
import { type Column, formatTable, isoTime, shortTime } from './table.ts';

type Common = StoreArguments & { json: boolean };

/** Rows per store read: the lists follow keyset pages of this size to their end. */
const PAGE_SIZE = 500;

/** Prints `rows` as `{"data": rows}` or as a table (`columns`), reporting a failure as every command does. */
async function runList<A extends Common, T>(
  args: A,
  read: (store: TrailwireStore) => Promise<T[]>,
  columns: readonly Column<T>[],
  empty: string,
): Promise<void> {
  try {
    const rows = await withStore(args, read);
    printResult(args, { data: rows }, formatTable(rows, columns, empty));
  } catch (error) {
    printFailure(args, error);
  }
}

/** Every row of an id-ordered list, page after page. */
async function allPages<K extends string | number, T extends { id: K }>(fetch: (page: IdPageQuery<K>) => Promise<T[]>): Promise<T[]> {
  const rows: T[] = [];
  for (let afterId: K | undefined; ; ) {
    const page = await fetch({ afterId, limit: PAGE_SIZE });
    rows.push(...page);
    if (page.length < PAGE_SIZE) return rows;
    afterId = page[page.length - 1]!.id;
  }
}

// --- customers and partners -----------------------------------------------------------------------

interface CustomerItem {
  id: string;
  name: string;
  createdAt: string | null;
}

export const customersList: CommandModule<Common, Common> = {
  command: 'list',
  describe: 'List every customer',
  handler: (args) =>
    runList<Common, CustomerItem>(
      args,
      async (store) => (await allPages((page: IdPageQuery) => store.listCustomers(page))).map((c) => ({ id: c.id, name: c.name, createdAt: isoTime(c.createdAt) })),
      [
        { header: 'ID', cell: (c) => c.id },
        { header: 'NAME', cell: (c) => c.name },
        { header: 'CREATED', cell: (c) => shortTime(c.createdAt) },
      ],
      'no customers',
    ),
};

interface PartnerItem extends CustomerItem {
  product: string;
}

export const partnersList: CommandModule<Common, Common> = {
  command: 'list',
  describe: 'List every partner, with the product its key is for',
  handler: (args) =>
    runList<Common, PartnerItem>(
      args,
      async (store) =>
        (await allPages((page: IdPageQuery) => store.listPartners(page))).map((p) => ({ id: p.id, name: p.name, product: p.product, createdAt: isoTime(p.createdAt) })),
      [
        { header: 'ID', cell: (p) => p.id },
        { header: 'NAME', cell: (p) => p.name },
        { header: 'PRODUCT', cell: (p) => p.product },
        { header: 'CREATED', cell: (p) => shortTime(p.createdAt) },
      ],
      'no partners',
    ),
};

// --- fleets ---------------------------------------------------------------------------------------

interface FleetItem {
  id: number;
  customerId: string;
  name: string;
  createdAt: string | null;
}

export const fleetsList: CommandModule<Common, Common & { customer?: string }> = {
  command: 'list',
  describe: 'List every fleet, or one customer\'s',
  builder: (yargs: Argv<Common>) => yargs.option('customer', { type: 'string', describe: 'Only the fleets of this customer id' }),
  handler: (args) =>
    runList<typeof args, FleetItem>(
      args,
      async (store) => {
        const customerId = args.customer;
        if (customerId !== undefined && (await store.getPrincipal('customers', customerId)) === null)
          throw new TrailwireError('not_found', `No customer ${customerId}; see customers list.`);
        const fleets = await allPages((page: IdPageQuery<number>) => store.listAllFleets({ ...page, customerId }));
        return fleets.map((f) => ({ id: f.id, customerId: f.customerId, name: f.name, createdAt: isoTime(f.createdAt) }));
      },
      [
        { header: 'ID', cell: (f) => f.id },
        { header: 'CUSTOMER', cell: (f) => f.customerId },
        { header: 'NAME', cell: (f) => f.name },
        { header: 'CREATED', cell: (f) => shortTime(f.createdAt) },
      ],
      args.customer === undefined ? 'no fleets' : `customer ${args.customer} has no fleets`,
    ),
};

// --- trailers -------------------------------------------------------------------------------------

interface TrailerItem {
  id: string;
  vin: string;
  unitId: string | null;
  fleetId: number | null;
  status: string;
  active: boolean;
  lastSeenAt: string | null;
  createdAt: string | null;
}

function trailerItem(t: OperatorTrailer): TrailerItem {
  return {
    id: t.id,
    vin: t.vin,
    unitId: t.unitId,
    fleetId: t.fleetId,
    status: t.statusName,
    active: t.active,
    lastSeenAt: isoTime(t.lastSeenAt),
    createdAt: isoTime(t.createdAt),
  };
}

/** A trailer named by its id or its VIN (17 characters; any case), whoever owns it; not_found otherwise. */
async function findTrailer(store: TrailwireStore, idOrVin: string): Promise<OperatorTrailer> {
  const byVin = idOrVin.length === 17 ? await store.findTrailerByVin(idOrVin.toUpperCase()) : null;
  const trailer = await store.getAnyTrailer(byVin?.id ?? idOrVin);
  if (!trailer) throw new TrailwireError('not_found', `No trailer ${idOrVin} (a trailer id or VIN); see trailers list.`);
  return trailer;
}

export const trailersList: CommandModule<Common, Common & { fleet?: number; unassigned?: boolean }> = {
  command: 'list',
  describe: 'List every trailer, one fleet\'s, or the unassigned VINs intake met before anyone registered them',
  builder: (yargs: Argv<Common>) =>
    yargs
      .option('fleet', { type: 'number', describe: 'Only the trailers of this fleet id' })
      .option('unassigned', { type: 'boolean', describe: 'Only the trailers in no fleet yet (assign one with trailers create --fleet F --vin V)' })
      .conflicts('fleet', 'unassigned'),
  handler: (args) =>
    runList<typeof args, TrailerItem>(
      args,
      async (store) => {
        let scope: TrailerScope = { kind: args.unassigned ? 'unassigned' : 'all' };
        if (args.fleet !== undefined) {
          if (!Number.isInteger(args.fleet) || args.fleet < 1) throw invalidField('/fleet', 'must be a positive integer');
          if ((await store.getFleetById(args.fleet)) === null) throw new TrailwireError('not_found', `No fleet ${args.fleet}; see fleets list.`);
          scope = { kind: 'fleet', fleetId: args.fleet };
        }
        return (await allPages((page: IdPageQuery) => store.listAllTrailers({ ...page, scope }))).map(trailerItem);
      },
      [
        { header: 'ID', cell: (t) => t.id },
        { header: 'VIN', cell: (t) => t.vin },
        { header: 'UNIT', cell: (t) => t.unitId },
        { header: 'FLEET', cell: (t) => t.fleetId },
        { header: 'STATUS', cell: (t) => (t.active ? t.status : `${t.status} (inactive)`) },
        { header: 'LAST SEEN', cell: (t) => shortTime(t.lastSeenAt) },
      ],
      args.unassigned ? 'no unassigned trailers' : args.fleet === undefined ? 'no trailers' : `fleet ${args.fleet} has no trailers`,
    ),
};

interface FixItem {
  timestamp: string | null;
  lat: number;
  long: number;
  speed: number;
  heading: string;
}

const HOUR_MS = 3_600_000;

export const trailersHistory: CommandModule<Common, Common & { trailer: string; hours: number }> = {
  command: 'history <trailer>',
  describe: 'The GPS fixes of one trailer (id or VIN), oldest first — also those intake recorded before it was assigned',
  builder: (yargs: Argv<Common>) =>
    yargs
      .positional('trailer', { type: 'string', demandOption: true, describe: 'Trailer id or VIN' })
      .option('hours', { type: 'number', default: 24, describe: 'How far back from now' }),
  handler: (args) =>
    runList<typeof args, FixItem>(
      args,
      async (store) => {
        if (!(args.hours > 0)) throw invalidField('/hours', 'must be a positive number');
        const trailer = await findTrailer(store, args.trailer);
        const to = Date.now() + 1;
        const fixes: GpsFix[] = [];
        for (let after; ; ) {
          const page = await store.listTrailerGps(trailer.id, { from: to - args.hours * HOUR_MS, to, after, limit: PAGE_SIZE });
          fixes.push(...page.map((row) => row.record));
          if (page.length < PAGE_SIZE) break;
          after = page[page.length - 1]!.key;
        }
        return fixes.map((fix) => ({ timestamp: isoTime(fix.timestamp), lat: fix.lat, long: fix.long, speed: fix.speed, heading: fix.heading }));
      },
      [
        { header: 'TIME', cell: (f) => shortTime(f.timestamp) },
        { header: 'LAT', cell: (f) => f.lat.toFixed(5) },
        { header: 'LONG', cell: (f) => f.long.toFixed(5) },
        { header: 'MPH', cell: (f) => Math.round(f.speed) },
        { header: 'HEADING', cell: (f) => f.heading },
      ],
      `no GPS fixes of ${args.trailer} in the last ${args.hours} hours`,
    ),
};

// --- devices --------------------------------------------------------------------------------------

interface DeviceItem {
  id: string;
  trailerId: string;
  kind: string;
  serial: string;
  position: string | null;
  state: 'OK' | 'Warning' | 'Faulted';
  active: boolean;
  lastSeenAt: string | null;
}

function deviceItem(d: Device): DeviceItem {
  return {
    id: d.id,
    trailerId: d.trailerId,
    kind: d.kind,
    serial: d.serial,
    position: d.position,
    // The names of a trailer's status (contract 4): a device both warning and faulted counts as faulted.
    state: d.state.isFault ? 'Faulted' : d.state.isWarning ? 'Warning' : 'OK',
    active: d.active,
    lastSeenAt: isoTime(d.lastSeenAt),
  };
}

export const devicesList: CommandModule<Common, Common & { trailer: string }> = {
  command: 'list',
  describe: 'List the devices of one trailer',
  builder: (yargs: Argv<Common>) => yargs.option('trailer', { type: 'string', demandOption: true, describe: 'Trailer id or VIN' }),
  handler: (args) =>
    runList<typeof args, DeviceItem>(
      args,
      async (store) => {
        const trailer = await findTrailer(store, args.trailer);
        return (await allPages((page: IdPageQuery) => store.listTrailerDevices(trailer.id, page))).map(deviceItem);
      },
      [
        { header: 'ID', cell: (d) => d.id },
        { header: 'KIND', cell: (d) => d.kind },
        { header: 'SERIAL', cell: (d) => d.serial },
        { header: 'POSITION', cell: (d) => d.position },
        { header: 'STATE', cell: (d) => (d.active ? d.state : `${d.state} (inactive)`) },
        { header: 'LAST SEEN', cell: (d) => shortTime(d.lastSeenAt) },
      ],
      `trailer ${args.trailer} has no devices`,
    ),
};
