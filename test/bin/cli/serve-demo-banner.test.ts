/**
 * The plain `serve --demo` banner (issue 15) names the demo customers' ids and their fleets beside
 * the keys, and they are the ones in the store: what `customers list` and `fleets list` answer. The
 * `--json` document carries the same fleets. Needs `npm run build`.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { REPO_ROOT, runTrailwire, TRAILWIRE_BIN } from '../../support/cli.ts';

const directory = mkdtempSync(join(tmpdir(), 'trailwire-demo-banner-'));
after(() => rmSync(directory, { recursive: true, force: true }));

/** Runs `serve` until stdout holds `until`, then stops it; answers stdout. */
async function serveOutput(args: string[], until: RegExp): Promise<string> {
  const child = spawn(process.execPath, [TRAILWIRE_BIN, 'serve', '--port', '0', '--grpc-port', '0', '--host', '127.0.0.1', '--log-level', 'silent', ...args], { cwd: REPO_ROOT });
  try {
    return await new Promise<string>((resolve, reject) => {
      let stdout = '';
      child.stdout.on('data', (chunk) => {
        stdout += chunk;
        if (until.test(stdout)) resolve(stdout);
      });
      child.on('exit', (code) => reject(new Error(`serve exited with ${code} before printing ${until}: ${stdout}`)));
    });
  } finally {
    const exited = new Promise((resolve) => child.on('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
}

it('serve --demo prints each demo customer id with its fleets, as the store has them', { timeout: 30_000 }, async () => {
  const db = join(directory, 'demo.db');
  const banner = await serveOutput(['--demo', '--db', db], /Try:[\s\S]*npx trailwire simulate .*\n/);
  const [customers, fleets] = await Promise.all(
    [['customers', 'list'], ['fleets', 'list']].map(async (command) => JSON.parse((await runTrailwire([...command, '--json', '--db', db])).stdout).data),
  );
  assert.deepEqual(customers.map((c: { name: string }) => c.name).sort(), ['Demo Logistics', 'Other Freight Co']);
  const section = banner.slice(banner.indexOf('Demo customers and their fleets'), banner.indexOf('Try:'));
  for (const customer of customers) {
    const at = section.indexOf(`customer ${customer.id}`);
    assert.ok(at > 0, `the banner names ${customer.name}'s id ${customer.id}:\n${banner}`);
    assert.match(section.slice(0, at).split('\n').at(-1)!, new RegExp(`^  ${customer.name} +$`));
    const listed = section.slice(at).split('\n').slice(1).filter((line) => line.startsWith('    fleet')).slice(0, 10);
    const own = fleets.filter((f: { customerId: string }) => f.customerId === customer.id);
    assert.ok(own.length > 0);
    assert.deepEqual(listed.slice(0, own.length), own.map((f: { id: number; name: string }) => `    fleet ${String(f.id).padEnd(5)} ${f.name}`));
  }

  // The simulator command, with the demo keys filled in: every product's partner key and the first customer's.
  const keys = Object.fromEntries([...banner.matchAll(/^  (?:customer  (Demo Logistics)|partner   ([a-z-]+)) +(tw[pc]_\S+)$/gm)].map((m) => [m[1] ?? m[2], m[3]]));
  const simulate = /^  TRAILWIRE_PARTNER_KEY=(\S+) TRAILWIRE_CUSTOMER_KEY=(\S+) npx trailwire simulate --target (\S+) --grpc (\S+) --duration 60 --rate 5$/m.exec(banner);
  assert.ok(simulate, `the banner prints the simulator command:\n${banner}`);
  assert.deepEqual(simulate[1]!.split(',').sort(), ['cargosafe', 'gps-basic', 'tpms'].map((product) => `${product}=${keys[product]}`));
  assert.equal(simulate[2], keys['Demo Logistics']);

  // A restart re-issues keys and still names the same customers and fleets; --json carries them as data.
  const document = JSON.parse((await serveOutput(['--demo', '--json', '--db', db], /\n/)).split('\n')[0]!);
  assert.equal(document.demo.created, false);
  assert.deepEqual(
    document.demo.fleets,
    fleets.map(({ id, customerId, name }: { id: number; customerId: string; name: string }) => ({ id, customerId, name })),
  );
});
