/**
 * No declared dependency goes unused (issue 31, finding 8: p-queue stayed in `dependencies` long after
 * the code that imported it was gone). A runtime dependency must be named by the shipped code (`core`,
 * `adapters`, `products`, `simulator`, `bin`: an import, or a file path into the package as the pages
 * serve Leaflet and the atlases); a development dependency by the tests, benches, examples, CI script or
 * package scripts (an import, or one of its commands, as the tests run `redocly` and `spectral`). A
 * `@types/x` package counts as used when `x` is (or Node's own, for `@types/node`).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { it } from 'node:test';
import { REPO_ROOT } from './support/cli.ts';

const SHIPPED = ['core', 'adapters', 'products', 'simulator', 'bin'];
const DEVELOPMENT = [...SHIPPED, 'test', 'bench', 'examples', '.ci'];
const TEXT = /\.(ts|js|mjs|cjs|html|css|json|sh)$|^run$/;

function filesUnder(dir: string): string[] {
  return readdirSync(join(REPO_ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : filesUnder(path);
    return TEXT.test(entry.name) && statSync(join(REPO_ROOT, path)).size < 2_000_000 ? [path] : [];
  });
}

const manifest = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8'));
const textOf = (dirs: string[]) => dirs.flatMap(filesUnder).map((file) => readFileSync(join(REPO_ROOT, file), 'utf8')).join('\n');

/** The names under which code refers to `name`: the name itself (as a module specifier) and its commands. */
function referencesOf(name: string): RegExp[] {
  const quoted = (text: string) => new RegExp(`['"\`/ ]${text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}(['"\`/]|$)`, 'm');
  const references = [quoted(name)];
  try {
    const { bin } = JSON.parse(readFileSync(join(REPO_ROOT, 'node_modules', name, 'package.json'), 'utf8'));
    for (const command of typeof bin === 'string' ? [name.split('/').pop()!] : Object.keys(bin ?? {})) references.push(quoted(command));
  } catch {
    // Not installed: only the name can refer to it.
  }
  return references;
}

function unused(dependencies: Record<string, string>, text: string): string[] {
  const used = (name: string): boolean => {
    const typed = /^@types\/(.+)$/.exec(name);
    if (typed) return typed[1] === 'node' || used(typed[1]!.includes('__') ? `@${typed[1]!.replace('__', '/')}` : typed[1]!);
    return referencesOf(name).some((reference) => reference.test(text));
  };
  return Object.keys(dependencies).filter((name) => !used(name));
}

it('every runtime dependency is used by the shipped code', () => {
  assert.deepEqual(unused(manifest.dependencies, textOf(SHIPPED)), []);
});

it('every development dependency is used by the tests, benches, examples, CI or package scripts', () => {
  const text = `${textOf(DEVELOPMENT)}\n${Object.values(manifest.scripts as Record<string, string>).map((script) => ` ${script} `).join('\n')}`;
  assert.deepEqual(unused(manifest.devDependencies, text), []);
});

it('every dependency with an install script is reviewed in allowScripts, and the install analytics are denied (issue 37)', () => {
  // npm 11 still runs a script merely left out of allowScripts (with a warning); a `false` entry is skipped.
  const lock = JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8'));
  const withScripts = Object.entries<{ hasInstallScript?: boolean }>(lock.packages)
    .filter(([path, entry]) => path !== '' && entry.hasInstallScript)
    .map(([path]) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length));
  assert.ok(withScripts.includes('@scarf/scarf'), 'the lockfile still names the analytics package (else this check checks nothing)');
  assert.deepEqual(withScripts.filter((name) => typeof manifest.allowScripts?.[name] !== 'boolean'), [], 'not reviewed in allowScripts');
  assert.equal(manifest.allowScripts['@scarf/scarf'], false, '@scarf/scarf is denied: its postinstall reports the install to a third party');
  assert.equal(manifest.scarfSettings?.enabled, false);
});

it('the check can fail: a name nothing refers to is reported', () => {
  assert.deepEqual(unused({ 'left-pad-nowhere': '1.0.0' }, textOf(['bin'])), ['left-pad-nowhere']);
});
