/**
 * The SQLite file as an intake log: the log conformance suite on a fresh temporary file per case,
 * two connections to one file for the sharing case (its leases are the process's, as the file has
 * one processing process).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { openSqliteIntakeLog, openSqliteStore } from '../../../adapters/sqlite/index.ts';
import { runIntakeLogConformance } from '../../conformance/intake-log.ts';

const directory = mkdtempSync(join(tmpdir(), 'trailwire-log-'));
after(() => rmSync(directory, { recursive: true, force: true }));
let files = 0;
const freshFile = (): string => join(directory, `log-${++files}.db`);

runIntakeLogConformance({
  name: 'sqlite (a temporary file per case)',
  async openLog() {
    const store = await openSqliteStore({ file: freshFile() });
    const log = openSqliteIntakeLog(store.db);
    return { log, close: async () => (await log.close(), await store.close()) };
  },
  async openSharedLogs() {
    const file = freshFile();
    const [a, b] = [await openSqliteStore({ file }), await openSqliteStore({ file })];
    const logs = [openSqliteIntakeLog(a.db), openSqliteIntakeLog(b.db)] as const;
    return {
      logs,
      close: async () => {
        for (const log of logs) await log.close();
        await a.close();
        await b.close();
      },
    };
  },
});
