/**
 * The names of the products shipped with Trailwire, without loading them (their schemas compile at
 * load): the command line lists them in `--help`. A test holds this list to `builtInProducts`.
 */
export const BUILT_IN_PRODUCT_NAMES = ['gps-basic', 'tpms', 'cargosafe'] as const;
