/**
 * The deliverer hears of new outbox events from processing (issue 40): a batch that changed trailers
 * wakes it, so an event leaves as soon as it is processed rather than at the deliverer's next poll.
 * The poll is set to an hour here, so only the wake-up can deliver within the test's wait; both
 * processing paths are held to it — the SQLite processing thread (its rounds reach the serving
 * thread's deliverer) and the core's worker on the event loop.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { startServer } from '../../../adapters/server/index.ts';
import { withCheckDigit } from '../../../core/vin.ts';
import { until } from '../../support/until.ts';
import { startWebhookReceiver } from '../../support/webhook-receiver.ts';

describe('the webhook deliverer is woken by processing', () => {
  for (const intakeThread of [true, false]) {
    it(`sends a processed event without waiting for its poll (${intakeThread ? 'processing thread' : "core's worker"})`, { timeout: 30_000 }, async () => {
      const directory = mkdtempSync(join(tmpdir(), 'trailwire-webhook-wakeup-'));
      const receiver = await startWebhookReceiver();
      const server = await startServer({
        db: join(directory, 'trailwire.db'),
        port: 0,
        grpcPort: 0,
        host: '127.0.0.1',
        logger: pino({ level: 'silent' }),
        intakeThread,
        core: { webhooks: { rules: { allowHttp: true, allowPrivate: true }, deliverer: { pollMs: 3_600_000 } } },
      });
      try {
        const { trailwire } = server;
        const partner = await trailwire.auth.createPartner({ name: 'GPS Co', product: 'gps-basic' });
        const customer = await trailwire.auth.createCustomer({ name: 'Acme' });
        const fleet = await trailwire.admin.createFleet({ customerId: customer.principal.id, name: 'North' });
        const vin = withCheckDigit('1HWKW000000000001');
        await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin, unitId: 'T-1' });
        await trailwire.webhooks.service.create(customer.principal.id, { url: receiver.url });
        const token = (await trailwire.auth.authenticate('partners', partner.apiKey, 'test')).token.accessToken;

        const timestamp = Math.floor(Date.now() / 1000);
        const response = await fetch(`${server.url}/api/v1/telemetry/intake/${vin}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ timestamp, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 80, bearingDeg: 90 }),
        });
        assert.equal(response.status, 202);
        await until(() => receiver.delivered().length > 0, 'the delivery', 10_000);
        const { events } = JSON.parse(receiver.delivered()[0]!.body) as { events: Array<{ type: string; data: { vin: string; telemetry: { timestamp: string } } }> };
        assert.deepEqual(
          events.map((event) => [event.type, event.data.vin, event.data.telemetry.timestamp]),
          [['trailer.updated', vin, new Date(timestamp * 1000).toISOString()]],
        );
      } finally {
        await server.close();
        await receiver.close();
        rmSync(directory, { recursive: true, force: true });
      }
    });
  }
});
