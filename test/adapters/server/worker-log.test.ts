/**
 * The core's worker — what processes intake on PostgreSQL, and on SQLite when products are given as
 * objects — says each failed attempt in the server's log, as SQLite's processing thread does for its
 * own: a payload dead-lettered without a log line is lost to the operator.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { pino } from 'pino';
import { startServer } from '../../../adapters/server/index.ts';
import { builtInProducts } from '../../../products/index.ts';
import { uniqueVin } from '../../support/fixtures.ts';
import { flakyProduct } from '../../support/flaky-product.ts';
import { logLines } from '../../support/log-lines.ts';
import { until } from '../../support/until.ts';

const directory = mkdtempSync(join(tmpdir(), 'trailwire-worker-log-'));
after(() => rmSync(directory, { recursive: true, force: true }));

const { product: flaky } = flakyProduct();

it("logs a payload the core's worker dead-letters, with its id, VIN and reason", { timeout: 30_000 }, async () => {
  const { lines, stream } = logLines();
  const server = await startServer({
    db: join(directory, 'worker-log.db'),
    port: 0,
    grpcPort: 0,
    host: '127.0.0.1',
    logger: pino({ level: 'warn' }, stream),
    // Products given as objects are processed by the core's worker on the event loop.
    core: { products: [...builtInProducts, flaky], worker: { maxAttempts: 1, lingerMs: 0 } },
  });
  try {
    const partner = await server.trailwire.auth.createPartner({ name: 'Flaky Co', product: 'flaky' });
    const token = (await server.trailwire.auth.authenticate('partners', partner.apiKey, 'test')).token.accessToken;
    const vin = uniqueVin();
    const response = await fetch(`${server.url}/api/v1/telemetry/intake/${vin}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ n: 7 }),
    });
    assert.equal(response.status, 202);
    const { id } = (await response.json()) as { id: string };
    await until(() => lines.some((line) => line.msg === 'intake payload dead-lettered'), 'the dead letter logged', 20_000);
    const line = lines.find((candidate) => candidate.msg === 'intake payload dead-lettered')!;
    assert.equal(line.intakeId, id);
    assert.equal(line.vin, vin);
    assert.equal(line.product, 'flaky');
    assert.match(String(line.reason), /flaky refuses 7/);
  } finally {
    await server.close();
  }
});
