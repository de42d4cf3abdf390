/**
 * The built command stays executable (issue 31, finding 1): `npm run build` (which `npm test` runs
 * first) rewrites `dist/`, and a rebuild that left `dist/bin/trailwire.js` without its execute bit
 * made `npx trailwire` fail with "Permission denied" in every README line after it. The test suite
 * runs after that build, so here the file is checked as the build left it, and run as the shell
 * runs a bin (the shebang line and the execute bit alone) — which is what `npx trailwire` ends in.
 * Not through `npx` itself: in a checkout, npx installs the project as a directory package, which runs
 * its `prepare` script, which rebuilds `dist/` from nothing while the other test files run commands
 * from it (seen: every `serve` case of a concurrent file crashing at once).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { promisify } from 'node:util';
import { it } from 'node:test';
import { REPO_ROOT, TRAILWIRE_BIN } from '../support/cli.ts';

const run = promisify(execFile);

it('the build leaves dist/bin/trailwire.js executable, and running it prints the package version', async () => {
  const mode = statSync(TRAILWIRE_BIN).mode;
  assert.equal(mode & 0o111, 0o111, `dist/bin/trailwire.js is executable by all (mode ${(mode & 0o777).toString(8)})`);
  const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
  const direct = await run(TRAILWIRE_BIN, ['--version'], { cwd: REPO_ROOT });
  assert.equal(direct.stdout.trim(), version);
});
