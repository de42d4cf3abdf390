/**
 * The operator's list commands (contract 9, issue 15), run as separate processes beside a running
 * server on the same store — the SQLite file, and PostgreSQL when TRAILWIRE_TEST_DATABASE_URL is set:
 * a VIN that partners report before anyone registered it shows in `trailers list --unassigned` with
 * when it was last seen; `trailers create` assigns it; then it lists in its fleet, with its devices
 * and the GPS history intake kept while it was unassigned. Each list prints `{"data": [...]}` with
 * `--json` and an aligned table without. Needs `npm run build`.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { pino } from 'pino';
import { startServer, type ServerOptions } from '../../../adapters/server/index.ts';
import { withCheckDigit } from '../../../core/vin.ts';
import { type CliResult, runTrailwire } from '../../support/cli.ts';

const DATABASE_URL = process.env.TRAILWIRE_TEST_DATABASE_URL;

interface Backend {
  name: string;
  skip?: string;
  open(): { server: Partial<ServerOptions>; cli: string[]; cleanup(): Promise<void> };
}

const directory = mkdtempSync(join(tmpdir(), 'trailwire-lists-'));
after(() => rmSync(directory, { recursive: true, force: true }));

const BACKENDS: Backend[] = [
  {
    name: 'the SQLite file',
    open() {
      const db = join(directory, `${randomBytes(4).toString('hex')}.db`);
      return { server: { db }, cli: ['--db', db], cleanup: async () => {} };
    },
  },
  {
    name: 'PostgreSQL',
    skip: DATABASE_URL ? undefined : 'TRAILWIRE_TEST_DATABASE_URL is not set',
    open() {
      const schema = `tw_lists_${randomBytes(6).toString('hex')}`;
      return {
        server: { databaseUrl: DATABASE_URL, databaseSchema: schema },
        cli: ['--database-url', DATABASE_URL!, '--database-schema', schema],
        async cleanup() {
          const client = new pg.Client({ connectionString: DATABASE_URL });
          await client.connect();
          await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
          await client.end();
        },
      };
    },
  },
];

/** The one JSON document a `--json` command printed: stdout is exactly one line. */
function documentOf(result: CliResult): any {
  const lines = result.stdout.split('\n');
  assert.deepEqual([lines.length, lines[1]], [2, ''], `exactly one line on stdout, got: ${JSON.stringify(result.stdout)} (stderr: ${result.stderr})`);
  return JSON.parse(lines[0]!);
}

async function listed(args: string[]): Promise<any[]> {
  const result = await runTrailwire([...args, '--json']);
  assert.equal(result.code, 0, result.stderr);
  const document = documentOf(result);
  assert.deepEqual(Object.keys(document), ['data']);
  return document.data;
}

const iso = (epochMs: number): string => new Date(epochMs).toISOString();

