/**
 * A mistyped option never passes silently (contract 9, issue 31 finding 7): every command answers an
 * unknown option with exit status 1 and a message naming it and the nearest option it knows, and does
 * nothing else — `serve --prot 1234` does not start on 8080, a mistyped `create` creates nothing. The
 * table has one row per command; a test holds it to the commands `--help` lists, so a new command
 * needs its row. `TRAILWIRE_*` variables meant for another command (or for nothing) do not count.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runTrailwire } from '../../support/cli.ts';

/** One row per command: the arguments with one mistyped option, what is typed, and the option meant. */
const MISTYPED: { command: string; args: string[]; typed: string; meant: string | null }[] = [
  { command: 'serve', args: ['serve', '--prot', '1234'], typed: 'prot', meant: 'port' },
  { command: 'simulate', args: ['simulate', '--duraton', '1'], typed: 'duraton', meant: 'duration' },
  { command: 'simulate merge', args: ['simulate', 'merge', 'run.json', '--thresold', 'p99<1s'], typed: 'thresold', meant: 'threshold' },
  { command: 'partners create', args: ['partners', 'create', '--name', 'P', '--product', 'gps-basic', '--prodcut', 'tpms'], typed: 'prodcut', meant: 'product' },
  { command: 'partners list', args: ['partners', 'list', '--jsno'], typed: 'jsno', meant: 'json' },
  { command: 'customers create', args: ['customers', 'create', '--name', 'C', '--nmae', 'D'], typed: 'nmae', meant: 'name' },
  { command: 'customers list', args: ['customers', 'list', '--frobnicate'], typed: 'frobnicate', meant: null },
  { command: 'fleets create', args: ['fleets', 'create', '--customer', 'c', '--name', 'F', '--custmer', 'd'], typed: 'custmer', meant: 'customer' },
  { command: 'fleets list', args: ['fleets', 'list', '--custome', 'c'], typed: 'custome', meant: 'customer' },
  { command: 'trailers create', args: ['trailers', 'create', '--fleet', '1', '--vin', '1TWCL1000CL000001', '--unit-di', 'U'], typed: 'unit-di', meant: 'unit-id' },
  { command: 'trailers import', args: ['trailers', 'import', '--fleet', '1', '--file', 'fleet.csv', '--skip-invaild'], typed: 'skip-invaild', meant: 'skip-invalid' },
  { command: 'trailers list', args: ['trailers', 'list', '--unasigned'], typed: 'unasigned', meant: 'unassigned' },
  { command: 'trailers history', args: ['trailers', 'history', 't-1', '--huors', '2'], typed: 'huors', meant: 'hours' },
  { command: 'trailers activate', args: ['trailers', 'activate', 't-1', '--jsn'], typed: 'jsn', meant: 'json' },
  { command: 'trailers deactivate', args: ['trailers', 'deactivate', 't-1', '--jsn'], typed: 'jsn', meant: 'json' },
  { command: 'devices list', args: ['devices', 'list', '--trailer', 't-1', '--trailr', 't-2'], typed: 'trailr', meant: 'trailer' },
  { command: 'devices activate', args: ['devices', 'activate', 'd-1', '--jsn'], typed: 'jsn', meant: 'json' },
  { command: 'devices deactivate', args: ['devices', 'deactivate', 'd-1', '--jsn'], typed: 'jsn', meant: 'json' },
  { command: 'partners set-limit', args: ['partners', 'set-limit', '--partner', 'p-1', '--intake-limt', '5/60'], typed: 'intake-limt', meant: 'intake-limit' },
  { command: 'grants add', args: ['grants', 'add', '--customer', 'c-1', '--partner', 'p-1', '--custmer', 'c-2'], typed: 'custmer', meant: 'customer' },
  { command: 'grants remove', args: ['grants', 'remove', '--customer', 'c-1', '--partner', 'p-1', '--partnr', 'p-2'], typed: 'partnr', meant: 'partner' },
  { command: 'grants list', args: ['grants', 'list', '--custome', 'c-1'], typed: 'custome', meant: 'customer' },
  { command: 'queue failed', args: ['queue', 'failed', '--limt', '3'], typed: 'limt', meant: 'limit' },
  { command: 'queue retry', args: ['queue', 'retry', 'i-1', '--jsn'], typed: 'jsn', meant: 'json' },
  { command: 'keys list', args: ['keys', 'list', '--jsn'], typed: 'jsn', meant: 'json' },
  { command: 'keys rotate', args: ['keys', 'rotate', '--algoritm', 'ES256'], typed: 'algoritm', meant: 'algorithm' },
];

