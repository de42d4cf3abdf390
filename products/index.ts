/**
 * `trailwire/products`: the products shipped with Trailwire (contract 10). A server registers these
 * by default; each is also its own module (`trailwire/products/gps-basic`, `.../tpms`,
 * `.../cargosafe`) whose default export is the product and which exports its payload type. Users
 * write their own with `defineProduct` from `trailwire/core` (docs/writing-a-product.md,
 * `examples/custom-product`).
 */
import type { Product } from '../core/products.ts';
import cargosafe from './cargosafe/index.ts';
import gpsBasic from './gps-basic/index.ts';
import tpms from './tpms/index.ts';

/**
 * `gpsBasic` (`gps-basic`: a GPS tracker's fix), `tpms` (tire-pressure sensors, one device each) and
 * `cargosafe` (a cargo-safety unit's door, load, temperature and humidity).
 */
export { cargosafe, gpsBasic, tpms };

/** `gps-basic`, `tpms` and `cargosafe`, in that order: what `startServer` installs unless told otherwise. */
export const builtInProducts: readonly Product<any>[] = Object.freeze([gpsBasic, tpms, cargosafe]);
