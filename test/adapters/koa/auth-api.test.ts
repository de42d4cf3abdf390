/**
 * The authentication API over HTTP (contract 3 and 7): authenticate for both audiences, the JWKS that
 * verifies the issued tokens, every way a token can be bad, the authenticate and rotate limits, and
 * rotation revoking the old key and every token minted before it.
 */
import assert from 'node:assert/strict';
import { createHmac, createPrivateKey, createPublicKey, generateKeyPairSync, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import jwt from 'jsonwebtoken';
import { openSqliteStore } from '../../../adapters/sqlite/index.ts';
import { generateApiKey } from '../../../core/api-keys.ts';
import { ManualClock } from '../../../core/clock.ts';
import { createTrailwire } from '../../../core/trailwire.ts';
import { assertProblem, seedFleet, serveTrailwire, type SeededFleet } from '../../support/fixtures.ts';
import { customerWithToken, partnerWithToken, startTestApp, type TestApp } from '../../support/test-app.ts';
import { otherSpellingsOf } from '../../support/token-spellings.ts';

const MINUTE = 60_000;

/** The base64url JSON segment of a JWT. */
function segment(value: object): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

function decodeComplete(token: string) {
  const decoded = jwt.decode(token, { complete: true });
  assert.ok(decoded && typeof decoded.payload === 'object', 'a JWT');
  return decoded as { header: jwt.JwtHeader; payload: jwt.JwtPayload; signature: string };
}

/** Asserts a 401 that tells a Bearer client its token is no good (RFC 6750). */
function assertInvalidToken(response: Awaited<ReturnType<TestApp['call']>>): void {
  assertProblem(response, 401);
  assert.equal(response.body.type, 'https://trailwire.dev/problems/invalid-token');
  assert.match(response.headers.get('www-authenticate') ?? '', /^Bearer .*error="invalid_token"/);
}

/** The eleven read endpoints, addressed at real records of `seeded`. */
function readPaths(seeded: SeededFleet): string[] {
  const [first] = seeded.trailers;
  assert.ok(first);
  const trailer = first.trailer.id;
  const device = first.deviceIds[0]!;
  const unit = first.cargosafeIds[0]!;
  return [
    '/api/v1/fleets',
    `/api/v1/fleets/${seeded.fleet.id}`,
    `/api/v1/trailers/${seeded.fleet.id}`,
    `/api/v1/trailers/${trailer}`,
    `/api/v1/trailers/telemetry/gps/${trailer}`,
    `/api/v1/devices/${trailer}`,
    `/api/v1/devices/details/${device}`,
    `/api/v1/devices/telemetry/${device}`,
    '/api/v1/cargosafe',
    `/api/v1/cargosafe/${unit}`,
    `/api/v1/cargosafe/telemetry/${unit}`,
  ];
}

describe('POST /api/v1/{partners|customers}/authenticate', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

  for (const audience of ['customers', 'partners'] as const) {
    it(`answers a ${audience} key with a Bearer token valid for 1800 s`, async () => {
      const { apiKey } =
        audience === 'customers'
          ? await app.trailwire.auth.createCustomer({ name: 'Acme' })
          : await app.trailwire.auth.createPartner({ name: 'GPS Co', product: 'gps-basic' });
      const response = await app.call('POST', `/api/v1/${audience}/authenticate`, { apiKey });
      assert.equal(response.status, 200);
      assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
      assert.deepEqual(Object.keys(response.body).sort(), ['access_token', 'expires_in', 'token_type']);
      assert.equal(response.body.token_type, 'Bearer');
      assert.equal(response.body.expires_in, 1800);
      assert.equal(typeof response.body.access_token, 'string');
      assert.equal(response.headers.get('cache-control'), 'no-store');
      assert.equal(response.headers.get('ratelimit-limit'), '10');
      assert.equal(response.headers.get('ratelimit-remaining'), '9');
    });
  }

  it('issues JWTs that verify with the published JWKS and carry the contract claims', async () => {
    const customer = await customerWithToken(app, 'Verifier Inc');
    const partner = await partnerWithToken(app, 'tpms', 'Tire Co');
    const jwks = await app.call('GET', '/.well-known/jwks.json');
    assert.equal(jwks.status, 200);
    assert.ok(Array.isArray(jwks.body.keys) && jwks.body.keys.length > 0);

    const now = Math.floor(app.clock.now() / 1000);
    const verified: jwt.JwtPayload[] = [];
    for (const [token, audience, sub] of [
      [customer.token, 'customers', customer.id],
      [partner.token, 'partners', partner.id],
    ] as const) {
      const { header } = decodeComplete(token);
      assert.equal(header.alg, 'RS256');
      assert.equal(typeof header.kid, 'string');
      const jwk = jwks.body.keys.find((key: { kid: string }) => key.kid === header.kid);
      assert.ok(jwk, 'the JWKS publishes the key the token names');
      assert.equal(jwk.use, 'sig');
      assert.equal(jwk.alg, 'RS256');
      for (const privateMember of ['d', 'p', 'q', 'dp', 'dq', 'qi'])
        assert.equal(jwk[privateMember], undefined, `the JWKS must not publish the private member ${privateMember}`);
      const publicKey = createPublicKey({ key: jwk, format: 'jwk' });
      // The manual clock sits in 2026; verify at its time, not the machine's.
      const claims = jwt.verify(token, publicKey, { algorithms: ['RS256'], clockTimestamp: now }) as jwt.JwtPayload;
      assert.equal(claims.iss, 'trailwire');
      assert.equal(claims.aud, audience);
      assert.equal(claims.sub, sub);
      assert.equal(claims.iat, now);
      assert.equal(claims.exp, now + 1800);
      assert.equal(typeof claims.jti, 'string');
      assert.ok((claims.jti as string).length >= 16);
      verified.push(claims);
    }
    assert.equal(verified[0]!.scope, undefined, 'a customer token carries no product scope');
    assert.equal(verified[1]!.scope, 'product:tpms');
    assert.notEqual(verified[0]!.jti, verified[1]!.jti);
  });

  it('answers 401 with WWW-Authenticate for a missing, unknown, malformed or other-audience key', async () => {
    const customer = await app.trailwire.auth.createCustomer({ name: 'Wrong Door' });
    const partner = await app.trailwire.auth.createPartner({ name: 'Wrong Door', product: 'gps-basic' });
    const cases: [string, string | undefined][] = [
      ['/api/v1/customers/authenticate', undefined],
      ['/api/v1/customers/authenticate', generateApiKey('customers')],
      ['/api/v1/customers/authenticate', 'not-a-key'],
      ['/api/v1/partners/authenticate', customer.apiKey],
      ['/api/v1/customers/authenticate', partner.apiKey],
    ];
    for (const [path, apiKey] of cases) {
      const response = await app.call('POST', path, apiKey === undefined ? {} : { apiKey });
      assertProblem(response, 401);
      assert.equal(response.body.type, 'https://trailwire.dev/problems/invalid-api-key', `${path} ${apiKey}`);
      assert.ok(response.headers.get('www-authenticate'), 'a 401 names how to authenticate');
      assert.equal(response.body.access_token, undefined);
    }
  });
});

