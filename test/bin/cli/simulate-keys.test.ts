/**
 * How `trailwire simulate` takes the keys of a remote run (issue 29, finding 8): keys on the command
 * line show in `ps` to every local user, so the environment (`TRAILWIRE_PARTNER_KEY`, one variable,
 * comma-separated) and key files (`--partner-key-file product=file`, `--customer-key-file file`)
 * give the same run, and an error never echoes a key.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { optionsOf } from '../../../bin/cli/simulate-command.ts';
import { generateApiKey } from '../../../core/api-keys.ts';

const directory = mkdtempSync(join(tmpdir(), 'trailwire-simulate-keys-'));
after(() => rmSync(directory, { recursive: true, force: true }));

const base = {
  duration: 5, vins: 2, rate: 1, subscribers: 1, scenario: 'steady', seed: 1, limit: [], window: 2, customers: 1, 'processing-wait': 5,
  target: 'http://127.0.0.1:8080', grpc: '127.0.0.1:50051',
  'partner-key': [], 'customer-key': [], 'partner-key-file': [], 'customer-key-file': [], threshold: [],
} as unknown as Parameters<typeof optionsOf>[0];

describe('simulate keys', () => {
  const gps = generateApiKey('partners');
  const tpms = generateApiKey('partners');
  const customer = generateApiKey('customers');

  it('takes several keys from one environment variable, comma-separated (yargs hands it over as one value)', () => {
    const options = optionsOf({ ...base, 'partner-key': [`gps-basic=${gps},tpms=${tpms}`], 'customer-key': [customer] });
    assert.deepEqual(options.remote?.partnerKeys, { 'gps-basic': gps, tpms });
    assert.deepEqual(options.remote?.customerKeys, [customer]);
  });

  it('reads keys from files, trimmed of the newline an editor leaves', () => {
    writeFileSync(join(directory, 'gps.key'), `${gps}\n`, { mode: 0o600 });
    writeFileSync(join(directory, 'customer.key'), `${customer}\n`, { mode: 0o600 });
    const options = optionsOf({ ...base, 'partner-key-file': [`gps-basic=${join(directory, 'gps.key')}`], 'customer-key-file': [join(directory, 'customer.key')] });
    assert.deepEqual(options.remote?.partnerKeys, { 'gps-basic': gps });
    assert.deepEqual(options.remote?.customerKeys, [customer]);
  });

  it('names the option and the file, never the key', () => {
    assert.throws(() => optionsOf({ ...base, 'customer-key-file': [join(directory, 'missing.key')] }), /--customer-key-file .*missing\.key: cannot be read/);
    writeFileSync(join(directory, 'two.key'), `${customer}\n${customer}\n`);
    assert.throws(() => optionsOf({ ...base, 'customer-key-file': [join(directory, 'two.key')] }), /expected one key and nothing else/);
    assert.throws(
      () => optionsOf({ ...base, 'partner-key': [gps] }),
      (error: Error) => /--partner-key: expected product=key/.test(error.message) && !error.message.includes(gps),
    );
    assert.throws(() => optionsOf({ ...base, target: undefined, grpc: undefined, 'partner-key-file': ['gps-basic=x'] }), /for remote mode/);
  });
});
