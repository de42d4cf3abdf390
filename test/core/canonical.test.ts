import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type CanonicalTelemetry, cardinalHeading, checkCanonicalTelemetry } from '../../core/canonical.ts';

describe('cardinalHeading', () => {
  it('gives each 45° sector its heading, a boundary belonging to the sector clockwise of it', () => {
    const cases: Array<[number, string]> = [
      [0, 'N'], [22.4999, 'N'], [22.5, 'NE'], [45, 'NE'], [67.4999, 'NE'], [67.5, 'E'], [90, 'E'],
      [112.5, 'SE'], [135, 'SE'], [157.5, 'S'], [180, 'S'], [202.5, 'SW'], [225, 'SW'], [247.5, 'W'],
      [270, 'W'], [292.5, 'NW'], [315, 'NW'], [337.4999, 'NW'], [337.5, 'N'], [359.9999, 'N'], [360, 'N'],
    ];
    for (const [degrees, heading] of cases) assert.equal(cardinalHeading(degrees), heading, `${degrees}°`);
  });

  it('takes any finite bearing modulo 360', () => {
    assert.equal(cardinalHeading(-90), 'W');
    assert.equal(cardinalHeading(-0.1), 'N');
    assert.equal(cardinalHeading(450), 'E');
    assert.equal(cardinalHeading(720 + 210), 'SW');
  });

  it('refuses a bearing that is not a finite number', () => {
    for (const bad of [Number.NaN, Infinity, -Infinity]) assert.throws(() => cardinalHeading(bad), RangeError);
  });
});

describe('checkCanonicalTelemetry', () => {
  const valid = (): CanonicalTelemetry => ({
    gps: [{ timestamp: 1000, lat: 45, long: -120, speed: 0, heading: 'N' }],
    devices: [{ kind: 'tpms', serial: 'A1', position: null, timestamp: 1000, metrics: { psi: 100 }, state: { isWarning: false, isFault: true } }],
    cargosafe: [{ serial: 'C1', timestamp: 1000, doorOpen: false, loadPercent: 0, temperatureC: -20, humidityPercent: 100 }],
  });

  it('accepts valid canonical telemetry, including the range limits and empty parts', () => {
    assert.deepEqual(checkCanonicalTelemetry(valid()), []);
    assert.deepEqual(checkCanonicalTelemetry({ gps: [], devices: [], cargosafe: [] }), []);
    const limits = valid();
    limits.gps.push({ timestamp: 0, lat: -90, long: 180, speed: 0, heading: 'NW' }, { timestamp: 1, lat: 90, long: -180, speed: 80, heading: 'S' });
    assert.deepEqual(checkCanonicalTelemetry(limits), []);
  });

  const broken: Array<[string, (t: CanonicalTelemetry & Record<string, any>) => void, string]> = [
    ['a latitude beyond a pole', (t) => (t.gps[0]!.lat = 90.1), '/gps/0/lat'],
    ['a NaN longitude', (t) => (t.gps[0]!.long = Number.NaN), '/gps/0/long'],
    ['a negative speed', (t) => (t.gps[0]!.speed = -1), '/gps/0/speed'],
    ['an unknown heading', (t) => ((t.gps[0] as any).heading = 'North'), '/gps/0/heading'],
    ['a fractional timestamp', (t) => (t.gps[0]!.timestamp = 1.5), '/gps/0/timestamp'],
    ['a negative timestamp', (t) => (t.devices[0]!.timestamp = -1), '/devices/0/timestamp'],
    ['a blank device kind', (t) => (t.devices[0]!.kind = ' '), '/devices/0/kind'],
    ['an empty serial', (t) => (t.devices[0]!.serial = ''), '/devices/0/serial'],
    ['an empty position', (t) => (t.devices[0]!.position = ''), '/devices/0/position'],
    ['an infinite metric', (t) => (t.devices[0]!.metrics.psi = Infinity), '/devices/0/metrics/psi'],
    ['a state that is both warning and fault', (t) => (t.devices[0]!.state.isWarning = true), '/devices/0/state'],
    ['a state flag that is not a boolean', (t) => ((t.devices[0]!.state as any).isFault = 1), '/devices/0/state/isFault'],
    ['a load over 100 %', (t) => (t.cargosafe[0]!.loadPercent = 101), '/cargosafe/0/loadPercent'],
    ['a door state that is not a boolean', (t) => ((t.cargosafe[0] as any).doorOpen = 'yes'), '/cargosafe/0/doorOpen'],
    ['two fixes at the same time', (t) => t.gps.push({ ...t.gps[0]! }), '/gps/1'],
    ['two readings of one device at the same time', (t) => t.devices.push({ ...t.devices[0]!, position: 'x' }), '/devices/1'],
    ['two readings of one unit at the same time', (t) => t.cargosafe.push({ ...t.cargosafe[0]! }), '/cargosafe/1'],
    ['a missing part', (t) => delete (t as any).cargosafe, '/cargosafe'],
  ];
  for (const [what, breakIt, path] of broken)
    it(`reports ${what} at ${path}`, () => {
      const telemetry = valid();
      breakIt(telemetry);
      const errors = checkCanonicalTelemetry(telemetry);
      assert.deepEqual(errors.map((e) => e.path), [path]);
    });

  it('accepts readings of two devices, or one device at two times', () => {
    const telemetry = valid();
    telemetry.devices.push({ ...telemetry.devices[0]!, serial: 'A2' }, { ...telemetry.devices[0]!, timestamp: 2000 });
    assert.deepEqual(checkCanonicalTelemetry(telemetry), []);
  });

  it('reports a value that is not an object at the root', () => {
    assert.deepEqual(checkCanonicalTelemetry(undefined).map((e) => e.path), ['']);
  });
});