describe('authenticate limits', () => {
  it('the 11th authenticate of a key in a 5-minute window is 429 until the :05 boundary', async () => {
    const app = await startTestApp();
    try {
      const { apiKey } = await app.trailwire.auth.createCustomer({ name: 'Eager' });
      const other = await app.trailwire.auth.createCustomer({ name: 'Patient' });
      app.clock.set(Date.UTC(2026, 5, 1, 12, 2, 30));
      for (let i = 1; i <= 10; i++) {
        const response = await app.call('POST', '/api/v1/customers/authenticate', { apiKey });
        assert.equal(response.status, 200, `attempt ${i}`);
        assert.equal(response.headers.get('ratelimit-remaining'), String(10 - i));
        assert.equal(response.headers.get('ratelimit-reset'), '150');
      }
      const limited = await app.call('POST', '/api/v1/customers/authenticate', { apiKey });
      assertProblem(limited, 429);
      assert.equal(limited.body.type, 'https://trailwire.dev/problems/rate-limited');
      assert.equal(limited.headers.get('ratelimit-limit'), '10');
      assert.equal(limited.headers.get('ratelimit-remaining'), '0');
      assert.equal(limited.headers.get('ratelimit-reset'), '150');
      assert.equal(limited.headers.get('retry-after'), '150');
      assert.equal(limited.body.access_token, undefined);

      // The limit is per key: another customer's key still works.
      assert.equal((await app.call('POST', '/api/v1/customers/authenticate', { apiKey: other.apiKey })).status, 200);

      app.clock.set(Date.UTC(2026, 5, 1, 12, 4, 59));
      const stillLimited = await app.call('POST', '/api/v1/customers/authenticate', { apiKey });
      assert.equal(stillLimited.status, 429);
      assert.equal(stillLimited.headers.get('retry-after'), '1');

      app.clock.set(Date.UTC(2026, 5, 1, 12, 5, 0));
      const fresh = await app.call('POST', '/api/v1/customers/authenticate', { apiKey });
      assert.equal(fresh.status, 200);
      assert.equal(fresh.headers.get('ratelimit-remaining'), '9');
      assert.equal(fresh.headers.get('ratelimit-reset'), '300');
    } finally {
      await app.close();
    }
  });

  it('counts failed attempts per client address; over the limit even a valid key from there is 429', async () => {
    const app = await startTestApp({
      core: { limits: { failedAuthenticatePerAddress: { requests: 3, windowSeconds: 300 } } },
      app: { trustProxy: true },
    });
    try {
      const { apiKey } = await app.trailwire.auth.createCustomer({ name: 'Shared Office' });
      const from = (address: string) => ({ 'x-forwarded-for': address });
      for (let i = 0; i < 3; i++) {
        const response = await app.call('POST', '/api/v1/customers/authenticate', {
          apiKey: generateApiKey('customers'),
          headers: from('203.0.113.7'),
        });
        assert.equal(response.status, 401, `failure ${i + 1}`);
      }
      const blocked = await app.call('POST', '/api/v1/customers/authenticate', { apiKey, headers: from('203.0.113.7') });
      assertProblem(blocked, 429);
      assert.equal(blocked.headers.get('ratelimit-limit'), '3');
      assert.equal(blocked.headers.get('ratelimit-remaining'), '0');
      assert.equal(blocked.headers.get('retry-after'), '300');

      // Another address is not affected.
      assert.equal((await app.call('POST', '/api/v1/customers/authenticate', { apiKey, headers: from('198.51.100.1') })).status, 200);

      app.clock.advance(5 * MINUTE);
      assert.equal((await app.call('POST', '/api/v1/customers/authenticate', { apiKey, headers: from('203.0.113.7') })).status, 200);
    } finally {
      await app.close();
    }
  });

  it('does not trust X-Forwarded-For unless configured, so a client cannot dodge the failure limit', async () => {
    const app = await startTestApp({ core: { limits: { failedAuthenticatePerAddress: { requests: 2, windowSeconds: 300 } } } });
    try {
      const { apiKey } = await app.trailwire.auth.createCustomer({ name: 'Spoofer' });
      for (const spoofed of ['10.0.0.1', '10.0.0.2']) {
        const response = await app.call('POST', '/api/v1/customers/authenticate', {
          apiKey: generateApiKey('customers'),
          headers: { 'x-forwarded-for': spoofed },
        });
        assert.equal(response.status, 401);
      }
      const blocked = await app.call('POST', '/api/v1/customers/authenticate', { apiKey, headers: { 'x-forwarded-for': '10.0.0.3' } });
      assert.equal(blocked.status, 429);
    } finally {
      await app.close();
    }
  });
});

