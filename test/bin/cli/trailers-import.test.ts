/**
 * `trailwire trailers import` run as a user runs it (contract 9, issue 40): a CSV file or NDJSON on
 * stdin, a `--json` summary, a second run that changes nothing and says so, a file with bad lines
 * refused whole with every bad line named (exit status 1), and `--skip-invalid` importing the rest.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { withCheckDigit } from '../../../core/vin.ts';
import { runTrailwire } from '../../support/cli.ts';

const vinOf = (n: number) => withCheckDigit(`1TWCL2000CL${String(n).padStart(6, '0')}`);

describe('trailwire trailers import', () => {
  let dir: string;
  let db: string;
  let fleetId: number;
  const run = (args: string[], input?: string) => runTrailwire([...args, '--db', db], {}, [], input);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'trailwire-import-'));
    db = join(dir, 'import.db');
    const customer = JSON.parse((await run(['customers', 'create', '--name', 'Acme', '--json'])).stdout);
    fleetId = JSON.parse((await run(['fleets', 'create', '--customer', customer.id, '--name', 'Reefers', '--json'])).stdout).id;
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('imports a CSV file with a --json summary; the same file again changes nothing and says so', async () => {
    const file = join(dir, 'fleet.csv');
    writeFileSync(file, `vin,unitId,active\n${vinOf(1)},R-1,\n${vinOf(2)},R-2,false\n${vinOf(3)},,\n`);
    const first = await run(['trailers', 'import', '--fleet', String(fleetId), '--file', file, '--json']);
    assert.equal(first.code, 0, first.stderr);
    assert.deepEqual(JSON.parse(first.stdout), { fleetId, outcome: 'applied', lines: 3, created: 3, assigned: 0, updated: 0, unchanged: 0, invalid: [] });
    assert.match(first.stderr, /"command":"trailers import"/, 'an audit line');

    const again = await run(['trailers', 'import', '--fleet', String(fleetId), '--file', file]);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, new RegExp(`^fleet ${fleetId}: nothing changed, every trailer of the file is already as it says \\(3 unchanged\\)\\n$`));
    const listed = JSON.parse((await run(['trailers', 'list', '--fleet', String(fleetId), '--json'])).stdout).data;
    assert.deepEqual(listed.map((trailer: { vin: string }) => trailer.vin).sort(), [vinOf(1), vinOf(2), vinOf(3)].sort());
  });

  it('refuses a file with bad lines whole, naming each by its number; --skip-invalid imports the rest', async () => {
    const ndjson = [`{"vin":"${vinOf(10)}","unitId":"N-10"}`, '{"vin":"NOT-A-VIN"}', `{"vin":"${vinOf(11)}","active":"no"}`, `{"vin":"${vinOf(12)}"}`].join('\n');
    const refused = await run(['trailers', 'import', '--fleet', String(fleetId), '--file', '-'], ndjson);
    assert.equal(refused.code, 1);
    assert.equal(refused.stdout, '');
    assert.match(refused.stderr, /nothing imported into fleet \d+: 2 of 4 lines invalid/);
    assert.match(refused.stderr, /\n {2}line 2: vin: /);
    assert.match(refused.stderr, /\n {2}line 3: active: /);
    const listed = JSON.parse((await run(['trailers', 'list', '--fleet', String(fleetId), '--json'])).stdout).data;
    assert.ok(!listed.some((trailer: { vin: string }) => trailer.vin === vinOf(10)), 'nothing applied');

    const json = await run(['trailers', 'import', '--fleet', String(fleetId), '--file', '-', '--json'], ndjson);
    assert.equal(json.code, 1);
    assert.deepEqual(JSON.parse(json.stdout).invalid.map((problem: { line: number }) => problem.line), [2, 3]);

    const skipped = await run(['trailers', 'import', '--fleet', String(fleetId), '--file', '-', '--skip-invalid'], ndjson);
    assert.equal(skipped.code, 0, skipped.stderr);
    assert.match(skipped.stdout, /: 2 created, 0 assigned, 0 updated, 0 unchanged; skipped 2 invalid lines:\n {2}line 2: .*\n {2}line 3: /);
  });

  it('a missing file or an unknown fleet is an error naming it', async () => {
    const missing = await run(['trailers', 'import', '--fleet', String(fleetId), '--file', join(dir, 'nope.csv'), '--json']);
    assert.equal(missing.code, 1);
    assert.equal(JSON.parse(missing.stdout).error.code, 'validation_failed');
    const file = join(dir, 'one.csv');
    writeFileSync(file, `vin,unitId\n${vinOf(20)},A\n`);
    const unknown = await run(['trailers', 'import', '--fleet', '999999', '--file', file]);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /No fleet 999999/);
  });
});
