/**
 * Test support: a product whose transform fails on demand — for `n > 0` while `control.failing` is
 * set, with `flaky refuses <n>` — the retry and dead-letter paths. Its example (`n: 0`) always
 * transforms, as the product registry checks at start.
 */
import { defineProduct } from '../../core/products.ts';

export function flakyProduct(failing = true) {
  const control = { failing };
  const product = defineProduct<{ n: number }>({
    name: 'flaky',
    description: 'A test product that fails on demand.',
    schema: { type: 'object', additionalProperties: false, required: ['n'], properties: { n: { type: 'integer' } } },
    limit: { requests: 100, windowSeconds: 60 },
    examples: [{ n: 0 }],
    transform(_vin, payload, receivedAt) {
      if (control.failing && payload.n > 0) throw new Error(`flaky refuses ${payload.n}`);
      return { gps: [{ timestamp: receivedAt + payload.n, lat: 1, long: 2, speed: 3, heading: 'N' }], devices: [], cargosafe: [] };
    },
  });
  return { product, control };
}
