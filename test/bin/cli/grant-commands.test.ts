/**
 * `trailwire grants add|remove|list` and `trailwire partners set-limit` (contract 9, issue 29), run
 * as a user runs them: `--json` answers one document, a grant is added once, listed by customer or
 * partner, withdrawn (a second withdrawal is `not_found`), unknown principals are `not_found`, and a
 * partner's own intake budget and new-VIN cap are set, kept when only one is given, and cleared.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runTrailwire } from '../../support/cli.ts';

describe('trailwire grants and partners set-limit', () => {
  const directory = mkdtempSync(join(tmpdir(), 'trailwire-grants-'));
  const db = join(directory, 'trailwire.db');
  after(() => rmSync(directory, { recursive: true, force: true }));
  const run = async (args: string[]) => {
    const result = await runTrailwire([...args, '--db', db, '--json']);
    return { code: result.code, document: JSON.parse(result.stdout), stderr: result.stderr };
  };
  let customer: string;
  let partner: string;
  before(async () => {
    customer = (await run(['customers', 'create', '--name', 'Acme'])).document.id;
    partner = (await run(['partners', 'create', '--name', 'Geo Co', '--product', 'gps-basic'])).document.id;
  });

  it('adds a grant once, lists it, withdraws it, and audits each change', async () => {
    const added = await run(['grants', 'add', '--customer', customer, '--partner', partner]);
    assert.equal(added.code, 0);
    assert.deepEqual({ ...added.document, createdAt: typeof added.document.createdAt }, { customerId: customer, partnerId: partner, createdAt: 'string' });
    assert.match(added.stderr, /"event":"operator.command".*"command":"grants add"/);
    const again = await run(['grants', 'add', '--customer', customer, '--partner', partner]);
    assert.equal(again.code, 0);
    assert.equal(again.document.createdAt, added.document.createdAt, 'the first grant stays');
    assert.deepEqual((await run(['grants', 'list', '--customer', customer])).document, { data: [added.document] });
    assert.deepEqual((await run(['grants', 'list', '--partner', partner])).document, { data: [added.document] });
    assert.deepEqual((await run(['grants', 'list'])).document, { data: [added.document] });

    const removed = await run(['grants', 'remove', '--customer', customer, '--partner', partner]);
    assert.equal(removed.code, 0);
    assert.deepEqual(removed.document, { customerId: customer, partnerId: partner, removed: true });
    assert.deepEqual((await run(['grants', 'list'])).document, { data: [] });
    const twice = await run(['grants', 'remove', '--customer', customer, '--partner', partner]);
    assert.equal(twice.code, 1);
    assert.equal(twice.document.error.code, 'not_found');
  });

  it('refuses unknown customers, partners and options', async () => {
    const unknownCustomer = await run(['grants', 'add', '--customer', 'no-such-customer', '--partner', partner]);
    assert.equal(unknownCustomer.code, 1);
    assert.equal(unknownCustomer.document.error.code, 'not_found');
    const unknownPartner = await run(['grants', 'add', '--customer', customer, '--partner', 'no-such-partner']);
    assert.equal(unknownPartner.document.error.code, 'not_found');
    const typo = await run(['grants', 'add', '--customer', customer, '--partnr', partner]);
    assert.equal(typo.code, 1);
    assert.equal(typo.document.error.code, 'validation_failed');
  });

  it("sets a partner's own intake budget and new-VIN cap, keeps the one not given, and goes back to the defaults", async () => {
    assert.deepEqual((await run(['partners', 'set-limit', '--partner', partner, '--intake-limit', '120000/60'])).document, {
      partnerId: partner,
      intakeLimit: '120000/60',
      newVinsPerDay: null,
    });
    assert.deepEqual((await run(['partners', 'set-limit', '--partner', partner, '--new-vins-per-day', '0'])).document, {
      partnerId: partner,
      intakeLimit: '120000/60',
      newVinsPerDay: 0,
    });
    assert.deepEqual((await run(['partners', 'set-limit', '--partner', partner, '--default'])).document, { partnerId: partner, intakeLimit: null, newVinsPerDay: null });
    const bad = await run(['partners', 'set-limit', '--partner', partner, '--intake-limit', '0/60']);
    assert.equal(bad.code, 1);
    assert.match(bad.document.error.message, /--intake-limit 0\/60: requests must be ≥ 1/);
    const nothing = await run(['partners', 'set-limit', '--partner', partner]);
    assert.equal(nothing.document.error.code, 'validation_failed');
  });
});
