/**
 * Fleet import (issue 40): the file read as CSV or NDJSON with each bad line named by its number;
 * all or nothing by default, the valid lines with `skipInvalid`; every VIN checked as `trailers create`
 * checks it (check digit, another fleet, unassigned data under grants); an idempotent second run; and
 * the change feed told of every trailer changed.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openSqliteStore } from '../../adapters/sqlite/index.ts';
import { TrailwireError } from '../../core/errors.ts';
import { readTrailerImportFile } from '../../core/trailer-import-file.ts';
import { createTrailwire } from '../../core/trailwire.ts';
import { withCheckDigit } from '../../core/vin.ts';

const AT = Date.UTC(2026, 10, 28, 12);
let vins = 0;
const nextVin = () => withCheckDigit(`1TWXP${String(++vins).padStart(12, '0')}`);
/** A VIN whose check digit is wrong. */
const badCheckDigit = (vin: string) => `${vin.slice(0, 8)}${vin[8] === '0' ? '1' : '0'}${vin.slice(9)}`;

async function setup(options: { requireGrants?: boolean } = {}) {
  const store = await openSqliteStore({ file: ':memory:' });
  const trailwire = await createTrailwire({ store, worker: false, clock: { now: () => AT }, partnerIntake: { requireGrants: options.requireGrants ?? false } });
  const { principal: customer } = await trailwire.auth.createCustomer({ name: 'Acme' });
  const fleet = await trailwire.admin.createFleet({ customerId: customer.id, name: 'Reefers' });
  const other = await trailwire.admin.createFleet({ customerId: customer.id, name: 'Flatbeds' });
  return { store, trailwire, fleet, other };
}

describe('readTrailerImportFile', () => {
  it('reads CSV with its columns in any order, quotes undone, blank lines and a BOM ignored, empty cells asking for nothing', () => {
    const file = readTrailerImportFile('\uFEFFunitId,active,vin\r\n"R-1, north",true,1TWXP000000000001\r\n\r\n,,1TWXP000000000002\r\nR-3,FALSE,1TWXP000000000003\r\n');
    assert.equal(file.format, 'csv');
    assert.deepEqual(file.problems, []);
    assert.deepEqual(file.lines, [
      { line: 2, vin: '1TWXP000000000001', unitId: 'R-1, north', active: true },
      { line: 4, vin: '1TWXP000000000002' },
      { line: 5, vin: '1TWXP000000000003', unitId: 'R-3', active: false },
    ]);
  });

  it('names each bad CSV line by its number and reads the others', () => {
    const file = readTrailerImportFile(['vin,unitId,active', 'A,1,yes', 'B,2', '"C,3,true', ',4,true', `D,${'x'.repeat(201)},`, 'E,5,'].join('\n'));
    assert.deepEqual(file.problems.map((problem) => problem.line), [2, 3, 4, 5, 6]);
    assert.match(file.problems[0]!.message, /active/);
    assert.match(file.problems[1]!.message, /2 cells; the header names 3/);
    assert.match(file.problems[3]!.message, /vin: is missing/);
    assert.deepEqual(file.lines, [{ line: 7, vin: 'E', unitId: '5' }]);
  });

  it('refuses a header that does not name vin and unitId, or names an unknown column, and an empty file', () => {
    for (const text of ['vin,active\nA,true', 'vin,unitId,colour\nA,1,red', 'vin,vin,unitId\nA,A,1', '', '\n \n'])
      assert.throws(() => readTrailerImportFile(text), (error: unknown) => error instanceof TrailwireError && error.code === 'validation_failed', JSON.stringify(text));
  });

  it('reads NDJSON, and names a line that is not an object of vin, unitId and active', () => {
    const file = readTrailerImportFile(
      ['{"vin":"A","unitId":"R-1","active":false}', '{"vin":"B","unitId":null}', 'not json', '[1]', '{"vin":"C","colour":"red"}', '{"vin":7}', '{"vin":"D","active":"yes"}'].join('\n'),
    );
    assert.equal(file.format, 'ndjson');
    assert.deepEqual(file.lines, [
      { line: 1, vin: 'A', unitId: 'R-1', active: false },
      { line: 2, vin: 'B' },
    ]);
    assert.deepEqual(file.problems.map((problem) => problem.line), [3, 4, 5, 6, 7]);
  });
});

