/**
 * Owner-only database files (issue 17): a new store's folder is 0700, its file and WAL sidecars
 * 0600 whatever the umask, and `startServer` warns, naming the fix, about a file others can read.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, describe, it } from 'node:test';
import { pino } from 'pino';
import { openSqliteStore } from '../../../adapters/sqlite/index.ts';
import { startServer } from '../../../adapters/server/index.ts';

const directory = mkdtempSync(join(tmpdir(), 'trailwire-modes-'));
after(() => rmSync(directory, { recursive: true, force: true }));
const modeOf = (path: string): number => statSync(path).mode & 0o777;

describe('database file modes', () => {
  it('creates the folder 0700 and the file, -wal and -shm 0600 even under a permissive umask', async () => {
    const previous = process.umask(0o000);
    try {
      const file = join(directory, 'new', 'nested', 'trailwire.db');
      const store = await openSqliteStore({ file });
      try {
        await store.createCustomer({ id: 'c-1', name: 'Acme', keyHash: 'h-1', createdAt: 0 });
        assert.equal(modeOf(join(directory, 'new')), 0o700);
        assert.equal(modeOf(join(directory, 'new', 'nested')), 0o700);
        assert.equal(modeOf(file), 0o600);
        assert.equal(modeOf(`${file}-wal`), 0o600);
        assert.equal(modeOf(`${file}-shm`), 0o600);
      } finally {
        await store.close();
      }
    } finally {
      process.umask(previous);
    }
  });

  it('startServer warns about an existing file that others can read, and says how to fix it', async () => {
    const file = join(directory, 'shared.db');
    await (await openSqliteStore({ file })).close();
    chmodSync(file, 0o644);
    const lines: string[] = [];
    const sink = new Writable({ write: (chunk, _encoding, done) => (lines.push(String(chunk)), done()) });
    const server = await startServer({ db: file, port: 0, grpcPort: 0, host: '127.0.0.1', logger: pino(sink) });
    await server.close();
    const warning = lines.map((line) => JSON.parse(line)).find((entry) => entry.fix);
    assert.ok(warning, 'a warning with the fix was logged');
    assert.equal(warning.level, 40);
    // SQLite gives the sidecars the file's mode, so they are named too.
    assert.equal(warning.fix, `chmod 600 ${[file, `${file}-wal`, `${file}-shm`].map((name) => JSON.stringify(name)).join(' ')}`);
    assert.match(warning.msg, /readable by other users/);
    assert.equal(modeOf(file), 0o644, 'the operator\'s file is not changed behind their back');
  });
});