for (const backend of BACKENDS) {
  describe(`trailwire ... list beside a running server on ${backend.name}`, { skip: backend.skip }, () => {
    it('finds the VINs intake met unregistered, assigns one, and shows its fleet, devices and history', { timeout: 60_000 }, async () => {
      const { server: where, cli, cleanup } = backend.open();
      const server = await startServer({ ...where, port: 0, grpcPort: 0, host: '127.0.0.1', logger: pino({ level: 'silent' }) });
      try {
        const { trailwire, url } = server;
        const customer = await trailwire.auth.createCustomer({ name: 'Acme Freight' });
        const other = await trailwire.auth.createCustomer({ name: 'Globex' });
        const fleet = await trailwire.admin.createFleet({ customerId: customer.principal.id, name: 'Reefers' });
        const otherFleet = await trailwire.admin.createFleet({ customerId: other.principal.id, name: 'Linehaul' });
        const gps = await trailwire.auth.createPartner({ name: 'Geo Co', product: 'gps-basic' });
        const tpms = await trailwire.auth.createPartner({ name: 'Tiremetrics', product: 'tpms' });

        // Two partners report a VIN nobody registered: a fix 10 minutes ago, tire sensors 5 minutes ago.
        const vin = withCheckDigit(`1TWLS${randomBytes(6).toString('hex').toUpperCase().replace(/[IOQ]/g, '1')}`.slice(0, 17));
        const fixAt = Math.floor(Date.now() / 1000) * 1000 - 10 * 60_000;
        const tiresAt = fixAt + 5 * 60_000;
        const intake = async (apiKey: string, body: unknown): Promise<void> => {
          const auth = await fetch(`${url}/api/v1/partners/authenticate`, { method: 'POST', headers: { 'x-api-key': apiKey } });
          const { access_token: token } = (await auth.json()) as { access_token: string };
          const accepted = await fetch(`${url}/api/v1/telemetry/intake/${vin}`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify(body),
          });
          assert.equal(accepted.status, 202, await accepted.clone().text());
          const location = new URL(accepted.headers.get('location')!, url);
          for (const deadline = Date.now() + 10_000; ; ) {
            const status = (await (await fetch(location, { headers: { authorization: `Bearer ${token}` } })).json()) as { status: string };
            if (status.status === 'processed') return;
            assert.notEqual(status.status, 'failed', JSON.stringify(status));
            assert.ok(Date.now() < deadline, 'intake processed within 10 s');
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
        };
        await intake(gps.apiKey, { timestamp: fixAt / 1000, position: { latitude: 41.8781, longitude: -87.6298 }, speedKph: 96.56, bearingDeg: 90 });
        await intake(tpms.apiKey, {
          readAt: new Date(tiresAt).toISOString(),
          sensors: [
            { sensorId: 'TP-1', wheel: 'axle1-left-outer', pressurePsi: 104, temperatureC: 30 },
            { sensorId: 'TP-2', wheel: 'axle1-right-outer', pressurePsi: 85, temperatureC: 31 },
          ],
        });

        const [unassigned, table, customers, partners, fleets, acmeFleets, unknownCustomer] = await Promise.all([
          listed(['trailers', 'list', '--unassigned', ...cli]),
          runTrailwire(['trailers', 'list', '--unassigned', ...cli]),
          listed(['customers', 'list', ...cli]),
          listed(['partners', 'list', ...cli]),
          listed(['fleets', 'list', ...cli]),
          listed(['fleets', 'list', '--customer', customer.principal.id, ...cli]),
          runTrailwire(['fleets', 'list', '--customer', 'no-such-customer', '--json', ...cli]),
        ]);
        assert.equal(unassigned.length, 1);
        const [found] = unassigned;
        assert.deepEqual(
          { ...found, id: undefined, createdAt: undefined },
          { id: undefined, vin, unitId: null, fleetId: null, status: 'Warning', active: true, lastSeenAt: iso(tiresAt), createdAt: undefined },
          'the newest report of any source is when it was last seen; the low tire warns',
        );

        // The table: a header, then one row, its columns aligned under the header's.
        assert.equal(table.code, 0, table.stderr);
        const [header, row, ...rest] = table.stdout.trimEnd().split('\n');
        assert.deepEqual(rest, []);
        assert.match(header!, /^ID +VIN +UNIT +FLEET +STATUS +LAST SEEN$/);
        for (const column of ['VIN', 'UNIT', 'FLEET', 'STATUS', 'LAST SEEN']) assert.notEqual(row![header!.indexOf(column) - 1], undefined);
        assert.equal(row!.slice(header!.indexOf('VIN')).split(/\s+/)[0], vin);
        assert.equal(row!.slice(header!.indexOf('LAST SEEN')), iso(tiresAt).replace('.000Z', 'Z'), 'the table shows times to the second');
        assert.equal(row!.slice(header!.indexOf('UNIT')).split(/\s+/)[0], '-', 'no unit id shows as -');

        assert.deepEqual(
          customers.map((c) => [c.id, c.name]).sort(),
          [
            [customer.principal.id, 'Acme Freight'],
            [other.principal.id, 'Globex'],
          ].sort(),
        );
        assert.ok(customers.every((c) => Object.keys(c).join() === 'id,name,createdAt' && !Number.isNaN(Date.parse(c.createdAt))));
        assert.deepEqual(
          partners.map((p) => [p.id, p.name, p.product]).sort(),
          [
            [gps.principal.id, 'Geo Co', 'gps-basic'],
            [tpms.principal.id, 'Tiremetrics', 'tpms'],
          ].sort(),
        );
        assert.deepEqual(fleets.map((f) => [f.id, f.customerId, f.name]), [
          [fleet.id, customer.principal.id, 'Reefers'],
          [otherFleet.id, other.principal.id, 'Linehaul'],
        ]);
        assert.deepEqual(acmeFleets.map((f) => f.id), [fleet.id]);
        assert.equal(unknownCustomer.code, 1);
        assert.equal(documentOf(unknownCustomer).error.code, 'not_found');

        // With grants required (as serve --require-grants, through its variable), the partners that sent
        // it are not known to be granted: refused, saying what intake holds (issue 37).
        const refused = await runTrailwire(['trailers', 'create', '--fleet', String(fleet.id), '--vin', vin, '--json', ...cli], { TRAILWIRE_REQUIRE_GRANTS: 'true' });
        assert.equal(refused.code, 1);
        assert.equal(documentOf(refused).error.code, 'conflict');
        assert.match(documentOf(refused).error.message, /GPS fix.*device.*--adopt-unassigned-data/);

        // Assign it (a VIN intake knows is assigned, not created again): it leaves the unassigned list.
        const assigned = await runTrailwire(['trailers', 'create', '--fleet', String(fleet.id), '--vin', vin, '--unit-id', 'R-12', '--json', ...cli]);
        assert.equal(assigned.code, 0, assigned.stderr);
        assert.equal(documentOf(assigned).id, found.id);
        const { adopted } = documentOf(assigned);
        assert.ok(adopted.gpsFixes > 0 && adopted.devices > 0, `the document says what it adopted: ${JSON.stringify(adopted)}`);
        assert.equal(adopted.lastSeenAt, iso(tiresAt));
        const [inFleet, stillUnassigned, everyTrailer, devices, history, missing] = await Promise.all([
          listed(['trailers', 'list', '--fleet', String(fleet.id), ...cli]),
          listed(['trailers', 'list', '--unassigned', ...cli]),
          listed(['trailers', 'list', ...cli]),
          listed(['devices', 'list', '--trailer', found.id, ...cli]),
          listed(['trailers', 'history', vin.toLowerCase(), ...cli]),
          runTrailwire(['devices', 'list', '--trailer', 'no-such-trailer', '--json', ...cli]),
        ]);
        assert.deepEqual(inFleet, [{ ...found, unitId: 'R-12', fleetId: fleet.id }]);
        assert.deepEqual(stillUnassigned, []);
        assert.deepEqual(everyTrailer.map((t) => t.id), [found.id]);
        assert.deepEqual(
          devices.map((d) => [d.trailerId, d.kind, d.serial, d.position, d.state, d.active, d.lastSeenAt]).sort(),
          [
            [found.id, 'tpms', 'TP-1', 'axle1-left-outer', 'OK', true, iso(tiresAt)],
            [found.id, 'tpms', 'TP-2', 'axle1-right-outer', 'Warning', true, iso(tiresAt)],
          ],
        );
        assert.deepEqual(history, [{ timestamp: iso(fixAt), lat: 41.8781, long: -87.6298, speed: 60, heading: 'E' }], 'the fix kept from before it was assigned, in mph');
        assert.equal(missing.code, 1);
        assert.equal(documentOf(missing).error.code, 'not_found');
      } finally {
        await server.close();
        await cleanup();
      }
    });
  });
}

