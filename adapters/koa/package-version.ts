/**
 * The version of the `trailwire` package this code belongs to, for `info.version` of `/openapi.json`.
 * The file sits at a different depth in a checkout (`adapters/koa/`) and in the built package
 * (`dist/adapters/koa/`), so the package file is found by walking up to the nearest `package.json`
 * named `trailwire`.
 */
import { readFileSync } from 'node:fs';

let cached: string | undefined;

/** The package's `version` (read once); `0.0.0` if the file cannot be found (a bundled copy). */
export function packageVersion(): string {
  if (cached !== undefined) return cached;
  for (let dir = new URL('./', import.meta.url); ; dir = new URL('../', dir)) {
    try {
      const manifest = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as { name?: string; version?: string };
      if (manifest.name === 'trailwire' && manifest.version) return (cached = manifest.version);
    } catch {
      // No package.json here: look one level up.
    }
    if (dir.pathname === '/') return (cached = '0.0.0');
  }
}
