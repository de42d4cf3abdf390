/** The command line lists the built-in products by name without loading them; the list must match them. */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { BUILT_IN_PRODUCT_NAMES } from '../../products/built-in-names.ts';
import { builtInProducts } from '../../products/index.ts';

it('BUILT_IN_PRODUCT_NAMES names the built-in products, in their order', () => {
  assert.deepEqual([...BUILT_IN_PRODUCT_NAMES], builtInProducts.map((product) => product.name));
});
