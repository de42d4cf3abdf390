/**
 * The simulator's remote mode: runs against any Trailwire deployment given its URLs and keys. The
 * customers' own fleets and trailers, read through the read API, say which VINs to drive and whose
 * subscribers must see their updates, and at most those (issue 31, finding 2): VINs nobody registered
 * fill up to `vins` only when asked (`unregisteredVins`), since intake creates each as an unassigned
 * trailer in the target store. Each trailer driven is continued as the deployment has it: from its
 * last fix (along the demo's roads when it is on one), through its own active tire sensors and
 * cargosafe unit, each keeping its state (`traffic.ts`). The server's clock offset is read from its
 * `Date` header (no payload), so windows are judged in the server's time. Limits are the products'
 * defaults unless the operator says the deployment overrides them.
 */
import { TrailwireError } from '../core/errors.ts';
import type { IntakeLimit } from '../core/products.ts';
import { builtInProducts } from '../products/index.ts';
import { TrailwireClient } from './client/http-client.ts';
import type { SimulationTarget } from './simulation.ts';
import type { KnownTrailer, SensorState, SimulatedProduct, TrafficGenerator } from './traffic.ts';

export interface RemoteOptions {
  /** Base URL of the data API, e.g. `http://localhost:8080`. */
  baseUrl: string;
  /** Base URL of the auth API. Default: `baseUrl`. */
  authUrl?: string;
  /** `host:port` of the LiveFeed. */
  grpcTarget: string;
  /** A partner key per product. */
  partnerKeys: Partial<Record<SimulatedProduct, string>>;
  customerKeys: string[];
  /** The most trailers to drive (the customers' own, in turn). */
  vins: number;
  /**
   * Fill up to `vins` with VINs nobody registered when the customers have fewer trailers. Each becomes
   * an unassigned trailer in the target store. Default false: the customers' own trailers only.
   */
  unregisteredVins?: boolean;
  /** The deployment's intake limits where they differ from the products' defaults. */
  limits?: Partial<Record<string, IntakeLimit>>;
  /** The deployment's LiveFeed heartbeat interval. Default 15,000 ms (the server's default). */
  heartbeatIntervalMs?: number;
  /** Told what is being done, as it starts (for a person watching). */
  onStage?: (text: string) => void;
}

/** A trailer as the read API answers it (the fields used here). */
interface ApiTrailer {
  id: string;
  vin: string;
  telemetry: { lat: number; long: number; speed: number; heading: string } | null;
}

interface ApiDevice {
  kind: string;
  serial: string;
  position: string | null;
  status: { isWarning: boolean; isFault: boolean };
}

interface ApiCargosafeUnit {
  trailerId: string;
  serial: string;
  latest: { loadPercent: number; temperatureC: number; humidityPercent: number } | null;
}

