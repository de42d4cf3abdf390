/**
 * examples/typed-client runs as its README says (issue 31): the committed `openapi.d.ts` is what
 * `openapi-typescript` generates from a running server's `/openapi.json` today (so the document and the
 * example cannot drift apart), the example type-checks against it (`npm run typecheck` covers
 * `examples/`; here `tsc` is run on the example alone), and it prints the customer's fleet and trailer.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { it } from 'node:test';
import { pino } from 'pino';
import { startServer } from '../../adapters/server/index.ts';
import { uniqueVin } from '../support/fixtures.ts';
import { REPO_ROOT } from './run-example.ts';

const run = promisify(execFile);
const bin = (name: string) => join(REPO_ROOT, 'node_modules', '.bin', name);
const TSC_OPTIONS = ['--noEmit', '--strict', '--noUncheckedIndexedAccess', '--target', 'ES2022', '--module', 'NodeNext', '--moduleResolution', 'NodeNext',
  '--skipLibCheck', '--allowImportingTsExtensions', '--verbatimModuleSyntax', '--types', 'node'];

it('examples/typed-client: the generated types are current, type-check, and the client lists the fleet', {
  timeout: 120_000,
  skip: existsSync(bin('openapi-typescript')) ? false : 'openapi-typescript is not installed in node_modules: run npm ci',
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'trailwire-typed-client-'));
  const server = await startServer({ db: join(dir, 'ex.db'), port: 0, grpcPort: 0, host: '127.0.0.1', logger: pino({ level: 'silent' }) });
  try {
    const { trailwire } = server;
    const customer = await trailwire.auth.createCustomer({ name: 'Example Co' });
    const fleet = await trailwire.admin.createFleet({ customerId: customer.principal.id, name: 'Example fleet' });
    const vin = uniqueVin();
    await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin, unitId: 'EX-1' });

    const generated = join(dir, 'openapi.d.ts');
    const [, typecheck] = await Promise.all([
      run(bin('openapi-typescript'), [`${server.url}/openapi.json`, '-o', generated], { cwd: REPO_ROOT }),
      // The example alone, with the project's compiler options (tsconfig.json), against the committed types.
      run(bin('tsc'), [...TSC_OPTIONS, 'examples/typed-client/index.ts'], { cwd: REPO_ROOT }).catch((error) => error),
    ]);
    assert.equal(
      readFileSync(generated, 'utf8'),
      readFileSync(join(REPO_ROOT, 'examples/typed-client/openapi.d.ts'), 'utf8'),
      'examples/typed-client/openapi.d.ts is stale: regenerate it as its README says',
    );
    assert.equal(typecheck.code ?? 0, 0, `tsc: ${typecheck.stdout}`);

    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'examples/typed-client/index.ts', '--api-key', customer.apiKey, '--url', server.url], { cwd: REPO_ROOT });
    assert.deepEqual(stdout.trim().split('\n'), [`fleet ${fleet.id} Example fleet`, `  EX-1 ${vin} OK no fix yet`]);
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
