/**
 * The demo of `trailwire serve --demo` (issue 2, "Done when"): the first start seeds a demo customer
 * whose fleets, trailers, devices and cargosafe units are readable through the API with the printed
 * keys; a later start (or a second call) seeds nothing more and prints fresh keys that work, while
 * the previous keys and the tokens minted with them stop working.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { openSqliteStore } from '../../adapters/sqlite/index.ts';
import { ManualClock } from '../../core/clock.ts';
import { createTrailwire, type Trailwire } from '../../core/trailwire.ts';
import { builtInProducts } from '../../products/index.ts';
import { seedDemo, type DemoPrincipal, type DemoSeed } from '../../simulator/demo-seed.ts';
import { assertProblem, serveTrailwire, walkPages, type ServedApp } from '../support/fixtures.ts';

const PRODUCTS = builtInProducts.map((product) => product.name);

interface Running {
  trailwire: Trailwire;
  served: ServedApp;
}

describe('demo seed', () => {
  let dir: string;
  let file: string;
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0));
  let running: Running | undefined;

  /** Starts Trailwire over the demo file, as `trailwire serve` does on every start. */
  async function start(): Promise<Running> {
    const trailwire = await createTrailwire({ store: await openSqliteStore({ file }), clock });
    running = { trailwire, served: await serveTrailwire(trailwire) };
    return running;
  }

  async function stop(): Promise<void> {
    if (!running) return;
    await running.served.close();
    await running.trailwire.close();
    running = undefined;
  }

  async function authenticate(served: ServedApp, principal: DemoPrincipal) {
    return served.call('POST', `/api/v1/${principal.audience}/authenticate`, { apiKey: principal.apiKey });
  }

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'trailwire-demo-'));
    file = join(dir, 'demo.db');
  });
  after(async () => {
    await stop();
    rmSync(dir, { recursive: true, force: true });
  });

  let first: DemoSeed;
  let firstTokens: Map<string, string>;

  it('the first seed creates the demo and answers keys that work', async () => {
    const { trailwire, served } = await start();
    first = await seedDemo(trailwire, { products: PRODUCTS, trailersPerFleet: 2 });
    assert.equal(first.created, true);
    const customers = first.principals.filter((p) => p.audience === 'customers');
    const partners = first.principals.filter((p) => p.audience === 'partners');
    assert.deepEqual(customers.map((p) => p.name), ['Demo Logistics', 'Other Freight Co']);
    assert.deepEqual(partners.map((p) => p.product).sort(), [...PRODUCTS].sort());
    // Each demo customer grants the demo's partners, and only them (contract 4, "Partner grants").
    for (const customer of customers)
      assert.deepEqual(
        (await trailwire.admin.listGrants({ customerId: customer.id })).map((grant) => grant.partnerId).sort(),
        partners.map((p) => p.id).sort(),
      );

    firstTokens = new Map();
    for (const principal of first.principals) {
      const response = await authenticate(served, principal);
      assert.equal(response.status, 200, `${principal.name}: ${JSON.stringify(response.body)}`);
      firstTokens.set(principal.id, response.body.access_token);
    }

    // The demo customer reads a demo worth showing: fleets, trailers with a day of GPS, sensors in
    // every state, cargosafe units with readings.
    const demo = customers[0]!;
    const call = (path: string) => served.call('GET', path, { token: firstTokens.get(demo.id) });
    const fleets = (await call('/api/v1/fleets')).body.data as { id: number }[];
    assert.equal(fleets.length, 2);
    const statuses = new Set<string>();
    for (const fleet of fleets) {
      const trailers = (await call(`/api/v1/trailers/${fleet.id}`)).body.data as { id: string; status: { name: string }; telemetry: unknown }[];
      assert.equal(trailers.length, 2);
      for (const trailer of trailers) {
        statuses.add(trailer.status.name);
        assert.notEqual(trailer.telemetry, null);
        const gps = await walkPages(call, `/api/v1/trailers/telemetry/gps/${trailer.id}?take=500`);
        assert.ok(gps.items.length >= 24 * 12, `a day of fixes every 5 minutes, got ${gps.items.length}`);
        const devices = (await call(`/api/v1/devices/${trailer.id}?activeOnly=true`)).body.data as { id: string }[];
        assert.equal(devices.length, 8);
        assert.ok((await call(`/api/v1/devices/telemetry/${devices[0]!.id}`)).body.data.length > 0);
      }
    }
    assert.deepEqual([...statuses].sort(), ['Faulted', 'OK', 'Warning']);
    const units = (await call('/api/v1/cargosafe')).body.data as { id: string }[];
    assert.ok(units.length > 0);
    assert.ok((await call(`/api/v1/cargosafe/telemetry/${units[0]!.id}`)).body.data.length > 0);

    // The second demo customer sees its own fleet only.
    const other = customers[1]!;
    const otherFleets = (await served.call('GET', '/api/v1/fleets', { token: firstTokens.get(other.id) })).body.data as { id: number }[];
    assert.equal(otherFleets.length, 1);
    assert.ok(!fleets.some((fleet) => fleet.id === otherFleets[0]!.id));
    assertProblem(await served.call('GET', `/api/v1/fleets/${fleets[0]!.id}`, { token: firstTokens.get(other.id) }), 404);
  });

  it('a restart seeds nothing more and answers fresh keys; the previous keys and their tokens stop working', async () => {
    await stop();
    clock.advance(60_000);
    const { trailwire, served } = await start();
    const second = await seedDemo(trailwire, { products: PRODUCTS, trailersPerFleet: 2 });
    assert.equal(second.created, false);
    assert.deepEqual(
      second.principals.map(({ apiKey: _, ...rest }) => rest),
      first.principals.map(({ apiKey: _, ...rest }) => rest),
      'the same demo principals',
    );
    for (const [index, principal] of second.principals.entries()) {
      const previous = first.principals[index]!;
      assert.notEqual(principal.apiKey, previous.apiKey);
      assertProblem(await authenticate(served, previous), 401);
      const oldToken = firstTokens.get(principal.id)!;
      const path = principal.audience === 'customers' ? '/api/v1/fleets' : '/api/v1/partners/rotate';
      const method = principal.audience === 'customers' ? 'GET' : 'PUT';
      assertProblem(await served.call(method, path, { token: oldToken }), 401);
      assert.equal((await authenticate(served, principal)).status, 200, principal.name);
    }
    const demo = second.principals[0]!;
    const token = (await authenticate(served, demo)).body.access_token;
    assert.equal((await served.call('GET', '/api/v1/fleets', { token })).body.data.length, 2, 'no second copy of the demo');

    // Seeding again in the same process rotates again: the keys of a moment ago stop working too.
    const third = await seedDemo(trailwire, { products: PRODUCTS, trailersPerFleet: 2 });
    assert.equal(third.created, false);
    assertProblem(await authenticate(served, demo), 401);
    assertProblem(await served.call('GET', '/api/v1/fleets', { token }), 401);
    assert.equal((await authenticate(served, third.principals[0]!)).status, 200);
  });
});
