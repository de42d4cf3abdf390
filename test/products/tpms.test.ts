import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import tpms, { tpmsState, type TpmsSensor } from '../../products/tpms/index.ts';
import { runProductConformance } from '../conformance/product.ts';

const VIN = '1HGCM82633A004352';
const sensor = (overrides: Partial<TpmsSensor> = {}): TpmsSensor => ({
  sensorId: 'A1', wheel: 'axle1-left-outer', pressurePsi: 100, temperatureC: 30, ...overrides,
});
const payload = (sensors: TpmsSensor[], readAt = '2026-01-01T12:00:00Z') => ({ readAt, sensors });

runProductConformance(tpms, {
  invalidPayloads: [
    { payload: payload([]), path: '/sensors', why: 'no sensors' },
    {
      payload: payload(Array.from({ length: 33 }, (_, i) => sensor({ sensorId: `S${i}` }))),
      path: '/sensors',
      why: '33 sensors',
    },
    {
      payload: payload([sensor({ sensorId: 'A' }), sensor({ sensorId: 'B' }), sensor({ sensorId: 'A' })]),
      path: '/sensors/2/sensorId',
      why: 'a repeated sensorId',
    },
    { payload: payload([sensor({ sensorId: '' })]), path: '/sensors/0/sensorId', why: 'an empty sensorId' },
    { payload: payload([sensor({ sensorId: 'A 1' })]), path: '/sensors/0/sensorId', why: 'a sensorId with a space' },
    { payload: payload([sensor({ wheel: ' ' })]), path: '/sensors/0/wheel', why: 'a blank wheel' },
    { payload: payload([sensor({ pressurePsi: -1 })]), path: '/sensors/0/pressurePsi', why: 'negative pressure' },
    { payload: payload([sensor({ temperatureC: 250 })]), path: '/sensors/0/temperatureC', why: 'an impossible temperature' },
    { payload: payload([sensor()], '2026-01-01 12:00:00Z'), path: '/readAt', why: 'a space instead of T' },
    { payload: payload([sensor()], '2026-01-01T12:00:00'), path: '/readAt', why: 'no time zone' },
    { payload: payload([sensor()], '2026-02-30T12:00:00Z'), path: '/readAt', why: 'February 30th' },
    { payload: payload([sensor()], '1970-01-01T00:00:00Z'), path: '/readAt', why: 'an unset device clock' },
    { payload: payload([sensor()], '2100-01-01T00:00:00Z'), path: '/readAt', why: 'the year 2100' },
  ],
});

describe('tpms sensor state', () => {
  it('is OK inside the thresholds and exactly on them (strict inequalities)', () => {
    for (const [psi, celsius] of [[100, 30], [90, 30], [125, 30], [100, 75]] as const)
      assert.deepEqual(tpmsState(psi, celsius), { isWarning: false, isFault: false }, `${psi} psi ${celsius} °C`);
  });

  it('warns below 90 psi, above 125 psi, or above 75 °C', () => {
    for (const [psi, celsius] of [[89.9, 30], [70, 30], [125.1, 30], [100, 75.1], [100, 95]] as const)
      assert.deepEqual(tpmsState(psi, celsius), { isWarning: true, isFault: false }, `${psi} psi ${celsius} °C`);
  });

  it('is faulted below 70 psi or above 95 °C, and a fault is not also a warning', () => {
    for (const [psi, celsius] of [[69.9, 30], [0, 30], [100, 95.1], [69, 80], [130, 96]] as const)
      assert.deepEqual(tpmsState(psi, celsius), { isWarning: false, isFault: true }, `${psi} psi ${celsius} °C`);
  });
});

describe('tpms transform', () => {
  it('makes each sensor a tpms device reading with its wheel, metrics and state', () => {
    const result = tpms.transform(
      VIN,
      payload([sensor({ sensorId: 'A1', pressurePsi: 104.5, temperatureC: 31 }), sensor({ sensorId: 'B2', wheel: 'axle2-right-inner', pressurePsi: 64, temperatureC: 41 })]),
      0,
    );
    assert.deepEqual(result, {
      gps: [],
      devices: [
        {
          kind: 'tpms', serial: 'A1', position: 'axle1-left-outer', timestamp: Date.UTC(2026, 0, 1, 12),
          metrics: { pressurePsi: 104.5, temperatureC: 31 }, state: { isWarning: false, isFault: false },
        },
        {
          kind: 'tpms', serial: 'B2', position: 'axle2-right-inner', timestamp: Date.UTC(2026, 0, 1, 12),
          metrics: { pressurePsi: 64, temperatureC: 41 }, state: { isWarning: false, isFault: true },
        },
      ],
      cargosafe: [],
    });
  });

  it('reads readAt with its offset and milliseconds', () => {
    const [reading] = tpms.transform(VIN, payload([sensor()], '2026-01-01T13:00:00.250+01:00'), 0).devices;
    assert.equal(reading!.timestamp, Date.UTC(2026, 0, 1, 12, 0, 0, 250));
  });

  it('accepts 32 sensors and reports a repeated sensorId where it repeats', () => {
    const sensors = Array.from({ length: 32 }, (_, i) => sensor({ sensorId: `S${i}` }));
    assert.deepEqual(tpms.validate(payload(sensors)), []);
    assert.deepEqual(tpms.validate(payload([sensor({ sensorId: 'X' }), sensor({ sensorId: 'X' })])), [
      { path: '/sensors/1/sensorId', message: 'repeats the sensorId of /sensors/0 ("X")' },
    ]);
  });
});