describe('Bearer tokens', () => {
  let app: TestApp;
  let customer: { id: string; apiKey: string; token: string };
  let partner: { id: string; apiKey: string; token: string };

  before(async () => {
    app = await startTestApp();
    customer = await customerWithToken(app, 'Token Holder');
    partner = await partnerWithToken(app, 'gps-basic', 'Token Partner');
  });
  after(() => app.close());

  /** A token signed with the server's own key: `claims` over those of a valid customer token. */
  async function forge(claims: Record<string, unknown>, header: Record<string, unknown> = {}): Promise<string> {
    const [stored] = await app.trailwire.store.listSigningKeys();
    assert.ok(stored);
    const base = decodeComplete(customer.token).payload;
    // A claim set to undefined is left out.
    const payload = Object.fromEntries(Object.entries({ ...base, jti: randomUUID(), ...claims }).filter(([, value]) => value !== undefined));
    return jwt.sign(payload, createPrivateKey(stored.privateKeyPem!), {
      algorithm: 'RS256',
      keyid: stored.kid,
      header: { alg: 'RS256', ...header } as jwt.JwtHeader,
    });
  }

  it('accepts a valid customer token', async () => {
    assert.equal((await app.call('GET', '/api/v1/fleets', { token: customer.token })).status, 200);
    assert.equal((await app.call('GET', '/api/v1/fleets', { token: await forge({}) })).status, 200, 'the forge helper itself is sound');
  });

  it('rejects an expired token with 401 invalid_token, also after it was accepted and cached', async (t) => {
    // The other tests here reuse tokens minted at the start, so the clock goes back afterwards.
    const start = app.clock.now();
    t.after(() => app.clock.set(start));
    const { token } = await customerWithToken(app, 'Soon Expired');
    assert.equal((await app.call('GET', '/api/v1/fleets', { token })).status, 200);
    app.clock.advance(1799 * 1000);
    assert.equal((await app.call('GET', '/api/v1/fleets', { token })).status, 200, 'valid until exp');
    app.clock.advance(1000);
    const response = await app.call('GET', '/api/v1/fleets', { token });
    assertInvalidToken(response);
    assert.match(response.body.detail, /expired/);

    const unseen = await customerWithToken(app, 'Never Used');
    app.clock.advance(1801 * 1000);
    assertInvalidToken(await app.call('GET', '/api/v1/fleets', { token: unseen.token }));
  });

  it('rejects a token whose signature was altered', async () => {
    const { token } = await customerWithToken(app, 'Tampered');
    const [header, payload, signature] = token.split('.') as [string, string, string];
    // A character in the middle: the last one may only carry padding bits.
    const at = Math.floor(signature.length / 2);
    const flipped = signature[at] === 'A' ? 'B' : 'A';
    const tampered = `${header}.${payload}.${signature.slice(0, at)}${flipped}${signature.slice(at + 1)}`;
    assertInvalidToken(await app.call('GET', '/api/v1/fleets', { token: tampered }));

    // An edited payload under the original signature.
    const claims = decodeComplete(token).payload;
    const edited = `${header}.${segment({ ...claims, sub: partner.id })}.${signature}`;
    assertInvalidToken(await app.call('GET', '/api/v1/fleets', { token: edited }));
  });

  it('refuses every non-canonical base64url spelling of a signature, before and after the token was cached (issue 37)', async () => {
    const { token } = await customerWithToken(app, 'Respelled');
    const spellings = otherSpellingsOf(token);
    assert.equal(spellings.length, 15);
    for (const spelling of spellings) {
      const response = await app.call('GET', '/api/v1/fleets', { token: spelling });
      assertInvalidToken(response);
      assert.match(response.body.detail, /canonical base64url/);
    }
    assert.equal((await app.call('GET', '/api/v1/fleets', { token })).status, 200);
    for (const spelling of spellings) assertInvalidToken(await app.call('GET', '/api/v1/fleets', { token: spelling }));
  });

  it('rejects an alg "none" token', async () => {
    const { header, payload } = decodeComplete(customer.token);
    const none = `${segment({ alg: 'none', typ: 'JWT', kid: header.kid })}.${segment(payload)}.`;
    assertInvalidToken(await app.call('GET', '/api/v1/fleets', { token: none }));
  });

  it('rejects an HS256 token keyed with the public key (algorithm confusion)', async () => {
    const { header, payload } = decodeComplete(customer.token);
    const jwks = (await app.call('GET', '/.well-known/jwks.json')).body;
    const pem = createPublicKey({ key: jwks.keys[0], format: 'jwk' }).export({ type: 'spki', format: 'pem' });
    const signingInput = `${segment({ alg: 'HS256', typ: 'JWT', kid: header.kid })}.${segment(payload)}`;
    const signature = createHmac('sha256', pem).update(signingInput).digest('base64url');
    assertInvalidToken(await app.call('GET', '/api/v1/fleets', { token: `${signingInput}.${signature}` }));
  });

  it('rejects a token of another issuer even when signed with the server key', async () => {
    assertInvalidToken(await app.call('GET', '/api/v1/fleets', { token: await forge({ iss: 'someone-else' }) }));
  });

  it('rejects a token signed by a key the server does not publish', async () => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const payload = { ...decodeComplete(customer.token).payload, jti: randomUUID() };
    const stranger = jwt.sign(payload, privateKey, { algorithm: 'RS256', keyid: 'not-our-key' });
    assertInvalidToken(await app.call('GET', '/api/v1/fleets', { token: stranger }));
    const { header } = decodeComplete(customer.token);
    const impostor = jwt.sign(payload, privateKey, { algorithm: 'RS256', keyid: header.kid });
    assertInvalidToken(await app.call('GET', '/api/v1/fleets', { token: impostor }));
  });

  it('rejects a well-signed token whose claims this service never issues', async () => {
    const partnerClaims = decodeComplete(partner.token).payload;
    for (const claims of [
      { aud: 'admins' },
      { ver: undefined },
      { ver: '1' },
      { sub: 42 },
      { exp: undefined },
      { aud: ['customers'] },
    ]) {
      assertInvalidToken(await app.call('GET', '/api/v1/fleets', { token: await forge(claims) }));
    }
    // A partner token without its product scope is not a partner token.
    const unscoped = await forge({ ...partnerClaims, scope: undefined });
    assertInvalidToken(await app.call('PUT', '/api/v1/partners/rotate', { token: unscoped }));
    assert.equal((await app.call('POST', '/api/v1/partners/authenticate', { apiKey: partner.apiKey })).status, 200, 'nothing was rotated');
  });

  it('rejects a well-signed token for a principal that does not exist', async () => {
    assertInvalidToken(await app.call('GET', '/api/v1/fleets', { token: await forge({ sub: randomUUID() }) }));
  });

  it('answers 403 for a token of the other audience', async () => {
    const onRead = await app.call('GET', '/api/v1/fleets', { token: partner.token });
    assertProblem(onRead, 403);
    assert.equal(onRead.body.type, 'https://trailwire.dev/problems/wrong-audience');
    const onRotate = await app.call('PUT', '/api/v1/partners/rotate', { token: customer.token });
    assertProblem(onRotate, 403);
    assert.equal(onRotate.body.type, 'https://trailwire.dev/problems/wrong-audience');
    // The wrong-audience attempt rotated nothing: the partner's key still works.
    assert.equal((await app.call('POST', '/api/v1/partners/authenticate', { apiKey: partner.apiKey })).status, 200);
  });

  it('answers 401 for a missing or malformed Authorization header', async () => {
    const missing = await app.call('GET', '/api/v1/fleets');
    assertProblem(missing, 401);
    assert.equal(missing.body.type, 'https://trailwire.dev/problems/missing-token');
    assert.match(missing.headers.get('www-authenticate') ?? '', /^Bearer/);
    for (const authorization of ['garbage', 'Bearer', 'Bearer a b', `Basic ${customer.token}`, 'Bearer not.a.jwt', 'Bearer ....']) {
      const response = await app.call('GET', '/api/v1/fleets', { headers: { authorization } });
      assertInvalidToken(response);
    }
  });
});

