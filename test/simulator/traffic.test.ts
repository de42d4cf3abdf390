import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseVin } from '../../core/vin.ts';
import { builtInProducts } from '../../products/index.ts';
import { tpmsState, type TpmsPayload } from '../../products/tpms/index.ts';
import { cityNamed, milesBetween, type Place } from '../../simulator/demo-geography.ts';
import { RouteCursor } from '../../simulator/demo-roads.ts';
import { CARGO_TEMPERATURE_BAND, SIMULATED_PRODUCTS, TrafficGenerator, type KnownTrailer } from '../../simulator/traffic.ts';

const START = Date.UTC(2026, 5, 1, 12, 0, 0);

function sample(seed: number, count = 40) {
  const traffic = new TrafficGenerator(seed);
  const vins = traffic.createTrailers(5);
  const payloads: Array<{ product: string; vin: string; payload: unknown }> = [];
  for (let i = 0; i < count; i++)
    for (const product of SIMULATED_PRODUCTS) payloads.push({ product, vin: vins[i % 5]!, payload: traffic.payload(product, i % 5, START + i * 1000) });
  return { vins, payloads };
}

describe('TrafficGenerator', () => {
  it('makes the same VINs and payloads for the same seed, and others for another seed', () => {
    assert.deepEqual(sample(7), sample(7));
    assert.notDeepEqual(sample(7).vins, sample(8).vins);
  });

  it('makes distinct VINs that pass the check digit', () => {
    const vins = new TrafficGenerator(1).createTrailers(200);
    assert.equal(new Set(vins).size, 200);
    for (const vin of vins) assert.equal(parseVin(vin, { verifyCheckDigit: true }), vin);
  });

  it("makes payloads that each product's schema accepts", () => {
    for (const { product, payload } of sample(3, 100).payloads) {
      const definition = builtInProducts.find((p) => p.name === product)!;
      assert.deepEqual(definition.validate(payload), [], `${product}: ${JSON.stringify(payload)}`);
    }
  });

  it('sometimes crosses the tire warning and fault thresholds, mostly not', () => {
    const states = sample(11, 300)
      .payloads.filter((p) => p.product === 'tpms')
      .flatMap((p) => (p.payload as TpmsPayload).sensors.map((s) => tpmsState(s.pressurePsi, s.temperatureC)));
    const faults = states.filter((s) => s.isFault).length;
    const warnings = states.filter((s) => s.isWarning).length;
    assert.ok(faults > 0 && warnings > 0, `faults ${faults}, warnings ${warnings}`);
    assert.ok(faults + warnings < states.length * 0.2, `too many anomalies: ${faults + warnings} of ${states.length}`);
  });

  it('sometimes takes the cargo out of its temperature band', () => {
    const temperatures = sample(5, 300).payloads.filter((p) => p.product === 'cargosafe').map((p) => (p.payload as { temperatureC: number }).temperatureC);
    const outside = temperatures.filter((t) => t < CARGO_TEMPERATURE_BAND.minC || t > CARGO_TEMPERATURE_BAND.maxC).length;
    assert.ok(outside > 0 && outside < temperatures.length * 0.2, `${outside} of ${temperatures.length}`);
  });

  it('moves each trailer no further between fixes than its speed allows', () => {
    const traffic = new TrafficGenerator(9);
    traffic.createTrailers(1);
    let previous: any;
    for (let i = 0; i < 60; i++) {
      const fix = traffic.payload('gps-basic', 0, START + i * 10_000) as any;
      if (previous) {
        const miles = haversineMiles(previous.position, fix.position);
        const maxMiles = (80 * 10) / 3600; // 80 mph for 10 s
        assert.ok(miles <= maxMiles, `moved ${miles} miles in 10 s`);
        assert.equal(fix.timestamp - previous.timestamp, 10);
      }
      previous = fix;
    }
  });
});

