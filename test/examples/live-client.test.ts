/** The live-client example runs as its README says: it prints the first heartbeat and then an update. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { it } from 'node:test';
import { pino } from 'pino';
import { startServer } from '../../adapters/server/index.ts';
import { uniqueVin } from '../support/fixtures.ts';

it('examples/live-client prints a heartbeat, then the update of an intake payload', { timeout: 30_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'trailwire-example-'));
  const server = await startServer({ db: join(dir, 'ex.db'), port: 0, grpcPort: 0, host: '127.0.0.1', logger: pino({ level: 'silent' }) });
  try {
    const { trailwire } = server;
    const customer = await trailwire.auth.createCustomer({ name: 'Example Co' });
    const fleet = await trailwire.admin.createFleet({ customerId: customer.principal.id, name: 'Example fleet' });
    const vin = uniqueVin();
    await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin, unitId: 'EX-1' });
    const partner = await trailwire.auth.createPartner({ name: 'GPS', product: 'gps-basic' });

    const example = new URL('../../examples/live-client/index.ts', import.meta.url).pathname;
    const child = spawn(process.execPath, ['--import', 'tsx', example, '--api-key', customer.apiKey, '--auth-url', server.url, '--target', `127.0.0.1:${server.grpcPort}`, '--count', '2'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const lines: string[] = [];
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    for await (const line of createInterface({ input: child.stdout })) {
      lines.push(line);
      if (lines.length === 1) {
        assert.match(line, /heartbeat$/);
        const token = (await trailwire.auth.authenticate('partners', partner.apiKey, 'test')).token.accessToken;
        const response = await fetch(`${server.url}/api/v1/telemetry/intake/${vin}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ timestamp: 1780315200, position: { latitude: 41.5, longitude: -87.25 }, speedKph: 100, bearingDeg: 90 }),
        });
        assert.equal(response.status, 202);
      }
    }
    assert.equal(await exited, 0);
    assert.equal(lines.length, 2);
    assert.match(lines[1]!, new RegExp(`fleet ${fleet.id} \\(Example fleet\\) trailer EX-1 ${vin} OK faulted=0 warning=0 41\\.50000,-87\\.25000 62\\.1 mph E`));
    // The README shows the same two lines, for a trailer of fleet 1 with the VIN 1HGCM82633A004352.
    const readme = readFileSync(new URL('../../examples/live-client/README.md', import.meta.url), 'utf8');
    const shown = /```\n(.* heartbeat)\n(.*)\n```/.exec(readme);
    assert.ok(shown, 'the README shows a heartbeat line and an update line');
    assert.equal(shown[1]!.replace(/^\S+/, ''), lines[0]!.replace(/^\S+/, ''));
    assert.equal(shown[2]!.replace(/^\S+/, '').replace(/fleet 1 /, `fleet ${fleet.id} `).replace('1HGCM82633A004352', vin), lines[1]!.replace(/^\S+/, ''));
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
