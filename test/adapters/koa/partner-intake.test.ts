/**
 * Issue 29's partner-facing findings, re-run over HTTP: one partner's intake budget (every request
 * counts, refusals included, before the body is read; 429 with the RateLimit headers and
 * Retry-After; per-partner overrides), the cap of new unassigned VINs per partner and day (a flood of
 * made-up VINs stops at the cap), and the customers' grants (a partner the customer did not grant
 * gets 403 `partner_not_granted`, nothing is enqueued, the refusal is audited, and it no longer eats
 * the granted partner's per-VIN window; a grant made by another process is seen within seconds).
 */
import assert from 'node:assert/strict';
import { Agent, request } from 'node:http';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { createIntakeRouter } from '../../../adapters/koa/intake-routes.ts';
import type { SqliteStore } from '../../../adapters/sqlite/index.ts';
import { DEFAULT_PARTNER_INTAKE } from '../../../core/partner-intake-rules.ts';
import { assertProblem, uniqueVin } from '../../support/fixtures.ts';
import { customerWithToken, partnerWithToken, startTestApp, type TestApp } from '../../support/test-app.ts';

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);
const DAY_MS = 24 * 3_600_000;
const fix = (at: number) => ({ timestamp: at / 1000, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 100, bearingDeg: 90 });

type Partner = { id: string; apiKey: string; token: string };

/** Helpers over one test app. */
function helpers(app: TestApp) {
  const post = (partner: Partner, vin: string, body: unknown = fix(app.clock.now()), headers: Record<string, string> = {}) =>
    app.call('POST', `/api/v1/telemetry/intake/${vin}`, { token: partner.token, body, headers: { 'content-type': 'application/json', ...headers } });
  const logged = (vin: string): number =>
    (app.trailwire.store as SqliteStore).db.prepare('SELECT COUNT(*) FROM intake_log WHERE vin = ?').pluck().get(vin) as number;
  const reauthenticate = async (...partners: Partner[]) => {
    for (const partner of partners) partner.token = (await app.call('POST', '/api/v1/partners/authenticate', { apiKey: partner.apiKey })).body.access_token;
  };
  const registeredVin = async (customerId: string) => {
    const fleet = await app.trailwire.admin.createFleet({ customerId, name: 'Reefers' });
    const vin = uniqueVin();
    await app.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin });
    return vin;
  };
  return { post, logged, reauthenticate, registeredVin };
}