/** Reads what the simulator needs from a running deployment. `traffic` gets the run's trailers. */
export async function connectRemote(options: RemoteOptions, traffic: TrafficGenerator): Promise<SimulationTarget> {
  const baseUrl = options.baseUrl.replace(/\/$/, '');
  const customers = options.customerKeys.map((apiKey, index) => ({ label: `customer ${index + 1}`, apiKey }));
  options.onStage?.(`reading the fleets and trailers of ${customers.length} customer key${customers.length === 1 ? '' : 's'} at ${baseUrl}`);
  const clients = customers.map((customer) => new TrailwireClient({ baseUrl, authUrl: options.authUrl, audience: 'customers', apiKey: customer.apiKey }));
  const owned: ApiTrailer[][] = [];
  for (const client of clients) {
    const trailers: ApiTrailer[] = [];
    for await (const fleet of client.paginate<{ id: number }>('/api/v1/fleets', { take: 500 }))
      for await (const trailer of client.paginate<ApiTrailer>(`/api/v1/trailers/${fleet.id}`, { take: 500 })) trailers.push(trailer);
    owned.push(trailers.sort((a, b) => a.vin.localeCompare(b.vin)));
  }
  const ownership: Record<string, number> = {};
  owned.forEach((trailers, customer) => trailers.forEach((trailer) => (ownership[trailer.vin] = customer)));

  // Customers' trailers in turn, so that every customer's subscribers get traffic.
  const chosen: Array<{ customer: number; trailer: ApiTrailer }> = [];
  for (let round = 0; chosen.length < options.vins && owned.some((list) => round < list.length); round++)
    owned.forEach((list, customer) => {
      if (round < list.length && chosen.length < options.vins) chosen.push({ customer, trailer: list[round]! });
    });
  const vins = chosen.map(({ trailer }) => trailer.vin);
  if (chosen.length > 0) options.onStage?.(`reading the sensors of the ${chosen.length} trailers to drive, to continue each as it is`);
  // Each customer's cargosafe units in one list; each trailer's sensors in its own.
  const unitsOf = await Promise.all(
    clients.map(async (client) => {
      const units = new Map<string, ApiCargosafeUnit>();
      for await (const unit of client.paginate<ApiCargosafeUnit>('/api/v1/cargosafe', { take: 500, activeOnly: true })) units.set(unit.trailerId, unit);
      return units;
    }),
  );
  for (const { customer, trailer } of chosen) {
    const tires: KnownTrailer['tires'] = [];
    for await (const device of clients[customer]!.paginate<ApiDevice>(`/api/v1/devices/${encodeURIComponent(trailer.id)}`, { take: 500, activeOnly: true }))
      if (device.kind === 'tpms') tires.push({ serial: device.serial, position: device.position ?? 'unknown', state: stateOf(device.status) });
    const unit = unitsOf[customer]!.get(trailer.id);
    const fix = trailer.telemetry;
    traffic.adoptTrailer(trailer.vin, {
      fix: fix ? { lat: fix.lat, long: fix.long, speedMph: fix.speed, heading: fix.heading } : undefined,
      tires,
      cargo: unit ? { serial: unit.serial, ...(unit.latest ?? {}) } : undefined,
    });
  }
  if (vins.length < options.vins && options.unregisteredVins) vins.push(...traffic.createTrailers(options.vins - vins.length));
  if (vins.length === 0)
    throw new TrailwireError('validation_failed', "The customer keys' fleets hold no trailers: register some (trailwire trailers create), or pass --unregistered-vins to send to VINs nobody registered");
  // Only the rotation scenario sends to it, with a token that must be refused: nothing is created.
  const [probeVin] = traffic.createTrailers(1);

  const limits: Record<string, IntakeLimit> = Object.fromEntries(builtInProducts.map((product) => [product.name, { ...product.limit }]));
  for (const [product, limit] of Object.entries(options.limits ?? {})) if (limit) limits[product] = limit;

  const target: SimulationTarget = {
    mode: 'remote',
    baseUrl,
    authUrl: options.authUrl,
    grpcTarget: options.grpcTarget,
    partnerKeys: { ...options.partnerKeys },
    customers,
    vins,
    probeVin: probeVin!,
    ownership,
    limits,
    heartbeatIntervalMs: options.heartbeatIntervalMs ?? 15_000,
    clockOffsetMs: 0,
  };
  options.onStage?.("reading the server's clock from its Date header");
  target.clockOffsetMs = await measureClockOffset(target);
  return target;
}

function stateOf(status: ApiDevice['status']): SensorState {
  return status.isFault ? 'fault' : status.isWarning ? 'warning' : 'ok';
}

/**
 * Server clock minus client clock, from the `Date` header of `GET /healthz` (no payload, nothing
 * written). The header counts whole seconds, so the probe asks until the second changes: the change
 * happened between the two answers, which bounds the offset to about one round trip. Gives up after
 * 1.5 s and answers the coarse estimate.
 */
export async function measureClockOffset(target: SimulationTarget): Promise<number> {
  const ask = async () => {
    const sentAt = Date.now();
    const response = await fetch(`${target.baseUrl}/healthz`);
    await response.arrayBuffer();
    const answeredAt = Date.now();
    return { at: (sentAt + answeredAt) / 2, date: Date.parse(response.headers.get('date') ?? '') };
  };
  let previous = await ask();
  if (Number.isNaN(previous.date)) return 0;
  const deadline = Date.now() + 1500;
  while (Date.now() < deadline) {
    const current = await ask();
    if (current.date !== previous.date) return Math.round(current.date - (previous.at + current.at) / 2);
    previous = current;
  }
  // The second never changed in time: the header's time is somewhere in its second.
  return Math.round(previous.date + 500 - previous.at);
}
