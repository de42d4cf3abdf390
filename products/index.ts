/**
 * The products shipped with Trailwire (contract 10). A server registers these by default; operators
 * add their own with `loadProductModule` and users write them with `defineProduct` (see
 * `examples/custom-product`).
 */
import type { Product } from '../core/products.ts';
import cargosafe from './cargosafe/index.ts';
import gpsBasic from './gps-basic/index.ts';
import tpms from './tpms/index.ts';

export { cargosafe, gpsBasic, tpms };

/** `gps-basic`, `tpms` and `cargosafe`, in that order. */
export const builtInProducts: readonly Product<any>[] = Object.freeze([gpsBasic, tpms, cargosafe]);
