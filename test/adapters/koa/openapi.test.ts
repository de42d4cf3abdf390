/**
 * `/openapi.json` is a document a code generator and a linter can use (issue 31, finding 3): a stable
 * camelCase `operationId` on every operation, declared tags, `servers`, `security: []` on the public
 * operations, 405 and 503 declared with their headers, the package version as `info.version`, and
 * descriptions that render (no bare `<name>` that Markdown renderers take for an HTML tag). Then the
 * served document goes through Redocly's and Spectral's linters (`redocly.yaml`, `.spectral.yaml`),
 * which must find no error. The response-validation hook of the test client
 * (`test/support/openapi-responses.ts`) is checked to refuse what the document does not say.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { responseChecker } from '../../support/openapi-responses.ts';
import { REPO_ROOT } from '../../support/cli.ts';
import { startTestApp, type TestApp } from '../../support/test-app.ts';

const run = promisify(execFile);
type Json = Record<string, any>;

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];

function operationsOf(document: Json): { path: string; method: string; operation: Json }[] {
  return Object.entries(document.paths as Record<string, Json>).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, operation]) => ({ path, method, operation })),
  );
}

/** Every `description` and `summary` string anywhere in the document, with where it is. */
function proseOf(node: unknown, where = ''): { where: string; text: string }[] {
  if (Array.isArray(node)) return node.flatMap((item, index) => proseOf(item, `${where}/${index}`));
  if (node === null || typeof node !== 'object') return [];
  return Object.entries(node).flatMap(([key, value]) =>
    (key === 'description' || key === 'summary') && typeof value === 'string' ? [{ where: `${where}/${key}`, text: value }] : proseOf(value, `${where}/${key}`),
  );
}

