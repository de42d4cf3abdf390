/**
 * The simulator's remote mode: runs against any Trailwire deployment given its URLs and keys. The
 * customers' own fleets and trailers, read through the read API, say which VINs to drive and whose
 * subscribers must see their updates; fake VINs fill up when the customers have fewer trailers than
 * asked (their trailers are created unassigned, so no subscriber may see them). The server's clock
 * offset is measured with one probe payload, so windows are judged in the server's time. Limits
 * are the products' defaults unless the operator says the deployment overrides them.
 */
import type { IntakeLimit } from '../core/products.ts';
import { builtInProducts } from '../products/index.ts';
import { TrailwireClient } from './client/http-client.ts';
import type { SimulationTarget } from './simulation.ts';
import type { SimulatedProduct, TrafficGenerator } from './traffic.ts';

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
  vins: number;
  /** The deployment's intake limits where they differ from the products' defaults. */
  limits?: Partial<Record<string, IntakeLimit>>;
  /** The deployment's LiveFeed heartbeat interval. Default 15,000 ms (the server's default). */
  heartbeatIntervalMs?: number;
}

/** Reads what the simulator needs from a running deployment. `traffic` gets the run's trailers. */
export async function connectRemote(options: RemoteOptions, traffic: TrafficGenerator): Promise<SimulationTarget> {
  const baseUrl = options.baseUrl.replace(/\/$/, '');
  const customers = options.customerKeys.map((apiKey, index) => ({ label: `customer ${index + 1}`, apiKey }));
  const owned: string[][] = [];
  for (const customer of customers) {
    const client = new TrailwireClient({ baseUrl, authUrl: options.authUrl, audience: 'customers', apiKey: customer.apiKey });
    const vins: string[] = [];
    for await (const fleet of client.paginate<{ id: number }>('/api/v1/fleets', { take: 500 }))
      for await (const trailer of client.paginate<{ vin: string }>(`/api/v1/trailers/${fleet.id}`, { take: 500 })) vins.push(trailer.vin);
    owned.push(vins.sort());
  }
  const ownership: Record<string, number> = {};
  owned.forEach((vins, customer) => vins.forEach((vin) => (ownership[vin] = customer)));

  // Customers' trailers in turn, so that every customer's subscribers get traffic.
  const vins: string[] = [];
  for (let round = 0; vins.length < options.vins && owned.some((list) => round < list.length); round++)
    for (const list of owned) if (round < list.length && vins.length < options.vins) vins.push(list[round]!);
  for (const vin of vins) traffic.adoptTrailer(vin);
  if (vins.length < options.vins) vins.push(...traffic.createTrailers(options.vins - vins.length));
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
  target.clockOffsetMs = await measureClockOffset(target);
  return target;
}

/**
 * Server clock minus client clock: one payload to the probe VIN, whose `receivedAt` the server
 * stamped between the moment the request left and the moment its answer came back.
 */
export async function measureClockOffset(target: SimulationTarget): Promise<number> {
  const [product, apiKey] = Object.entries(target.partnerKeys).find(([, key]) => key) ?? [];
  if (!product || !apiKey) return 0;
  const client = new TrailwireClient({ baseUrl: target.baseUrl, authUrl: target.authUrl, audience: 'partners', apiKey });
  await client.accessToken();
  const example = builtInProducts.find((candidate) => candidate.name === product)?.examples[0];
  const sentAt = Date.now();
  const response = await client.sendTelemetry(target.probeVin, example, { noRetry: true });
  const answeredAt = Date.now();
  const id = (response.body as { id?: string } | undefined)?.id;
  if (response.status !== 202 || !id) return 0;
  const status = await client.intakeStatus(id);
  return Date.parse(status.body.receivedAt) - Math.round((sentAt + answeredAt) / 2);
}