describe('AdminService.importTrailers', () => {
  it('creates every trailer of a valid file in one go; a second run changes nothing and says so', async () => {
    const { trailwire, store, fleet } = await setup();
    try {
      const [a, b] = [nextVin(), nextVin()];
      const file = readTrailerImportFile(`vin,unitId,active\n${a.toLowerCase()},R-1,\n${b},,false\n`);
      const changesBefore = await store.latestTrailerChange();
      const first = await trailwire.admin.importTrailers({ fleetId: fleet.id, file });
      assert.deepEqual(first, { fleetId: fleet.id, outcome: 'applied', lines: 2, created: 2, assigned: 0, updated: 0, unchanged: 0, invalid: [] });
      const ta = (await store.findTrailerByVin(a))!;
      const tb = (await store.findTrailerByVin(b))!;
      assert.deepEqual([ta.fleetId, ta.unitId, ta.active], [fleet.id, 'R-1', true]);
      assert.deepEqual([tb.fleetId, tb.unitId, tb.active], [fleet.id, null, false]);
      const notes = await store.trailerChangesAfter(changesBefore, 10);
      assert.deepEqual(notes.map((note) => note.trailer.id).sort(), [ta.id, tb.id].sort(), 'the change feed tells the LiveFeed of each');

      const again = await trailwire.admin.importTrailers({ fleetId: fleet.id, file });
      assert.deepEqual(again, { fleetId: fleet.id, outcome: 'unchanged', lines: 2, created: 0, assigned: 0, updated: 0, unchanged: 2, invalid: [] });
      assert.equal(await store.latestTrailerChange(), notes.at(-1)!.seq, 'nothing noted either');

      const edited = await trailwire.admin.importTrailers({ fleetId: fleet.id, file: readTrailerImportFile(`vin,unitId,active\n${a},R-9,false\n${b},,\n`) });
      assert.deepEqual([edited.outcome, edited.updated, edited.unchanged], ['applied', 1, 1]);
      assert.deepEqual([(await store.findTrailerByVin(a))!.unitId, (await store.findTrailerByVin(a))!.active], ['R-9', false]);
    } finally {
      await trailwire.close();
    }
  });

  it('with any bad line applies nothing and names every bad line; skipInvalid applies the good ones', async () => {
    const { trailwire, store, fleet, other } = await setup();
    try {
      const elsewhere = nextVin();
      await trailwire.admin.registerTrailer({ fleetId: other.id, vin: elsewhere });
      const [good, twice] = [nextVin(), nextVin()];
      const text = ['vin,unitId', `${good},G`, `${twice},T`, `${badCheckDigit(nextVin())},X`, 'NOTAVIN,Y', `${elsewhere},E`, `${twice},T2`, 'oops,"'].join('\n');
      const refused = await trailwire.admin.importTrailers({ fleetId: fleet.id, file: readTrailerImportFile(text) });
      assert.equal(refused.outcome, 'refused');
      assert.equal(refused.lines, 7);
      assert.deepEqual(refused.invalid.map((problem) => problem.line), [4, 5, 6, 7, 8]);
      assert.match(refused.invalid[0]!.message, /check digit/);
      assert.match(refused.invalid[2]!.message, new RegExp(`already registered in fleet ${other.id}`));
      assert.match(refused.invalid[3]!.message, /also on line 3/);
      assert.equal(await store.findTrailerByVin(good), null, 'nothing applied');

      const skipped = await trailwire.admin.importTrailers({ fleetId: fleet.id, file: readTrailerImportFile(text), skipInvalid: true });
      assert.deepEqual([skipped.outcome, skipped.created, skipped.invalid.length], ['applied', 2, 5]);
      assert.equal((await store.findTrailerByVin(good))?.fleetId, fleet.id);
      assert.equal((await store.findTrailerByVin(elsewhere))?.fleetId, other.id, 'the other fleet keeps its trailer');
    } finally {
      await trailwire.close();
    }
  });

  it('assigns a VIN intake created unassigned; under grants one holding data is a bad line unless adoptUnassignedData', async () => {
    const { trailwire, store, fleet } = await setup({ requireGrants: true });
    try {
      const [quiet, reported] = [nextVin(), nextVin()];
      for (const vin of [quiet, reported]) await store.applyTelemetry({ vin, at: AT, telemetry: { gps: [], devices: [], cargosafe: [] } });
      await store.applyTelemetry({ vin: reported, at: AT, telemetry: { gps: [{ timestamp: AT - 1000, lat: 1, long: 2, speed: 3, heading: 'N' }], devices: [], cargosafe: [] } });
      const file = readTrailerImportFile(`vin,unitId\n${quiet},Q\n${reported},R\n`);
      const refused = await trailwire.admin.importTrailers({ fleetId: fleet.id, file });
      assert.deepEqual(refused.invalid.map((problem) => problem.line), [3]);
      assert.match(refused.invalid[0]!.message, /--adopt-unassigned-data/);
      assert.equal((await store.findTrailerByVin(quiet))?.fleetId, null, 'all or nothing: the quiet VIN stays unassigned too');

      const adopted = await trailwire.admin.importTrailers({ fleetId: fleet.id, file, adoptUnassignedData: true });
      assert.deepEqual([adopted.outcome, adopted.assigned], ['applied', 2]);
      assert.deepEqual([(await store.findTrailerByVin(reported))?.fleetId, (await store.findTrailerByVin(reported))?.unitId], [fleet.id, 'R']);
    } finally {
      await trailwire.close();
    }
  });

  it('an unknown fleet is not_found', async () => {
    const { trailwire } = await setup();
    try {
      await assert.rejects(trailwire.admin.importTrailers({ fleetId: 999_999, file: readTrailerImportFile(`vin,unitId\n${nextVin()},A\n`) }), (error: unknown) => error instanceof TrailwireError && error.code === 'not_found');
    } finally {
      await trailwire.close();
    }
  });
});
