/**
 * `startServer` with the intake log on NATS JetStream (`intakeLog`, as `serve --intake-log`), over
 * HTTP as a partner uses it: a 202 with an id that carries the payload's position and a `Location`
 * its status answers at, `processed` once the core's worker has been through it; an
 * `Idempotency-Key` repeated with the same body answers the original 202 again, with another body
 * 422 — contract 4 unchanged; `/readyz` names the log; a full stream refuses with 503 problem+json
 * and `Retry-After`, the payloads it holds kept; and a present stream whose settings differ stops
 * the start with the setting named. Needs `TRAILWIRE_TEST_DATABASE_URL` and `TRAILWIRE_TEST_NATS_URL`.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { pino } from 'pino';
import { type RunningServer, startServer } from '../../../adapters/server/index.ts';
import { withCheckDigit } from '../../../core/vin.ts';
import { assertAllProcessed } from '../../support/intake-status.ts';
import { deleteStreams, freshStream, NATS_URL } from '../../support/nats.ts';

const DATABASE_URL = process.env.TRAILWIRE_TEST_DATABASE_URL;
const skip = DATABASE_URL === undefined ? 'TRAILWIRE_TEST_DATABASE_URL is not set' : NATS_URL === undefined ? 'TRAILWIRE_TEST_NATS_URL is not set' : false;
const fix = (timestamp: number) => ({ timestamp, position: { latitude: 41.5, longitude: -87.6 }, speedKph: 80, bearingDeg: 10 });

describe('startServer with the intake log on JetStream', { skip }, () => {
  const schemas: string[] = [];
  const streams: string[] = [];
  after(async () => {
    const admin = new pg.Client({ connectionString: DATABASE_URL });
    await admin.connect();
    for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
    await deleteStreams(streams);
  });

  /** A server on a schema and stream of its own, with a partner of gps-basic and its token. */
  async function serve(parameters = '', options: { intakeWorker?: boolean } = {}) {
    const schema = `tw_test_${randomBytes(6).toString('hex')}`;
    const { stream, subjectPrefix } = freshStream();
    schemas.push(schema);
    streams.push(stream);
    const intakeLog = `${NATS_URL}?stream=${stream}&subjects=${subjectPrefix}${parameters}`;
    const server = await startServer({
      databaseUrl: DATABASE_URL,
      databaseSchema: schema,
      intakeLog,
      port: 0,
      grpcPort: 0,
      host: '127.0.0.1',
      intakeWorker: options.intakeWorker,
      logger: pino({ level: 'silent' }),
    });
    const partner = await server.trailwire.auth.createPartner({ name: 'Partner', product: 'gps-basic' });
    const token = (await server.trailwire.auth.authenticate('partners', partner.apiKey, 'test')).token.accessToken;
    const post = (vin: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${server.url}/api/v1/telemetry/intake/${vin}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
    return { server, token, post, intakeLog, schema };
  }

  it('answers 202s whose status is processed, replays an Idempotency-Key and refuses its reuse with 422', async () => {
    const { server, token, post } = await serve();
    try {
      const vin = withCheckDigit('1JS00000000000001');
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const response = await post(vin, fix(1767268800 + i));
        assert.equal(response.status, 202);
        const body = (await response.json()) as { id: string; status: string };
        assert.equal(body.status, 'queued');
        assert.match(body.id, /^[0-9a-f-]{36}\.\d+\.\d+$/, 'the id carries the partition and the stream sequence');
        assert.equal(response.headers.get('location'), `/api/v1/telemetry/intake/status/${body.id}`);
        ids.push(body.id);
      }
      await assertAllProcessed(server.url, token, ids);
      const keyed = await post(vin, fix(1767268900), { 'idempotency-key': 'order-1' });
      assert.equal(keyed.status, 202);
      const original = (await keyed.json()) as { id: string };
      const again = await post(vin, fix(1767268900), { 'idempotency-key': 'order-1' });
      assert.equal(again.status, 202);
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.equal(((await again.json()) as { id: string }).id, original.id, 'the original 202 again');
      await assertAllProcessed(server.url, token, [original.id]);
      const afterProcessing = await post(vin, fix(1767268900), { 'idempotency-key': 'order-1' });
      assert.equal(afterProcessing.status, 202, 'still replayed once processed and let go by the stream');
      assert.equal(((await afterProcessing.json()) as { id: string }).id, original.id);
      const reused = await post(vin, fix(1767268999), { 'idempotency-key': 'order-1' });
      assert.equal(reused.status, 422);
      assert.equal(reused.headers.get('content-type'), 'application/problem+json');
      assert.match(((await reused.json()) as { type: string }).type, /idempotency-key-reused$/);
      const trailer = await server.trailwire.store.findTrailerByVin(vin);
      assert.ok(trailer, 'the trailer was created by processing');
      const ready = await fetch(`${server.url}/readyz`);
      assert.equal(ready.status, 200);
      assert.match(await ready.text(), /intake-log/);
    } finally {
      await server.close();
    }
  });

  it('refuses intake with 503 and Retry-After while the stream is full, keeping what it holds', async () => {
    // Nothing processes here, so nothing is committed and the stream stays full.
    const { server, post } = await serve('&max-messages=2', { intakeWorker: false });
    try {
      const vin = withCheckDigit('1JS00000000000002');
      assert.equal((await post(vin, fix(1767268800))).status, 202);
      assert.equal((await post(vin, fix(1767268801))).status, 202);
      const refused = await post(vin, fix(1767268802));
      assert.equal(refused.status, 503);
      assert.equal(refused.headers.get('content-type'), 'application/problem+json');
      assert.ok(Number(refused.headers.get('retry-after')) >= 1, 'with Retry-After');
      assert.match(((await refused.json()) as { type: string }).type, /store-unavailable$/);
      assert.equal(await server.trailwire.intake!.queue.depth(), 2, 'the two taken are kept');
    } finally {
      await server.close();
    }
  });

  it('refuses to start on a stream whose settings differ, naming the setting', async () => {
    const { server, intakeLog, schema } = await serve();
    await server.close();
    await assert.rejects(
      startServer({ databaseUrl: DATABASE_URL, databaseSchema: schema, intakeLog: `${intakeLog}&replicas=3`, port: 0, grpcPort: 0, host: '127.0.0.1', logger: pino({ level: 'silent' }), startupTimeoutMs: 0 }),
      /num_replicas/,
    );
  });
});
