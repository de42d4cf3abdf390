/**
 * What every answer of the API says about storing and sniffing it, and what a client's disconnect
 * leaves in the log (issue 29, finding 8): `Cache-Control: no-store` unless the route chose its own
 * caching, `X-Content-Type-Options: nosniff` everywhere; a client that closes the connection
 * mid-body is a debug line, not an error, and no line carries the raw path it asked for.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { withCheckDigit } from '../../../core/vin.ts';
import { logLines } from '../../support/log-lines.ts';
import { customerWithToken, partnerWithToken, startTestApp } from '../../support/test-app.ts';

describe('answer headers', () => {
  it('no-store on API answers unless the route caches on purpose; nosniff on every answer', async () => {
    const app = await startTestApp();
    try {
      const customer = await customerWithToken(app);
      const partner = await partnerWithToken(app, 'gps-basic');
      const fix = { timestamp: Math.floor(app.clock.now() / 1000) - 60, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 88.5, bearingDeg: 271 };
      const intakePath = `/api/v1/telemetry/intake/${withCheckDigit('1HEADERS0ZZ123456')}`;
      const answers = {
        // The first verifies the token, the second finds it in the core's token cache.
        intake: await app.call('POST', intakePath, { token: partner.token, body: fix }),
        intakeAgain: await app.call('POST', intakePath, { token: partner.token, body: { ...fix, timestamp: fix.timestamp + 1 } }),
        read: await app.call('GET', '/api/v1/fleets', { token: customer.token }),
        problem: await app.call('GET', '/api/v1/fleets/999999', { token: customer.token }),
        unauthenticated: await app.call('GET', '/api/v1/fleets'),
        unrouted: await app.call('GET', '/api/v1/nothing-here'),
        authenticate: await app.call('POST', '/api/v1/customers/authenticate', { apiKey: customer.apiKey }),
        openapi: await app.call('GET', '/openapi.json'),
      };
      assert.equal(answers.intake.status, 202, JSON.stringify(answers.intake.body));
      assert.equal(answers.intakeAgain.status, 202);
      for (const [name, answer] of Object.entries(answers)) {
        assert.equal(answer.headers.get('cache-control'), 'no-store', `${name}: no-store`);
        assert.equal(answer.headers.get('x-content-type-options'), 'nosniff', `${name}: nosniff`);
        assert.match(answer.headers.get('content-type') ?? '', /json/, `${name}: JSON`);
      }
      const jwks = await app.call('GET', '/.well-known/jwks.json');
      assert.equal(jwks.headers.get('cache-control'), 'public, max-age=300', 'the JWKS keeps its own caching');
      assert.equal(jwks.headers.get('x-content-type-options'), 'nosniff');
    } finally {
      await app.close();
    }
  });
});

describe('a client that goes away', () => {
  it('is logged at debug, without the raw path, and no error line is written', async () => {
    const { lines, stream: sink } = logLines();
    const app = await startTestApp({ app: { logger: pino({ level: 'debug' }, sink) } });
    try {
      const partner = await partnerWithToken(app, 'gps-basic');
      const vin = withCheckDigit('1GONEAWAY0ZZ12345');
      const { port } = new URL(app.url);
      for (let n = 0; n < 5; n++) {
        const socket = connect(Number(port), '127.0.0.1');
        await new Promise((resolve) => socket.once('connect', resolve));
        socket.write(
          `POST /api/v1/telemetry/intake/${vin} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${partner.token}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"timest`,
        );
        await new Promise((resolve) => setTimeout(resolve, 50));
        socket.destroy();
      }
      const deadline = Date.now() + 3000;
      while (lines.filter((line) => line.msg === 'client closed the connection before the answer').length < 5 && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 20));
      const gone = lines.filter((line) => line.msg === 'client closed the connection before the answer');
      assert.equal(gone.length, 5, 'one debug line per disconnect');
      assert.ok(gone.every((line) => line.level === 20 && line.route === '/api/v1/telemetry/intake/:VIN'), JSON.stringify(gone[0]));
      assert.deepEqual(lines.filter((line) => Number(line.level) >= 50), [], 'no error line');
      assert.ok(!lines.some((line) => JSON.stringify(line).includes(vin)), 'no line carries the raw path');
    } finally {
      await app.close();
    }
  });
});