describe('partner intake budget', () => {
  let app: TestApp;
  let partner: Partner;
  let other: Partner;
  let h: ReturnType<typeof helpers>;
  before(async () => {
    app = await startTestApp({ core: { partnerIntake: { budget: { requests: 5, windowSeconds: 60 } } } });
    app.clock.set(T0);
    h = helpers(app);
    partner = await partnerWithToken(app, 'gps-basic', 'Leaky');
    other = await partnerWithToken(app, 'gps-basic', 'Other');
  });
  after(() => app.close());

  it('counts every intake request, refusals included, and answers 429 before reading the body once spent', async () => {
    const vin = uniqueVin();
    assert.equal((await h.post(partner, vin)).status, 202);
    assert.equal((await h.post(partner, vin, '{"not json')).status, 400);
    assert.equal((await h.post(partner, vin, 'x', { 'content-type': 'text/plain' })).status, 415);
    assert.equal((await h.post(partner, vin, { unknown: 1 })).status, 400);
    assert.equal((await h.post(partner, 'NOT-A-VIN', fix(T0))).status, 400);
    // The sixth: its body is not JSON, and it is refused for the budget, not the body — it was never parsed.
    const refused = await h.post(partner, vin, '{"not json');
    assertProblem(refused, 429);
    assert.equal(refused.body.type, 'https://trailwire.dev/problems/rate-limited');
    assert.match(refused.body.detail, /partner-intake limit of 5 per 60 s/);
    assert.equal(refused.headers.get('ratelimit-limit'), '5');
    assert.equal(refused.headers.get('ratelimit-remaining'), '0');
    assert.equal(refused.headers.get('retry-after'), '60');
    assert.equal(refused.headers.get('ratelimit-reset'), '60');
    assert.equal((await h.post(partner, vin)).status, 429);
    assert.equal(h.logged(vin), 1, 'only the first was stored');

    // Another partner has a budget of its own.
    assert.equal((await h.post(other, uniqueVin())).status, 202);
    // The next window.
    app.clock.set(T0 + 60_000);
    assert.equal((await h.post(partner, vin, fix(T0 + 60_000))).status, 202);
  });

  it("answers the tighter of the partner's budget and the VIN's window in the 202's headers", async () => {
    app.clock.set(T0 + 120_000);
    const response = await h.post(other, uniqueVin());
    assert.equal(response.status, 202);
    assert.equal(response.headers.get('ratelimit-limit'), '5', "the budget (5) is tighter than gps-basic's 120 per VIN");
    assert.equal(response.headers.get('ratelimit-remaining'), '4');
  });

  it("takes a partner's own budget set by the operator: at once in this process, within the refresh from another", async () => {
    app.clock.set(T0 + 180_000);
    await h.reauthenticate(partner, other);
    await app.trailwire.admin.setPartnerLimits({ partnerId: partner.id, intake: { requests: 2, windowSeconds: 60 }, newVinsPerDay: null });
    assert.equal((await h.post(partner, uniqueVin())).status, 202);
    assert.equal((await h.post(partner, uniqueVin())).status, 202);
    const refused = await h.post(partner, uniqueVin());
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get('ratelimit-limit'), '2');

    // Written by another process (straight into the store): seen once the cached setting is older than the refresh.
    await app.trailwire.store.setPartnerIntakeLimits({ partnerId: other.id, intake: { requests: 1, windowSeconds: 60 }, newVinsPerDay: null, updatedAt: T0 });
    app.clock.set(T0 + 240_000 + DEFAULT_PARTNER_INTAKE.refreshSeconds * 1000);
    await h.reauthenticate(other);
    assert.equal((await h.post(other, uniqueVin())).status, 202);
    assert.equal((await h.post(other, uniqueVin())).status, 429);
  });
});

/** 24,000 unknown keys, ~250 KB: the body of issue 29's flood. */
function hostileBody(): Buffer {
  const fields: string[] = [];
  for (let i = 0; i < 24_000; i++) fields.push(`"k${i.toString(36).padStart(4, '0')}":1`);
  return Buffer.from(`{${fields.join(',')}}`);
}

/**
 * Sends the headers of an intake POST declaring `body`'s length but only its first `sent` bytes, and
 * waits for the answer: one that comes proves the server decided without the rest of the body.
 * Answers the status, headers and problem, and whether the server then closed the connection.
 */
function postPartly(url: string, token: string, vin: string, body: Buffer, sent: number) {
  return new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; problem: any; closed: Promise<void> }>((resolve, reject) => {
    const target = new URL(`/api/v1/telemetry/intake/${vin}`, url);
    const req = request(target, {
      method: 'POST',
      // A client that would keep the connection: a `Connection: close` answer is the server's choice.
      agent: new Agent({ keepAlive: true }),
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': body.length },
    });
    req.on('error', reject);
    // A server that waits for the rest of the body never answers: fail in seconds, not at its request timeout.
    req.setTimeout(10_000, () => req.destroy(new Error('no answer before the body ended')));
    req.on('response', (res) => {
      const closed = new Promise<void>((done) => req.socket!.once('close', () => done()));
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, problem: JSON.parse(text), closed }));
    });
    req.write(body.subarray(0, sent));
  });
}

