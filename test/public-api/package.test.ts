/**
 * The npm package as an integrator gets it (contract 13): `npm pack`, the tarball installed into a
 * fresh project, and then, with no loader and no TypeScript at run time —
 * - plain JavaScript imports every public entry and starts a server whose `/readyz` answers 200;
 * - the `trailwire` command runs from `node_modules/.bin`;
 * - a TypeScript consumer type-checks against the shipped declarations with `skipLibCheck: false`;
 * - tsx is not installed with it (it is a development tool, not a runtime dependency);
 * - it holds no compiled module whose source was deleted.
 * `npm test` builds dist/ first (its `pretest`), so the tarball holds the sources' current build.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../support/cli.ts';

const run = promisify(execFile);
const packageJson = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { exports: Record<string, unknown>; devDependencies: Record<string, string> };
/** The public entries an integrator imports: every `exports` subpath but the file patterns. */
const ENTRIES = Object.keys(packageJson.exports)
  .filter((subpath) => !subpath.includes('*') && subpath !== './package.json')
  .map((subpath) => (subpath === '.' ? 'trailwire' : `trailwire/${subpath.slice(2)}`))
  .concat(['trailwire/products/gps-basic', 'trailwire/products/tpms', 'trailwire/products/cargosafe']);

describe('the packed npm package, installed into a fresh project', { timeout: 240_000 }, () => {
  let project: string;

  before(async () => {
    assert.ok(existsSync(join(REPO_ROOT, 'dist/core/index.js')), 'dist/ is built (npm run build)');
    project = mkdtempSync(join(tmpdir(), 'trailwire-consumer-'));
    // --ignore-scripts: dist/ is already built by `npm test`'s pretest; `prepare` would build it again.
    const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--silent', '--pack-destination', project], { cwd: REPO_ROOT });
    const tarball = join(project, stdout.trim().split('\n').at(-1)!);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    // From npm's cache where it can (CI's `npm ci` filled it). better-sqlite3's install script builds
    // the native addon from source here (about a minute, and a test of better-sqlite3, not of
    // Trailwire), so scripts are skipped and the addon this checkout built is copied in instead.
    await run(
      'npm',
      ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel=error', tarball, `@types/node@${packageJson.devDependencies['@types/node']}`],
      { cwd: project },
    );
    cpSync(join(REPO_ROOT, 'node_modules/better-sqlite3/build'), join(project, 'node_modules/better-sqlite3/build'), { recursive: true });
  });
  after(() => rmSync(project, { recursive: true, force: true }));

  it('ships compiled JavaScript with declarations, and no development tool among its dependencies', () => {
    const installed = join(project, 'node_modules/trailwire');
    assert.ok(existsSync(join(installed, 'dist/core/index.js')));
    assert.ok(existsSync(join(installed, 'dist/core/index.d.ts')));
    assert.ok(existsSync(join(installed, 'dist/core/index.d.ts.map')));
    assert.equal(existsSync(join(project, 'node_modules/tsx')), false, 'tsx is not installed with trailwire');
    assert.equal(existsSync(join(project, 'node_modules/esbuild')), false, 'esbuild is not installed with trailwire');
    assert.equal(existsSync(join(project, 'node_modules/typescript')), false, 'typescript is not installed with trailwire');
  });

  it('plain JavaScript imports every public entry and serves /readyz from it', async () => {
    writeFileSync(
      join(project, 'app.mjs'),
      `${ENTRIES.map((entry, i) => `import * as entry${i} from '${entry}';`).join('\n')}
import { startServer } from 'trailwire/server';
const entries = [${ENTRIES.map((_, i) => `entry${i}`).join(', ')}];
const server = await startServer({ db: './consumer.db', port: 0, grpcPort: 0, host: '127.0.0.1' });
try {
  const ready = await fetch(server.url + '/readyz');
  console.log(JSON.stringify({ exports: entries.map((module) => Object.keys(module).length), readyz: ready.status }));
} finally {
  await server.close();
}
`,
    );
    const { stdout } = await run(process.execPath, ['app.mjs'], { cwd: project, env: { ...process.env, NODE_OPTIONS: '' } });
    const result = JSON.parse(stdout.trim().split('\n').at(-1)!) as { exports: number[]; readyz: number };
    assert.equal(result.readyz, 200);
    assert.equal(result.exports.length, ENTRIES.length);
    for (const [i, count] of result.exports.entries()) assert.ok(count > 0, `${ENTRIES[i]} exports something`);
  });

  it('the trailwire command runs from node_modules/.bin with plain Node', async () => {
    const { stdout } = await run(join(project, 'node_modules/.bin/trailwire'), ['--help'], { cwd: project, env: { ...process.env, NODE_OPTIONS: '' } });
    for (const command of ['serve', 'partners', 'customers', 'queue', 'simulate']) assert.match(stdout, new RegExp(`trailwire ${command}`));
  });

  it('a TypeScript consumer type-checks against the declarations with skipLibCheck: false', async () => {
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, skipLibCheck: false, noEmit: true, types: ['node'] },
        files: ['consumer.ts'],
      }),
    );
    writeFileSync(
      join(project, 'consumer.ts'),
      `import { createTrailwire, defineProduct, type Trailwire } from 'trailwire';
import { createTrailwireMiddleware } from 'trailwire/koa';
import { startServer, type RunningServer } from 'trailwire/server';
import { openSqliteStore } from 'trailwire/sqlite';
import { builtInProducts } from 'trailwire/products';
import gpsBasic from 'trailwire/products/gps-basic';
import { TrailwireClient } from 'trailwire/client';
${ENTRIES.map((entry, i) => `import * as entry${i} from '${entry}';`).join('\n')}
export const entries = [${ENTRIES.map((_, i) => `entry${i}`).join(', ')}];

export const axleLoad = defineProduct<{ kg: number; at: number }>({
  name: 'axle-load',
  description: 'Axle load cells.',
  schema: { type: 'object', required: ['kg', 'at'], properties: { kg: { type: 'number' }, at: { type: 'integer' } } },
  limit: { requests: 60, windowSeconds: 60 },
  examples: [{ kg: 9000, at: 1767268800 }],
  transform: (_vin, payload) => ({
    gps: [],
    devices: [{ kind: 'axle', serial: 'A1', position: null, timestamp: payload.at * 1000, metrics: { kg: payload.kg }, state: { isFault: false, isWarning: payload.kg > 10000 } }],
    cargosafe: [],
  }),
});
export async function embed(): Promise<Trailwire> {
  const store = await openSqliteStore({ file: ':memory:' });
  return createTrailwire({ store, products: [...builtInProducts, gpsBasic, axleLoad] });
}
export const middleware: typeof createTrailwireMiddleware = createTrailwireMiddleware;
export const started: Promise<RunningServer> | undefined = undefined;
export const client: typeof TrailwireClient = TrailwireClient;
export { startServer };
`,
    );
    const tsc = join(REPO_ROOT, 'node_modules/typescript/bin/tsc');
    const checked = await run(process.execPath, [tsc, '-p', '.'], { cwd: project }).catch((error: { stdout: string }) => ({ stdout: error.stdout, failed: true }));
    assert.equal('failed' in checked, false, `tsc reported:\n${checked.stdout}`);
  });

  it("the README's two snippets work there: the JavaScript one serves and stops, the TypeScript one type-checks", async () => {
    const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
    const block = (language: string, marker: string) => {
      const found = [...readme.matchAll(new RegExp('```' + language + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1]!).filter((b) => b.includes(marker));
      assert.equal(found.length, 1, `one ${language} block of the README holds ${marker}`);
      return found[0]!;
    };
    // Free ports instead of the snippet's fixed ones, so that the test never collides with a running server.
    const javascript = block('js', 'node app.mjs').replace('port: 8080', 'port: 0').replace('grpcPort: 50051', 'grpcPort: 0');
    writeFileSync(join(project, 'readme-app.mjs'), javascript);
    const child = spawn(process.execPath, ['readme-app.mjs'], { cwd: project, env: { ...process.env, NODE_OPTIONS: '' }, stdio: ['ignore', 'pipe', 'inherit'] });
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    for await (const line of createInterface({ input: child.stdout! })) {
      assert.match(line, /^serving on http:\/\/127\.0\.0\.1:\d+$|^serving on http:\/\/\[?[\w:.]+\]?:\d+$/);
      break;
    }
    child.kill('SIGTERM');
    assert.equal(await exited, 0, 'SIGTERM closes the server and the process ends by itself');

    writeFileSync(join(project, 'fleet-api.ts'), block('ts', 'fleet-api.ts'));
    writeFileSync(
      join(project, 'tsconfig.readme.json'),
      JSON.stringify({
        compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, skipLibCheck: false, noEmit: true, types: ['node'] },
        files: ['fleet-api.ts'],
      }),
    );
    const tsc = join(REPO_ROOT, 'node_modules/typescript/bin/tsc');
    const checked = await run(process.execPath, [tsc, '-p', 'tsconfig.readme.json'], { cwd: project }).catch((error: { stdout: string }) => ({ stdout: error.stdout, failed: true }));
    assert.equal('failed' in checked, false, `tsc reported:\n${checked.stdout}`);
  });

  it('the tarball holds the build, the protos and the docs, not the tests', () => {
    const installed = join(project, 'node_modules/trailwire');
    assert.ok(existsSync(join(installed, 'proto/livefeed/v1/livefeed.proto')));
    assert.ok(existsSync(join(installed, 'README.md')));
    assert.deepEqual(readdirSync(join(installed, 'dist/test')), ['conformance']);
    assert.equal(existsSync(join(installed, 'test')) && readdirSync(join(installed, 'test')).some((name) => name !== 'conformance'), false);
  });

  it('ships no module whose source is gone (the build starts from an empty dist/)', () => {
    const installed = join(project, 'node_modules/trailwire/dist');
    const modules = (readdirSync(installed, { recursive: true }) as string[]).filter((file) => file.endsWith('.js'));
    assert.ok(modules.length > 50);
    const orphans = modules.filter((file) => !existsSync(join(REPO_ROOT, file.replace(/\.js$/, '.ts'))));
    assert.deepEqual(orphans, []);
  });
});
