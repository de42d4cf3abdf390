import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { createProductRegistry, loadProductModule } from '../../core/products.ts';
import reefer from '../../examples/custom-product/index.ts';
import { builtInProducts } from '../../products/index.ts';
import { runProductConformance } from '../conformance/product.ts';

const report = { reeferId: 'RF-2231', reportedAt: '2026-01-01T12:00:00Z', setpointC: -18, returnAirC: -16.5, fuelPercent: 64 };
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

runProductConformance(reefer, {
  invalidPayloads: [
    { payload: { ...report, fuelPercent: 120 }, path: '/fuelPercent', why: 'a fuel level above 100 %' },
    { payload: { ...report, reportedAt: 'noon' }, path: '/reportedAt', why: 'not a date-time' },
    { payload: { ...report, reeferId: 'RF 2231' }, path: '/reeferId', why: 'a space in the id' },
  ],
});

describe('the custom product example', () => {
  const stateOf = (overrides: Partial<typeof report>) => reefer.transform('1HGCM82633A004352', { ...report, ...overrides }, 0).devices[0]!.state;

  it('yields a reefer device reading whose state follows the drift from the setpoint and the fuel level', () => {
    assert.deepEqual(stateOf({}), { isWarning: false, isFault: false });
    assert.deepEqual(stateOf({ returnAirC: -15.9 }), { isWarning: true, isFault: false });
    assert.deepEqual(stateOf({ fuelPercent: 10 }), { isWarning: true, isFault: false });
    assert.deepEqual(stateOf({ returnAirC: -12.9, fuelPercent: 10 }), { isWarning: false, isFault: true });
  });

  it('loads by path as a server would, and installs next to the built-in products', async () => {
    const loaded = await loadProductModule('./examples/custom-product/index.ts', { cwd: repoRoot });
    assert.equal(loaded, reefer, 'the same module instance');
    const registry = createProductRegistry([...builtInProducts, loaded], { limitOverrides: { reefer: { requests: 20 } } });
    assert.deepEqual(registry.list().map((p) => p.name), ['gps-basic', 'tpms', 'cargosafe', 'reefer']);
    assert.deepEqual(registry.limitOf('reefer'), { requests: 20, windowSeconds: 60 });
    assert.equal(registry.transform('reefer', '1HGCM82633A004352', report, 0).devices[0]!.kind, 'reefer');
  });
});