describe('large invalid bodies, and refusals before the body is read', () => {
  let app: TestApp;
  let partner: Partner;
  let other: Partner;
  let h: ReturnType<typeof helpers>;
  before(async () => {
    // Refusals before the body is read are held 2 s here (1 s by default): long beside a 202 on any machine.
    app = await startTestApp({ core: { partnerIntake: { budget: { requests: 4, windowSeconds: 60 } } }, app: { intakeRefusalDelayMs: 2_000 } });
    app.clock.set(T0);
    h = helpers(app);
    partner = await partnerWithToken(app, 'gps-basic', 'Flooder');
    other = await partnerWithToken(app, 'gps-basic', 'Tenant');
  });
  after(() => app.close());

  it("refuses a large body its product cannot accept at its first member too many, before reading the rest or parsing it, and closes the connection", async () => {
    const vin = uniqueVin();
    // 32 KiB of a 250 KB body: past the 16 KiB from which bodies are scanned.
    const refused = await postPartly(app.url, partner.token, vin, hostileBody(), 32 * 1024);
    assert.equal(refused.status, 400);
    assert.match(String(refused.headers['content-type']), /^application\/problem\+json/);
    assert.equal(refused.headers.connection, 'close');
    assert.equal(refused.problem.type, 'https://trailwire.dev/problems/validation-failed');
    assert.deepEqual(refused.problem.errors, [{ path: '', message: 'has an object of more than 4 members, more than the schema allows anywhere' }]);
    await refused.closed;
    assert.equal(h.logged(vin), 0);
  });

  it('takes a large body that its product accepts (a fix padded to 20 KB), and answers a small invalid one with every problem', async () => {
    const vin = uniqueVin();
    const padded = JSON.stringify(fix(T0)).replace(',', `,${' '.repeat(20_000)}`);
    assert.equal((await h.post(partner, vin, padded)).status, 202);
    const small = await h.post(partner, vin, { ...fix(T0), extra: 1, speedKph: 'fast' });
    assertProblem(small, 400);
    assert.equal(small.body.errors.length, 2, 'a small body: every problem, as before');
    assert.equal(h.logged(vin), 1);
  });

  it('answers a partner over its budget 429 before reading the body, and closes the connection rather than reading it', async () => {
    const vin = uniqueVin();
    // Spends what the tests above left of the budget of 4.
    for (let spent = 0; (await h.post(partner, vin, { unknown: 1 })).status !== 429; spent++) assert.ok(spent < 4, 'the budget of 4 runs out');
    const refused = await postPartly(app.url, partner.token, vin, hostileBody(), 1024);
    assert.equal(refused.status, 429);
    assert.match(String(refused.headers['content-type']), /^application\/problem\+json/);
    assert.equal(refused.headers['retry-after'], '60');
    assert.equal(refused.headers.connection, 'close');
    assert.equal(refused.problem.type, 'https://trailwire.dev/problems/rate-limited');
    await refused.closed;
  });

  it("holds such a refusal before answering it, while another partner's intake goes on", async () => {
    let answered = false;
    const held = postPartly(app.url, partner.token, uniqueVin(), hostileBody(), 1024).then((refused) => {
      answered = true;
      return refused;
    });
    const vin = uniqueVin();
    assert.equal((await h.post(other, vin)).status, 202);
    assert.equal(answered, false, "the flooder's 429 is still held when the other partner's 202 is answered");
    assert.equal((await held).status, 429);
    assert.equal(h.logged(vin), 1);
  });

  it('refuses a delay that is not a whole number of ms', () => {
    assert.throws(() => createIntakeRouter(app.trailwire, { refusalDelayMs: -1 }), /`refusalDelayMs` must be a whole number of ms ≥ 0, got -1/);
  });
});

