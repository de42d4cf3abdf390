/**
 * The simulator's embedded mode: starts an in-process Trailwire on a temporary SQLite file (HTTP and
 * gRPC on free ports), provisions a partner for every product, customers with a fleet each and the
 * run's trailers spread over those fleets, and answers the `SimulationTarget` to run against plus a
 * `close()` that tears it all down. Intake limits are set for the scenario (short windows, numbers
 * that make the scenario's intents happen at the requested rate) so that a run of a few seconds
 * crosses several windows; other limits (authentication, reads) are raised out of the way, and
 * webhooks may go to plain http on this machine, where the run's receiver listens (`--webhooks`).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import type { IntakeLimit } from '../core/products.ts';
import { startServer, type RunningServer, type ServerOptions } from '../adapters/server/index.ts';
import { builtInProducts } from '../products/index.ts';
import { embeddedLimits, type ScenarioName } from './scenarios.ts';
import type { SimulationTarget } from './simulation.ts';
import { SIMULATED_PRODUCTS, type TrafficGenerator } from './traffic.ts';

export interface EmbeddedOptions {
  scenario: ScenarioName;
  vins: number;
  /** The peak arrival rate, requests/s: the scenario's limits are set for it. */
  rate: number;
  /** Customers to provision (each with one fleet). Default: 4, or fewer with fewer VINs. */
  customers?: number;
  /** Intake window length for every product. Default 2 s. */
  windowSeconds?: number;
  /** Explicit limits per product, instead of the scenario's. */
  limits?: Partial<Record<string, IntakeLimit>>;
  /** LiveFeed heartbeat interval. Default 1,000 ms. */
  heartbeatIntervalMs?: number;
  /**
   * Overrides of the server's options, for tests that make the server disagree with what the
   * simulator assumes (a bigger limit, a failing counter, no intake worker...).
   */
  server?: Partial<ServerOptions>;
}

export interface EmbeddedDeployment {
  target: SimulationTarget;
  server: RunningServer;
  close(): Promise<void>;
}

const GENEROUS = { requests: 1_000_000, windowSeconds: 60 };

/** Starts and provisions the embedded Trailwire. `traffic` gets the run's trailers (and a probe VIN). */
export async function startEmbedded(options: EmbeddedOptions, traffic: TrafficGenerator): Promise<EmbeddedDeployment> {
  const windowSeconds = options.windowSeconds ?? 2;
  const heartbeatIntervalMs = options.heartbeatIntervalMs ?? 1000;
  const limits: Record<string, IntakeLimit> = {
    ...Object.fromEntries(builtInProducts.map((product) => [product.name, { ...product.limit }])),
    ...embeddedLimits({ scenario: options.scenario, vins: options.vins, rate: options.rate, windowSeconds }),
  };
  for (const [product, limit] of Object.entries(options.limits ?? {})) if (limit) limits[product] = limit;

  const dir = mkdtempSync(join(tmpdir(), 'trailwire-simulate-'));
  let server: RunningServer;
  try {
    const overrides = options.server ?? {};
    server = await startServer({
      db: join(dir, 'trailwire.db'),
      port: 0,
      grpcPort: 0,
      host: '127.0.0.1',
      heartbeatIntervalMs,
      logger: pino({ level: 'silent' }),
      // Every connection comes from this process: the per-address cap would count the simulator, not an attacker.
      connectionLimits: { maxConnectionsPerAddress: 0 },
      ...overrides,
      core: {
        limits: { authenticate: GENEROUS, failedAuthenticatePerAddress: GENEROUS, read: GENEROUS },
        productLimits: limits,
        // The scenarios measure the per-VIN limits: one simulated partner sends the whole fleet's traffic.
        partnerIntake: { budget: GENEROUS, newVinsPerDay: 10_000_000 },
        // The run's webhook receiver is plain http on this machine (`serve --webhook-allow-http --webhook-allow-private`).
        webhooks: { rules: { allowHttp: true, allowPrivate: true } },
        ...overrides.core,
      },
    });
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const close = async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const { auth, admin } = server.trailwire;
    const partnerKeys: SimulationTarget['partnerKeys'] = {};
    for (const product of SIMULATED_PRODUCTS) partnerKeys[product] = (await auth.createPartner({ name: `Simulator ${product}`, product })).apiKey;
    const customerCount = Math.max(1, Math.min(options.customers ?? 4, options.vins));
    const customers: SimulationTarget['customers'] = [];
    const fleets: number[] = [];
    for (let i = 0; i < customerCount; i++) {
      const label = `customer ${i + 1}`;
      const { principal, apiKey } = await auth.createCustomer({ name: `Simulated ${label}` });
      customers.push({ label, apiKey });
      fleets.push((await admin.createFleet({ customerId: principal.id, name: `Fleet of ${label}` })).id);
    }
    const vins = traffic.createTrailers(options.vins);
    const [probeVin] = traffic.createTrailers(1);
    const ownership: Record<string, number> = {};
    for (const [index, vin] of vins.entries()) {
      const customer = index % customerCount;
      await admin.registerTrailer({ fleetId: fleets[customer]!, vin, unitId: `SIM-${String(index + 1).padStart(4, '0')}` });
      ownership[vin] = customer;
    }
    const target: SimulationTarget = {
      mode: 'embedded',
      baseUrl: server.url,
      grpcTarget: `127.0.0.1:${server.grpcPort}`,
      partnerKeys,
      customers,
      vins,
      probeVin: probeVin!,
      ownership,
      limits,
      heartbeatIntervalMs,
      // One process, one clock.
      clockOffsetMs: 0,
    };
    return { target, server, close };
  } catch (error) {
    await close();
    throw error;
  }
}