describe('GET /openapi.json, for generators and linters', () => {
  let app: TestApp;
  let document: Json;
  let dir: string;
  before(async () => {
    app = await startTestApp();
    document = (await app.call('GET', '/openapi.json')).body;
    dir = mkdtempSync(join(tmpdir(), 'trailwire-openapi-'));
  });
  after(async () => {
    await app.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('every operation has a unique camelCase operationId, declared tags and a security requirement', () => {
    const operations = operationsOf(document);
    assert.ok(operations.length >= 20, `${operations.length} operations`);
    const ids = operations.map(({ operation }) => operation.operationId);
    for (const [index, id] of ids.entries()) assert.match(String(id), /^[a-z][a-zA-Z0-9]*$/, `${operations[index]!.method} ${operations[index]!.path}`);
    assert.equal(new Set(ids).size, ids.length, 'operationIds are unique');
    const declared = new Map((document.tags as { name: string; description: string }[]).map((tag) => [tag.name, tag.description]));
    for (const { path, operation } of operations) {
      for (const tag of operation.tags) assert.ok(declared.get(tag), `${path}: tag ${tag} is declared with a description`);
      assert.ok(Array.isArray(operation.security), `${path} says its security (public: [])`);
    }
    for (const path of ['/healthz', '/readyz', '/metrics', '/openapi.json', '/.well-known/jwks.json'])
      assert.deepEqual(document.paths[path].get.security, [], `${path} is public`);
    assert.deepEqual(document.paths['/api/v1/fleets'].get.security, [{ customerToken: [] }]);
  });

  it('stable names: the operationIds a generated client calls do not change under it', () => {
    const byRoute = Object.fromEntries(operationsOf(document).map(({ path, method, operation }) => [`${method.toUpperCase()} ${path}`, operation.operationId]));
    assert.equal(byRoute['POST /api/v1/customers/authenticate'], 'authenticateCustomer');
    assert.equal(byRoute['PUT /api/v1/partners/rotate'], 'rotatePartnerKey');
    assert.equal(byRoute['GET /api/v1/fleets'], 'listFleets');
    assert.equal(byRoute['GET /api/v1/trailers/{fleetOrTrailer}'], 'getTrailerOrFleetTrailers');
    assert.equal(byRoute['POST /api/v1/telemetry/intake/{VIN}'], 'sendTelemetry');
    assert.equal(byRoute['GET /api/v1/live'], 'streamLiveUpdates');
  });

  it('servers, the package version, and 405 / 503 declared with Allow / Retry-After', () => {
    assert.deepEqual(document.servers.map((server: Json) => server.url), ['/']);
    const { version } = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8'));
    assert.equal(document.info.version, version);
    for (const { path, method, operation } of operationsOf(document)) {
      assert.equal(operation.responses['405']?.$ref, '#/components/responses/MethodNotAllowed', `${method} ${path} declares 405`);
      const unavailable = operation.responses['503'];
      if (unavailable) assert.equal(unavailable.headers['Retry-After'].required, true, `${path}: a 503 carries Retry-After`);
      else assert.match(path, /^\/(healthz|metrics|openapi\.json|\.well-known\/jwks\.json)$/, `${method} ${path} declares 503 (it reads the store)`);
    }
    assert.equal(document.components.responses.MethodNotAllowed.headers.Allow.required, true);
  });

  it('descriptions render: no bare <word> outside code spans (Markdown renderers take it for HTML)', () => {
    const prose = proseOf(document);
    assert.ok(prose.length > 50);
    for (const { where, text } of prose) {
      const outsideCode = text.replace(/`[^`]*`/g, '');
      assert.doesNotMatch(outsideCode, /<[a-zA-Z/!]/, `${where}: ${text}`);
    }
    assert.match(document.components.securitySchemes.partnerToken.description, /`product:\{name\}`/);
  });

  it('the test client refuses an undeclared status, a body off its schema and a missing Retry-After', () => {
    const tampered = structuredClone(document);
    delete tampered.paths['/api/v1/fleets'].get.responses['401'];
    const checker = responseChecker(tampered);
    const problem = { type: document.components.schemas.Problem.properties.type.enum[0], title: 'x', status: 401, detail: 'x' };
    const problemHeaders = new Headers({ 'content-type': 'application/problem+json' });
    assert.throws(() => checker.check('GET', '/api/v1/fleets', 401, problemHeaders, problem), /status 401 is not declared/);
    assert.throws(() => checker.check('GET', '/api/v1/fleets', 200, new Headers({ 'content-type': 'application/json' }), { data: 1 }), /does not match/);
    assert.throws(() => checker.check('GET', '/api/v1/fleets', 503, problemHeaders, { ...problem, status: 503 }), /Retry-After is missing/);
    assert.throws(() => checker.check('DELETE', '/api/v1/fleets', 405, problemHeaders, { ...problem, status: 405 }), /Allow/);
    checker.check('GET', '/api/v1/fleets', 200, new Headers({ 'content-type': 'application/json' }), { data: [] });
  });

  // Each linter is a node process of 5 to 15 s: they run side by side. `npm ci` installs both (they are
  // devDependencies); a node_modules from before they were added says so rather than failing.
  const bin = (name: string) => join(REPO_ROOT, 'node_modules', '.bin', name);
  const linters = existsSync(bin('redocly')) && existsSync(bin('spectral'));
  it('Redocly (recommended rules) and Spectral (spectral:oas) find no error and no warning in the served document', {
    timeout: 120_000,
    skip: linters ? false : 'the linters are not installed in node_modules: run npm ci',
  }, async () => {
    const file = join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(document, null, 2));
    const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' };
    const [redocly, spectral] = await Promise.all([
      run(bin('redocly'), ['lint', '--config', join(REPO_ROOT, 'redocly.yaml'), '--format', 'json', file], { cwd: dir, env, maxBuffer: 16 << 20 }).catch((error) => error),
      run(bin('spectral'), ['lint', '--ruleset', join(REPO_ROOT, '.spectral.yaml'), '--format', 'json', '--quiet', file], { cwd: dir, env, maxBuffer: 16 << 20 }).catch((error) => error),
    ]);
    const redoclyReport = JSON.parse(redocly.stdout);
    // Warnings too (issue 31): a rule that does not fit is turned off in redocly.yaml or .spectral.yaml, with the reason.
    const redoclyFindings = redoclyReport.problems.filter((problem: Json) => problem.severity === 'error' || problem.severity === 'warn');
    assert.deepEqual(redoclyFindings.map((problem: Json) => `${problem.severity} ${problem.ruleId}: ${problem.message}`), [], 'Redocly errors and warnings');
    assert.equal(redocly.code ?? 0, 0, redocly.stderr);
    // Spectral's severities: 0 error, 1 warning, 2 info, 3 hint.
    const spectralReport = JSON.parse(spectral.stdout || '[]');
    const spectralFindings = spectralReport.filter((result: Json) => result.severity <= 1);
    assert.deepEqual(spectralFindings.map((result: Json) => `${result.code}: ${result.message} at ${result.path.join('.')}`), [], 'Spectral errors and warnings');
    assert.equal(spectral.code ?? 0, 0, spectral.stderr);
  });
});