describe('new unassigned VINs per partner and day', () => {
  let app: TestApp;
  let partner: Partner;
  let h: ReturnType<typeof helpers>;
  before(async () => {
    app = await startTestApp({ core: { partnerIntake: { newVinsPerDay: 3 } } });
    app.clock.set(T0);
    h = helpers(app);
    partner = await partnerWithToken(app, 'gps-basic', 'Leaked key');
  });
  after(() => app.close());

  it('stops a flood of made-up VINs at the cap; known VINs and repeats are not new; the next UTC day opens it again', async () => {
    // Issue 29 sent 200,000 distinct VINs in 28 s; the same shape, with a cap of 3.
    const flood = Array.from({ length: 20 }, () => uniqueVin());
    const statuses = [];
    for (const vin of flood) statuses.push((await h.post(partner, vin)).status);
    assert.deepEqual(statuses, [202, 202, 202, ...Array(17).fill(429)]);
    assert.deepEqual(flood.map(h.logged), [1, 1, 1, ...Array(17).fill(0)], 'nothing of the refused VINs was stored');

    const refused = await h.post(partner, uniqueVin());
    assertProblem(refused, 429);
    assert.equal(refused.headers.get('ratelimit-limit'), '3');
    assert.equal(refused.headers.get('ratelimit-remaining'), '0');
    const untilMidnight = String((Date.UTC(2026, 5, 2) - T0) / 1000);
    assert.equal(refused.headers.get('retry-after'), untilMidnight, 'until the UTC day ends');

    // A VIN counted today is not new again, and a registered one never is.
    assert.equal((await h.post(partner, flood[0]!)).status, 202);
    const { id: customerId } = await customerWithToken(app);
    assert.equal((await h.post(partner, await h.registeredVin(customerId))).status, 202);

    app.clock.set(Date.UTC(2026, 5, 2, 0, 0, 1));
    await h.reauthenticate(partner);
    assert.equal((await h.post(partner, flood[5]!)).status, 202);
  });

  it("takes a partner's own cap, 0 meaning known VINs only", async () => {
    await app.trailwire.admin.setPartnerLimits({ partnerId: partner.id, intake: null, newVinsPerDay: 0 });
    const refused = await h.post(partner, uniqueVin());
    assert.equal(refused.status, 429);
    assert.match(refused.body.detail, /new-VIN cap is 0/);
    assert.ok(Number(refused.headers.get('retry-after')) > 0);
  });
});

describe('partner grants', () => {
  let app: TestApp;
  let trusted: Partner;
  let stranger: Partner;
  let h: ReturnType<typeof helpers>;
  const output: string[] = [];
  const auditLines = () =>
    output
      .join('')
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line))
      .filter((line) => line.audit === true && line.event === 'intake.refused');

  before(async () => {
    const sink = new Writable({ write: (chunk, _encoding, done) => (output.push(String(chunk)), done()) });
    app = await startTestApp({
      core: { productLimits: { 'gps-basic': { requests: 3, windowSeconds: 60 } } },
      app: { logger: pino({ level: 'info' }, sink), accessLogLevel: 'debug' },
    });
    app.clock.set(T0);
    h = helpers(app);
    trusted = await partnerWithToken(app, 'gps-basic', 'Real GPS');
    stranger = await partnerWithToken(app, 'gps-basic', 'Other GPS');
  });
  after(() => app.close());

  it("refuses a partner the customer did not grant: 403 partner_not_granted, nothing enqueued, audited, the VIN's window left alone", async () => {
    const { id: customerId } = await customerWithToken(app, 'Acme');
    const vin = await h.registeredVin(customerId);
    // No grant yet: as before issue 29, any partner of the product.
    assert.equal((await h.post(stranger, vin)).status, 202);
    await app.trailwire.admin.addGrant({ customerId, partnerId: trusted.id });

    const refused = await h.post(stranger, vin, { ...fix(T0), position: { latitude: 0, longitude: 0 } });
    assertProblem(refused, 403);
    assert.equal(refused.body.type, 'https://trailwire.dev/problems/partner-not-granted');
    assert.equal(h.logged(vin), 1, 'nothing more enqueued');
    // Many refusals: the VIN's window (3 a minute here) is not theirs to spend.
    for (let i = 0; i < 5; i++) assert.equal((await h.post(stranger, vin)).status, 403);
    assert.equal((await h.post(trusted, vin)).status, 202);
    assert.equal((await h.post(trusted, vin)).status, 202);

    const lines = auditLines();
    assert.equal(lines.length, 1, 'one line a minute per partner, however many refusals');
    assert.equal(lines[0].partnerId, stranger.id);
    assert.equal(lines[0].reason, 'partner_not_granted');
    assert.equal(lines[0].vin, vin);
    assert.equal(lines[0].suppressed, 0);
  });

  it('leaves unassigned VINs and customers without grants open to any partner of the product', async () => {
    const { id: granting } = await customerWithToken(app, 'Granting');
    await app.trailwire.admin.addGrant({ customerId: granting, partnerId: trusted.id });
    const { id: open } = await customerWithToken(app, 'Open');
    assert.equal((await h.post(stranger, uniqueVin())).status, 202, 'an unassigned VIN');
    assert.equal((await h.post(stranger, await h.registeredVin(open))).status, 202, 'a customer with no grants');
    assert.equal((await h.post(stranger, await h.registeredVin(granting))).status, 403);
  });

  it('applies a grant added or withdrawn by another process within the refresh, and an assignment at once', async () => {
    const { id: customerId } = await customerWithToken(app, 'Elsewhere');
    const vin = await h.registeredVin(customerId);
    assert.equal((await h.post(stranger, vin)).status, 202);
    // `trailwire grants add` in another process writes the store; this process's cache holds for refreshSeconds.
    await app.trailwire.store.addPartnerGrant({ customerId, partnerId: trusted.id, createdAt: T0 });
    app.clock.set(T0 + DEFAULT_PARTNER_INTAKE.refreshSeconds * 1000);
    await h.reauthenticate(trusted, stranger);
    assert.equal((await h.post(stranger, vin, fix(app.clock.now()))).status, 403);
    await app.trailwire.store.removePartnerGrant(customerId, trusted.id);
    app.clock.set(T0 + 2 * DEFAULT_PARTNER_INTAKE.refreshSeconds * 1000);
    assert.equal((await h.post(stranger, vin, fix(app.clock.now()))).status, 202);

    // A VIN first met unassigned, then registered to a customer with grants: refused from then on.
    const { id: granting } = await customerWithToken(app, 'Registers later');
    await app.trailwire.admin.addGrant({ customerId: granting, partnerId: trusted.id });
    const later = uniqueVin();
    assert.equal((await h.post(stranger, later, fix(app.clock.now()))).status, 202);
    const fleet = await app.trailwire.admin.createFleet({ customerId: granting, name: 'Later' });
    // Once processed, what the stranger sent is adopted only when the operator says so (issue 37:
    // test/core/admin-service.test.ts); whether it is processed yet here is up to the worker.
    await app.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: later, adoptUnassignedData: true });
    assert.equal((await h.post(stranger, later, fix(app.clock.now()))).status, 403);
  });
});

