/**
 * The core stays free of frameworks and drivers (STYLE.md): nothing under core/ imports koa,
 * @koa/*, koa-jwt, @grpc/*, better-sqlite3, pg, ioredis, or anything under adapters/.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';

const FORBIDDEN = [/^koa($|\/)/, /^@koa\//, /^koa-jwt$/, /^@grpc\//, /^better-sqlite3$/, /^pg($|\/)/, /^ioredis$/, /\/adapters\//];
const coreDir = fileURLToPath(new URL('../../core/', import.meta.url));

it('core/ imports no framework, driver or adapter', () => {
  const files = readdirSync(coreDir, { recursive: true }).map(String).filter((file) => file.endsWith('.ts'));
  assert.ok(files.length > 10, 'found the core files');
  const offending: string[] = [];
  for (const file of files) {
    const source = readFileSync(join(coreDir, file), 'utf8');
    for (const match of source.matchAll(/(?:import|export)[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)) {
      const specifier = match[1] ?? match[2] ?? '';
      if (FORBIDDEN.some((pattern) => pattern.test(specifier))) offending.push(`${file} imports ${specifier}`);
    }
  }
  assert.deepEqual(offending, []);
});