describe('signing keys persist', () => {
  it('a token minted before the store is reopened still verifies after', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'trailwire-keys-'));
    const file = join(dir, 'trailwire.db');
    const clock = new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0));
    try {
      const first = await createTrailwire({ store: await openSqliteStore({ file }), clock });
      const served = await serveTrailwire(first);
      const { apiKey } = await first.auth.createCustomer({ name: 'Restarted' });
      const token = (await served.call('POST', '/api/v1/customers/authenticate', { apiKey })).body.access_token as string;
      const jwksBefore = (await served.call('GET', '/.well-known/jwks.json')).body;
      await served.close();
      await first.close();

      clock.advance(10 * MINUTE);
      const second = await createTrailwire({ store: await openSqliteStore({ file }), clock });
      const reopened = await serveTrailwire(second);
      try {
        assert.equal((await reopened.call('GET', '/api/v1/fleets', { token })).status, 200);
        assert.deepEqual((await reopened.call('GET', '/.well-known/jwks.json')).body, jwksBefore);
        assert.equal((await reopened.call('POST', '/api/v1/customers/authenticate', { apiKey })).status, 200);
      } finally {
        await reopened.close();
        await second.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('PUT /api/v1/{partners|customers}/rotate', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

  it('answers a new customer key; the old key and every token minted before it stop working', async () => {
    const customer = await customerWithToken(app, 'Compromised');
    const seeded = await seedFleet(app.trailwire, customer.id, { trailers: 1 });
    const paths = readPaths(seeded);
    for (const path of paths) assert.equal((await app.call('GET', path, { token: customer.token })).status, 200, path);
    const secondOldToken = (await app.call('POST', '/api/v1/customers/authenticate', { apiKey: customer.apiKey })).body.access_token;

    app.clock.advance(1500);
    const rotated = await app.call('PUT', '/api/v1/customers/rotate', { token: customer.token });
    assert.equal(rotated.status, 200);
    assert.deepEqual(Object.keys(rotated.body).sort(), ['api_key', 'rotated_at']);
    assert.match(rotated.body.api_key, /^twc_[A-Za-z0-9_-]{43}$/);
    assert.notEqual(rotated.body.api_key, customer.apiKey);
    assert.equal(rotated.body.rotated_at, new Date(app.clock.now()).toISOString());
    assert.equal(rotated.headers.get('cache-control'), 'no-store');

    const oldKey = await app.call('POST', '/api/v1/customers/authenticate', { apiKey: customer.apiKey });
    assertProblem(oldKey, 401);
    for (const token of [customer.token, secondOldToken]) {
      for (const path of paths) assertInvalidToken(await app.call('GET', path, { token }));
      assertInvalidToken(await app.call('PUT', '/api/v1/customers/rotate', { token }));
    }

    const newKey = await app.call('POST', '/api/v1/customers/authenticate', { apiKey: rotated.body.api_key });
    assert.equal(newKey.status, 200);
    for (const path of paths) assert.equal((await app.call('GET', path, { token: newKey.body.access_token })).status, 200, path);
  });

  it('rotates a partner key, keeping its product scope', async () => {
    const partner = await partnerWithToken(app, 'cargosafe', 'Rotating Partner');
    const rotated = await app.call('PUT', '/api/v1/partners/rotate', { token: partner.token });
    assert.equal(rotated.status, 200);
    assert.match(rotated.body.api_key, /^twp_/);
    assertProblem(await app.call('POST', '/api/v1/partners/authenticate', { apiKey: partner.apiKey }), 401);
    assertInvalidToken(await app.call('PUT', '/api/v1/partners/rotate', { token: partner.token }));
    const fresh = await app.call('POST', '/api/v1/partners/authenticate', { apiKey: rotated.body.api_key });
    assert.equal(fresh.status, 200);
    assert.equal(decodeComplete(fresh.body.access_token).payload.scope, 'product:cargosafe');
  });

  it('allows 3 rotations per hour; the 4th is 429 until the hour ends', async () => {
    const customer = await customerWithToken(app, 'Nervous');
    app.clock.set(Date.UTC(2026, 5, 2, 9, 40, 0));
    let apiKey = customer.apiKey;
    const tokenFor = async (key: string) => {
      const response = await app.call('POST', '/api/v1/customers/authenticate', { apiKey: key });
      assert.equal(response.status, 200);
      return response.body.access_token as string;
    };
    for (let i = 1; i <= 3; i++) {
      const response = await app.call('PUT', '/api/v1/customers/rotate', { token: await tokenFor(apiKey) });
      assert.equal(response.status, 200, `rotation ${i}`);
      assert.equal(response.headers.get('ratelimit-limit'), '3');
      assert.equal(response.headers.get('ratelimit-remaining'), String(3 - i));
      apiKey = response.body.api_key;
    }
    const token = await tokenFor(apiKey);
    const limited = await app.call('PUT', '/api/v1/customers/rotate', { token });
    assertProblem(limited, 429);
    assert.equal(limited.headers.get('retry-after'), String(20 * 60));
    assert.equal(limited.headers.get('ratelimit-remaining'), '0');
    // The refused rotation changed nothing: the current key and token still work.
    assert.equal((await app.call('GET', '/api/v1/fleets', { token })).status, 200);
    assert.equal((await app.call('POST', '/api/v1/customers/authenticate', { apiKey })).status, 200);

    app.clock.set(Date.UTC(2026, 5, 2, 10, 0, 0));
    assert.equal((await app.call('PUT', '/api/v1/customers/rotate', { token: await tokenFor(apiKey) })).status, 200);
  });
});