describe("TrafficGenerator: a deployment's own trailer, continued as it is (issue 31, finding 2)", () => {
  // On I-80 between Des Moines and Omaha (the corridor's waypoint at 41.55, -94.1), heading west.
  const onI80: KnownTrailer = {
    fix: { lat: 41.55, long: -94.1, speedMph: 61, heading: 'W' },
    tires: [
      { serial: 'TPMS-7-1', position: 'LF-outer', state: 'ok' },
      { serial: 'TPMS-7-2', position: 'LF-inner', state: 'warning' },
      { serial: 'TPMS-7-3', position: 'RF-outer', state: 'fault' },
    ],
    cargo: { serial: 'CS-5007', loadPercent: 64, temperatureC: 3.2, humidityPercent: 71 },
  };
  /** How far a place is from the nearest demo road. */
  const offRoadMiles = (place: Place) => milesBetween(place, RouteCursor.nearest(place, 0, Infinity)!.position());
  const placeOf = (payload: any): Place => ({ lat: payload.position.latitude, long: payload.position.longitude });

  it('drives on from its last fix along the demo road it is on, the way it was heading, never off it', () => {
    const traffic = new TrafficGenerator(4);
    traffic.adoptTrailer('1TWCL1000CL000007', onI80);
    const fixes = Array.from({ length: 120 }, (_, i) => traffic.payload('gps-basic', 0, START + i * 30_000) as any);
    assert.ok(milesBetween(placeOf(fixes[0]), onI80.fix!) < 0.05, 'the first fix is where the last one left it');
    assert.equal(fixes[0].speedKph, Math.round(61 * 1.609344 * 10) / 10, 'at the speed it had');
    for (const [i, fix] of fixes.entries()) {
      assert.ok(offRoadMiles(placeOf(fix)) < 0.05, `fix ${i} is ${offRoadMiles(placeOf(fix))} miles off the road`);
      // 1 % for the road's waypoints being joined by straight lines of latitude and longitude, not great circles.
      if (i > 0) assert.ok(milesBetween(placeOf(fixes[i - 1]), placeOf(fix)) <= ((70 * 30) / 3600) * 1.01, `fix ${i} moved further than 70 mph allow`);
    }
    // An hour at highway speed westward from west of Des Moines: nearer to Omaha than it was, far from where it began.
    const last = placeOf(fixes.at(-1));
    assert.ok(milesBetween(last, cityNamed('Omaha, NE')) < milesBetween(onI80.fix!, cityNamed('Omaha, NE')) - 30, JSON.stringify(last));
  });

  it("a trailer stopped at a demo yard pulls out along a road; one off the demo's map goes straight on from where it is", () => {
    const traffic = new TrafficGenerator(5);
    const yard = cityNamed('Memphis, TN');
    traffic.adoptTrailer('1TWCL1000CL000008', { fix: { lat: yard.lat + 0.004, long: yard.long - 0.003, speedMph: 0, heading: 'E' }, tires: [] });
    const elsewhere = { lat: 47.6, long: -122.33, speedMph: 50, heading: 'N' }; // Seattle: no demo road
    traffic.adoptTrailer('1TWCL1000CL000009', { fix: elsewhere, tires: [] });
    const yardFixes = Array.from({ length: 40 }, (_, i) => traffic.payload('gps-basic', 0, START + i * 30_000) as any);
    assert.ok(milesBetween(placeOf(yardFixes[0]), yard) < 0.5);
    assert.equal(yardFixes[0].speedKph, 0, 'still stopped at its first fix');
    assert.ok(yardFixes.slice(1).every((fix) => fix.speedKph > 0 && offRoadMiles(placeOf(fix)) < 0.05));
    const first = traffic.payload('gps-basic', 1, START) as any;
    assert.ok(milesBetween(placeOf(first), elsewhere) < 0.01, 'no jump to a demo city');
    const later = traffic.payload('gps-basic', 1, START + 60_000) as any;
    assert.ok(milesBetween(placeOf(later), elsewhere) <= (72 * 60) / 3600);
  });

  it('reports through its own sensors and unit only, each keeping its state; nothing is added', () => {
    const traffic = new TrafficGenerator(6);
    traffic.adoptTrailer('1TWCL1000CL000007', onI80);
    traffic.adoptTrailer('1TWCL1000CL000010', { fix: onI80.fix, tires: [] });
    const tpms = builtInProducts.find((p) => p.name === 'tpms')!;
    const cargosafe = builtInProducts.find((p) => p.name === 'cargosafe')!;
    for (let i = 0; i < 200; i++) {
      const payload = traffic.payload('tpms', 0, START + i * 60_000) as TpmsPayload;
      assert.deepEqual(tpms.validate(payload), []);
      assert.deepEqual(payload.sensors.map((s) => [s.sensorId, s.wheel]), onI80.tires.map((t) => [t.serial, t.position]));
      payload.sensors.forEach((sensor, k) => {
        const state = tpmsState(sensor.pressurePsi, sensor.temperatureC);
        assert.equal(state.isFault ? 'fault' : state.isWarning ? 'warning' : 'ok', onI80.tires[k]!.state, JSON.stringify(sensor));
      });
      const cargo = traffic.payload('cargosafe', 0, START + i * 60_000) as any;
      assert.deepEqual(cargosafe.validate(cargo), []);
      assert.equal(cargo.unitSerial, 'CS-5007');
      assert.equal(cargo.door, 'closed');
      assert.equal(cargo.loadPercent, 64);
      assert.ok(Math.abs(cargo.temperatureC - 3.2) <= 0.35, `${cargo.temperatureC} °C`);
    }
    assert.deepEqual(SIMULATED_PRODUCTS.map((product) => traffic.reports(product, 0)), [true, true, true]);
    assert.deepEqual(SIMULATED_PRODUCTS.map((product) => traffic.reports(product, 1)), [true, false, false], 'no sensors, no unit: GPS only');
    assert.throws(() => traffic.payload('cargosafe', 1, START), /has no cargosafe unit/);
  });
});

function haversineMiles(a: { latitude: number; longitude: number }, b: { latitude: number; longitude: number }): number {
  const rad = Math.PI / 180;
  const dLat = (b.latitude - a.latitude) * rad;
  const dLon = (b.longitude - a.longitude) * rad;
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(a.latitude * rad) * Math.cos(b.latitude * rad) * Math.sin(dLon / 2) ** 2;
  return 2 * 3958.8 * Math.asin(Math.sqrt(h));
}