/**
 * The commands `trailwire --help` and each group's `--help` list, as `group action` (or a lone
 * command); a group that runs by itself too (`trailwire simulate`, beside `simulate merge`) is listed
 * as well, its help's usage line naming no `<action>`.
 */
async function listedCommands(db: string): Promise<string[]> {
  const commandsOf = (help: string, prefix: string) =>
    [...help.matchAll(new RegExp(`^  trailwire ${prefix}([a-z][a-z-]*)`, 'gm'))].map((match) => `${prefix}${match[1]}`);
  const top = commandsOf((await runTrailwire(['--help', '--db', db])).stdout, '');
  const leaves = await Promise.all(
    top.map(async (command) => {
      const help = (await runTrailwire([command, '--help', '--db', db])).stdout;
      const actions = commandsOf(help, `${command} `);
      const runsByItself = help.split('\n')[0]!.trim() === `trailwire ${command}`;
      return runsByItself ? [command, ...actions] : actions;
    }),
  );
  return leaves.flat().sort();
}

// Three at a time: each case is a node process of about half a second.
describe('every command rejects an unknown option', { concurrency: 3 }, () => {
  let dir: string;
  let db: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'trailwire-strict-'));
    db = join(dir, 'strict.db');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('the table has a row for every command --help lists', async () => {
    assert.deepEqual(MISTYPED.map((row) => row.command).sort(), await listedCommands(db));
  });

  for (const [index, row] of MISTYPED.entries()) {
    it(`${row.command}: ${row.args.join(' ')}`, async () => {
      // Port 0 for serve, should the option slip through: the test must not hang on a busy 8080.
      // simulate opens no store, so it has no --db to give.
      const store = row.command.startsWith('simulate') ? [] : ['--db', db];
      const result = await runTrailwire([...row.args, ...store], { TRAILWIRE_PORT: '0', TRAILWIRE_GRPC_PORT: '0' });
      assert.equal(result.code, 1, `exit status 1 (stdout: ${result.stdout})`);
      assert.match(result.stderr, new RegExp(`trailwire: Unknown option: --${row.typed}\\b`));
      if (row.meant) assert.match(result.stderr, new RegExp(`did you mean --${row.meant}\\?`));
      else assert.doesNotMatch(result.stderr, /did you mean/);
      assert.doesNotMatch(result.stdout + result.stderr, /listening|Trailwire is running|api_key|apiKey/i, `${index}: nothing ran`);
    });
  }

  it('with --json the refusal is one JSON document, and nothing was created', async () => {
    const result = await runTrailwire(['customers', 'create', '--name', 'C', '--nmae', 'D', '--db', db, '--json']);
    assert.equal(result.code, 1);
    assert.deepEqual(JSON.parse(result.stdout), {
      error: { code: 'validation_failed', message: 'Unknown option: --nmae (did you mean --name?)' },
    });
    const customers = await runTrailwire(['customers', 'list', '--db', db, '--json']);
    assert.deepEqual(JSON.parse(customers.stdout), { data: [] });
  });

  it('a mistyped command is named with the nearest command', async () => {
    const result = await runTrailwire(['customers', 'creat', '--db', db]);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /trailwire: Unknown command "creat": did you mean create\?/);
  });

  it("TRAILWIRE_* variables another command (or none) uses are no unknown options, while a known one still applies", async () => {
    const result = await runTrailwire(['customers', 'list', '--json'], {
      TRAILWIRE_DB: db,
      TRAILWIRE_PORT: '9999',
      TRAILWIRE_TEST_DATABASE_URL: 'postgres://nowhere/test',
      TRAILWIRE_NOT_AN_OPTION: '1',
    });
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(JSON.parse(result.stdout), { data: [] });
  });
});
