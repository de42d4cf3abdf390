/**
 * How tests run the `trailwire` command: `node dist/bin/trailwire.js`, the compiled command a user
 * runs (`npm test` builds first). A test that installs a product module written in TypeScript puts
 * `TS_LOADER` before it, as the product guide's development path does (`node --import tsx`).
 */
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const TRAILWIRE_BIN = fileURLToPath(new URL('../../dist/bin/trailwire.js', import.meta.url));
export const TS_LOADER = ['--import', 'tsx'] as const;
