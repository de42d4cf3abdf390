import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import cargosafe, { type CargosafePayload } from '../../products/cargosafe/index.ts';
import { runProductConformance } from '../conformance/product.ts';

const VIN = '1HGCM82633A004352';
const reading: CargosafePayload = {
  unitSerial: 'CS-000123', recordedAt: '2026-01-01T12:00:00Z', door: 'closed', loadPercent: 72.5, temperatureC: 4.2, humidityPercent: 61,
};

runProductConformance(cargosafe, {
  invalidPayloads: [
    { payload: { ...reading, door: 'ajar' }, path: '/door', why: 'a door state other than open or closed' },
    { payload: { ...reading, door: true }, path: '/door', why: 'a boolean door' },
    { payload: { ...reading, loadPercent: 100.5 }, path: '/loadPercent', why: 'more than a full load' },
    { payload: { ...reading, loadPercent: -1 }, path: '/loadPercent', why: 'a negative load' },
    { payload: { ...reading, humidityPercent: 101 }, path: '/humidityPercent', why: 'humidity above 100 %' },
    { payload: { ...reading, temperatureC: -80 }, path: '/temperatureC', why: 'a temperature below the sensor range' },
    { payload: { ...reading, unitSerial: '' }, path: '/unitSerial', why: 'an empty serial' },
    { payload: { ...reading, unitSerial: 'CS 1' }, path: '/unitSerial', why: 'a serial with a space' },
    { payload: { ...reading, recordedAt: 'yesterday' }, path: '/recordedAt', why: 'not a date-time' },
    { payload: { ...reading, recordedAt: '1999-12-31T23:59:59Z' }, path: '/recordedAt', why: 'before 2000' },
  ],
});

describe('cargosafe transform', () => {
  it('yields one cargosafe reading of the unit, door as a boolean, measurements unchanged', () => {
    assert.deepEqual(cargosafe.transform(VIN, reading, 0), {
      gps: [],
      devices: [],
      cargosafe: [
        { serial: 'CS-000123', timestamp: Date.UTC(2026, 0, 1, 12), doorOpen: false, loadPercent: 72.5, temperatureC: 4.2, humidityPercent: 61 },
      ],
    });
    assert.equal(cargosafe.transform(VIN, { ...reading, door: 'open' }, 0).cargosafe[0]!.doorOpen, true);
  });

  it('takes the time from recordedAt, not from when it was received', () => {
    const at = cargosafe.transform(VIN, { ...reading, recordedAt: '2026-03-01T00:00:00-05:00' }, Date.UTC(2030, 0, 1)).cargosafe[0]!.timestamp;
    assert.equal(at, Date.UTC(2026, 2, 1, 5));
  });

  it('accepts the range limits 0 and 100', () => {
    assert.deepEqual(cargosafe.validate({ ...reading, loadPercent: 0, humidityPercent: 100 }), []);
    assert.deepEqual(cargosafe.validate({ ...reading, loadPercent: 100, humidityPercent: 0 }), []);
  });

  it('lists the allowed door states in its error', () => {
    assert.deepEqual(cargosafe.validate({ ...reading, door: 'ajar' }), [{ path: '/door', message: 'must be one of "open", "closed"' }]);
  });
});
