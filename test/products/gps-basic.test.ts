import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import gpsBasic, { kphToMph } from '../../products/gps-basic/index.ts';
import { runProductConformance } from '../conformance/product.ts';

const fix = { timestamp: 1767268800, position: { latitude: 41.8781, longitude: -87.6298 }, speedKph: 88.5, bearingDeg: 271 };
const VIN = '1HGCM82633A004352';

runProductConformance(gpsBasic, {
  invalidPayloads: [
    { payload: { ...fix, timestamp: -1 }, path: '/timestamp', why: 'a negative timestamp' },
    { payload: { ...fix, timestamp: 0 }, path: '/timestamp', why: 'an unset device clock (1970)' },
    { payload: { ...fix, timestamp: 1767268800000 }, path: '/timestamp', why: 'milliseconds sent as seconds' },
    { payload: { ...fix, position: { latitude: 90.5, longitude: 0 } }, path: '/position/latitude', why: 'latitude beyond the pole' },
    { payload: { ...fix, position: { latitude: 0, longitude: -180.01 } }, path: '/position/longitude', why: 'longitude out of range' },
    { payload: { ...fix, speedKph: -1 }, path: '/speedKph', why: 'a negative speed' },
    { payload: { ...fix, bearingDeg: 360.5 }, path: '/bearingDeg', why: 'a bearing above 360' },
    { payload: { ...fix, bearingDeg: -0.5 }, path: '/bearingDeg', why: 'a negative bearing' },
  ],
});

describe('gps-basic transform', () => {
  const transform = (overrides: Partial<typeof fix>) => gpsBasic.transform(VIN, { ...fix, ...overrides }, 0).gps;

  it('yields exactly one fix with the position unchanged and the time in epoch ms', () => {
    const result = gpsBasic.transform(VIN, fix, 0);
    assert.deepEqual(result, {
      gps: [{ timestamp: 1767268800000, lat: 41.8781, long: -87.6298, speed: 55, heading: 'W' }],
      devices: [],
      cargosafe: [],
    });
  });

  it('keeps the milliseconds of fractional seconds', () => {
    assert.equal(transform({ timestamp: 1767268800.123 })[0]!.timestamp, 1767268800123);
  });

  it('converts km/h to mph rounded to 0.1 mph', () => {
    assert.equal(kphToMph(100), 62.1);
    assert.equal(kphToMph(1.609344), 1);
    assert.equal(kphToMph(0), 0);
    assert.equal(transform({ speedKph: 96.56064 })[0]!.speed, 60);
  });

  it('maps the bearing to the 8-point cardinal heading, N covering 337.5°–22.5°', () => {
    const cases: Array<[number, string]> = [
      [0, 'N'], [22.49, 'N'], [22.5, 'NE'], [67.49, 'NE'], [67.5, 'E'], [112.5, 'SE'], [157.5, 'S'],
      [202.5, 'SW'], [247.5, 'W'], [292.5, 'NW'], [337.49, 'NW'], [337.5, 'N'], [360, 'N'],
    ];
    for (const [bearingDeg, heading] of cases) assert.equal(transform({ bearingDeg })[0]!.heading, heading, `${bearingDeg}°`);
  });

  it('accepts the timestamp bounds: 2000-01-01 inclusive, 2100-01-01 exclusive', () => {
    assert.deepEqual(gpsBasic.validate({ ...fix, timestamp: Date.UTC(2000, 0, 1) / 1000 }), []);
    assert.deepEqual(gpsBasic.validate({ ...fix, timestamp: Date.UTC(2100, 0, 1) / 1000 - 0.001 }), []);
    assert.deepEqual(gpsBasic.validate({ ...fix, timestamp: Date.UTC(2100, 0, 1) / 1000 }), [
      { path: '/timestamp', message: 'must be less than 4102444800' },
    ]);
  });

  it('names every missing field of an incomplete fix', () => {
    assert.deepEqual(gpsBasic.validate({ position: {} }), [
      { path: '/timestamp', message: 'is required' },
      { path: '/speedKph', message: 'is required' },
      { path: '/bearingDeg', message: 'is required' },
      { path: '/position/latitude', message: 'is required' },
      { path: '/position/longitude', message: 'is required' },
    ]);
  });
});
