import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseVin } from '../../core/vin.ts';
import { builtInProducts } from '../../products/index.ts';
import { tpmsState, type TpmsPayload } from '../../products/tpms/index.ts';
import { CARGO_TEMPERATURE_BAND, SIMULATED_PRODUCTS, TrafficGenerator } from '../../simulator/traffic.ts';

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

function haversineMiles(a: { latitude: number; longitude: number }, b: { latitude: number; longitude: number }): number {
  const rad = Math.PI / 180;
  const dLat = (b.latitude - a.latitude) * rad;
  const dLon = (b.longitude - a.longitude) * rad;
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(a.latitude * rad) * Math.cos(b.latitude * rad) * Math.sin(dLon / 2) ** 2;
  return 2 * 3958.8 * Math.asin(Math.sqrt(h));
}