describe('partner grants required (serve --require-grants)', () => {
  let app: TestApp;
  let partner: Partner;
  let h: ReturnType<typeof helpers>;
  before(async () => {
    app = await startTestApp({ core: { partnerIntake: { requireGrants: true } } });
    app.clock.set(T0);
    h = helpers(app);
    partner = await partnerWithToken(app, 'gps-basic');
  });
  after(() => app.close());

  it("refuses every customer's registered trailers to partners it did not grant; unassigned VINs stay open", async () => {
    const { id: customerId } = await customerWithToken(app);
    const vin = await h.registeredVin(customerId);
    assertProblem(await h.post(partner, vin), 403);
    assert.equal(h.logged(vin), 0);
    assert.equal((await h.post(partner, uniqueVin())).status, 202);
    await app.trailwire.admin.addGrant({ customerId, partnerId: partner.id });
    assert.equal((await h.post(partner, vin)).status, 202);
  });

  it('answers failed partner_not_granted in the status of a payload accepted unassigned and processed once the VIN is registered to a customer that did not grant it (issue 37)', async () => {
    const worker = app.trailwire.intake!.worker!;
    await worker.stop();
    try {
      const customer = await customerWithToken(app, 'Registers later');
      const vin = uniqueVin();
      const accepted = await h.post(partner, vin, { ...fix(app.clock.now()), position: { latitude: 0, longitude: 0 }, speedKph: 399 });
      assert.equal(accepted.status, 202, 'unassigned: open to any partner of the product');
      const fleet = await app.trailwire.admin.createFleet({ customerId: customer.id, name: 'Later' });
      const trailer = await app.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin });
      await worker.drainDue();
      const status = await app.call('GET', accepted.headers.get('location')!, { token: partner.token });
      assert.equal(status.status, 200);
      assert.equal(status.body.status, 'failed');
      assert.match(status.body.error, /^partner_not_granted: the customer that owns VIN/);
      const read = await app.call('GET', `/api/v1/trailers/${trailer.id}`, { token: customer.token });
      assert.equal(read.status, 200);
      assert.equal(read.body.telemetry, null, "the customer's trailer shows nothing of it");
    } finally {
      await worker.start();
    }
  });
});