describe('trailwire ... list arguments', () => {
  it('--fleet and --unassigned exclude each other; an unknown fleet is not_found', async () => {
    const db = join(directory, 'arguments.db');
    const [both, unknown] = await Promise.all([
      runTrailwire(['trailers', 'list', '--fleet', '1', '--unassigned', '--json', '--db', db]),
      runTrailwire(['trailers', 'list', '--fleet', '7', '--db', db]),
    ]);
    assert.equal(both.code, 1);
    assert.match(documentOf(both).error.message, /fleet and unassigned are mutually exclusive/);
    assert.equal(unknown.code, 1);
    assert.equal(unknown.stdout, '');
    assert.match(unknown.stderr, /No fleet 7/);
  });
});

describe('trailwire ... list output and control characters (issue 37)', () => {
  // ESC [2J clears the screen, ESC [31m colours, BEL rings, U+009B is CSI in terminals taking 8-bit controls.
  const hostile = 'A\u001b[2J\u001b[31mX\u0007\u009b1m\nfake row';
  const controls = (text: string): string[] => [...text].filter((char) => /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/.test(char));

  it('a table shows control characters escaped, and a value cannot start a row; --json keeps the value and prints no C1 control', async () => {
    const db = join(directory, 'controls.db');
    const created = await runTrailwire(['customers', 'create', '--name', hostile, '--db', db]);
    assert.equal(created.code, 0, created.stderr);
    assert.deepEqual(controls(created.stdout), [], 'the create command echoes the name escaped');

    const table = await runTrailwire(['customers', 'list', '--db', db]);
    assert.equal(table.code, 0, table.stderr);
    assert.deepEqual(controls(table.stdout), [], JSON.stringify(table.stdout));
    const lines = table.stdout.trimEnd().split('\n');
    assert.equal(lines.length, 2, 'a header and one row');
    assert.ok(lines[1]!.includes('A\\u001b[2J\\u001b[31mX\\u0007\\u009b1m\\u000afake row'), lines[1]);

    const json = await runTrailwire(['customers', 'list', '--json', '--db', db]);
    assert.deepEqual(controls(json.stdout), []);
    assert.equal(documentOf(json).data[0].name, hostile, 'the JSON document carries the value itself');
  });
});
