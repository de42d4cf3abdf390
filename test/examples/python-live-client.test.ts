/**
 * examples/python-live-client runs as its README says (issue 31, finding 4): Debian's protoc generates
 * the LiveFeed messages, the Python client (Debian's python3-grpcio) prints the first heartbeat and then
 * the update of an intake payload, as the Node client does. Skipped, with the reason, where protoc or
 * a Python with the `grpc` module is missing (CI installs neither by default).
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { it } from 'node:test';
import { pino } from 'pino';
import { startServer } from '../../adapters/server/index.ts';
import { uniqueVin } from '../support/fixtures.ts';
import { REPO_ROOT } from './run-example.ts';

/** A Python that imports grpc (Debian's packages go to /usr/bin/python3), or why there is none. */
function pythonWithGrpc(): { python: string } | { missing: string } {
  try {
    execFileSync('protoc', ['--version'], { stdio: 'ignore' });
  } catch {
    return { missing: 'protoc is not installed (apt-get install protobuf-compiler)' };
  }
  for (const python of ['/usr/bin/python3', 'python3']) {
    try {
      execFileSync(python, ['-c', 'import grpc, google.protobuf'], { stdio: 'ignore' });
      return { python };
    } catch {
      // Try the next one.
    }
  }
  return { missing: "no python3 imports grpc (apt-get install python3-grpcio)" };
}

const found = pythonWithGrpc();

it('examples/python-live-client prints a heartbeat, then the update of an intake payload', {
  timeout: 60_000,
  skip: 'missing' in found ? found.missing : false,
}, async () => {
  const { python } = found as { python: string };
  const dir = mkdtempSync(join(tmpdir(), 'trailwire-python-'));
  const server = await startServer({ db: join(dir, 'ex.db'), port: 0, grpcPort: 0, host: '127.0.0.1', logger: pino({ level: 'silent' }) });
  try {
    execFileSync('protoc', ['-I', 'proto', `--python_out=${dir}`, 'proto/livefeed/v1/livefeed.proto'], { cwd: REPO_ROOT });
    const { trailwire } = server;
    const customer = await trailwire.auth.createCustomer({ name: 'Example Co' });
    const fleet = await trailwire.admin.createFleet({ customerId: customer.principal.id, name: 'Example fleet' });
    const vin = uniqueVin();
    await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin, unitId: 'EX-1' });
    const partner = await trailwire.auth.createPartner({ name: 'GPS', product: 'gps-basic' });

    const child = spawn(python, ['examples/python-live-client/live_client.py', '--api-key', customer.apiKey, '--auth-url', server.url,
      '--target', `127.0.0.1:${server.grpcPort}`, '--count', '2', '--generated', dir], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const lines: string[] = [];
    for await (const line of createInterface({ input: child.stdout })) {
      lines.push(line);
      if (lines.length === 1) {
        assert.equal(line, 'heartbeat');
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
    assert.equal(lines[1], `fleet ${fleet.id} (Example fleet) trailer EX-1 ${vin} OK faulted=0 warning=0 41.50000,-87.25000 62.1 mph E`);
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
