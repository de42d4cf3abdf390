/**
 * The layers of STYLE.md, read from the imports: the command line (`bin/`) → `simulator/` →
 * `adapters/` → `products/` → `core/`. A file imports from its own layer or below, never above; no
 * files import each other in a loop, of two files or more (types included); an adapter uses another
 * adapter only from the server composition and only through its front door (`index.ts`); nothing
 * imports the package by its own name. `test/core/import-boundary.test.ts` keeps frameworks and
 * drivers out of the core; this keeps the arrows between folders pointing down.
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

it('no files import each other in a loop, of two files or more', () => {
  const graph = sourceImports();
  assert.deepEqual(importLoops(graph), []);
});

it('the loop finder finds loops of two and of three files', () => {
  const graph = new Map([
    ['a', ['b']],
    ['b', ['a']],
    ['c', ['d']],
    ['d', ['e']],
    ['e', ['c']],
    ['f', ['c']],
  ]);
  assert.deepEqual(importLoops(graph), ['a -> b -> a', 'c -> d -> e -> c']);
});

/**
 * An adapter is used by others through its front door; only the server composition assembles
 * adapters. `adapters/sql` is no adapter but the row mapping the SQL backends share.
 */
it('only the server composition uses other adapters, and only through their index.ts', () => {
  const graph = sourceImports();
  const reaching: string[] = [];
  for (const [file, imports] of graph) {
    const [layer, adapter] = file.split('/');
    if (layer !== 'adapters') continue;
    for (const target of imports) {
      const [targetLayer, targetAdapter, ...rest] = target.split('/');
      if (targetLayer !== 'adapters' || targetAdapter === adapter || targetAdapter === 'sql') continue;
      if (adapter !== 'server') reaching.push(`${file} uses the ${targetAdapter} adapter (${target}); only adapters/server assembles adapters`);
      else if (rest.join('/') !== 'index.ts') reaching.push(`${file} reaches into ${target}; use adapters/${targetAdapter}/index.ts`);
    }
  }
  assert.deepEqual(reaching, []);
});

it('no source file imports the package by its own name', () => {
  const selfImports: string[] = [];
  for (const layer of LAYERS)
    for (const file of readdirSync(join(REPO_ROOT, layer), { recursive: true }).map(String)) {
      if (!file.endsWith('.ts')) continue;
      const source = readFileSync(join(REPO_ROOT, layer, file), 'utf8');
      for (const match of source.matchAll(/(?:from|import\s*\(?)\s*['"](trailwire(?:\/[^'"]*)?)['"]/g)) selfImports.push(`${layer}/${file} imports ${match[1]}`);
    }
  assert.deepEqual(selfImports, []);
});

/** Each loop of the graph once, as `a -> b -> ... -> a`, starting at its smallest file (strongly connected parts of two or more files). */
function importLoops(graph: ReadonlyMap<string, readonly string[]>): string[] {
  // Tarjan's algorithm: every strongly connected part of more than one file is a loop.
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const loops: string[] = [];
  const visit = (file: string): void => {
    index.set(file, counter);
    low.set(file, counter++);
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file) ?? []) {
      if (!graph.has(target)) continue;
      if (!index.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) low.set(file, Math.min(low.get(file)!, index.get(target)!));
    }
    if (low.get(file) !== index.get(file)) return;
    const part: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      part.push(member);
    } while (member !== file);
    if (part.length > 1) loops.push(describeLoop(part.sort(), graph));
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return loops.sort();
}

/** One path around a loop's files, from the smallest back to it. */
function describeLoop(files: readonly string[], graph: ReadonlyMap<string, readonly string[]>): string {
  const inLoop = new Set(files);
  const path = [files[0]!];
  const seen = new Set(path);
  for (;;) {
    const next = (graph.get(path.at(-1)!) ?? []).filter((target) => inLoop.has(target));
    const back = next.find((target) => target === files[0]);
    const onward = next.find((target) => !seen.has(target));
    if (onward === undefined || (back !== undefined && path.length === files.length)) return [...path, files[0]].join(' -> ');
    path.push(onward);
    seen.add(onward);
  }
}
