/**
 * The layers of STYLE.md, read from the imports: the command line (`bin/`) → `simulator/` →
 * `adapters/` → `products/` → `core/`. A file imports from its own layer or below, never above, and
 * no two files import each other (types included). `test/core/import-boundary.test.ts` keeps
 * frameworks and drivers out of the core; this keeps the arrows between folders pointing down.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { it } from 'node:test';
import { REPO_ROOT } from './support/cli.ts';

/** Top to bottom. */
const LAYERS = ['bin', 'simulator', 'adapters', 'products', 'core'] as const;

/** Every source file of the layers, repository-relative, with the files it imports relatively. */
function sourceImports(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const layer of LAYERS)
    for (const file of readdirSync(join(REPO_ROOT, layer), { recursive: true }).map(String)) {
      if (!file.endsWith('.ts')) continue;
      const path = join(layer, file);
      const source = readFileSync(join(REPO_ROOT, path), 'utf8');
      const imports: string[] = [];
      for (const match of source.matchAll(/(?:import|export)[^'"]*?from\s*['"](\.[^'"]+)['"]|import\s*\(?\s*['"](\.[^'"]+)['"]/g))
        imports.push(relative(REPO_ROOT, resolve(REPO_ROOT, dirname(path), match[1] ?? match[2]!)));
      graph.set(path, imports);
    }
  return graph;
}

const layerOf = (path: string) => LAYERS.indexOf(path.split('/')[0] as (typeof LAYERS)[number]);

it('every layer imports only from its own layer or below', () => {
  const graph = sourceImports();
  assert.ok(graph.size > 50, 'found the sources');
  const upward: string[] = [];
  for (const [file, imports] of graph)
    for (const target of imports) {
      const to = layerOf(target);
      if (to === -1) upward.push(`${file} imports ${target}, outside the layers`);
      else if (to < layerOf(file)) upward.push(`${file} (${LAYERS[layerOf(file)]}) imports ${target} (${LAYERS[to]})`);
    }
  assert.deepEqual(upward, []);
});

it('no two files import each other', () => {
  const graph = sourceImports();
  const mutual = new Set<string>();
  for (const [file, imports] of graph)
    for (const target of imports) if (graph.get(target)?.includes(file)) mutual.add([file, target].sort().join(' <-> '));
  assert.deepEqual([...mutual], []);
});
