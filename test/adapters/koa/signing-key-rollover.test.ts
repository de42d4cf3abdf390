/**
 * The signing-key lifecycle over HTTP (issue 17): a rotation under load fails no request, tokens of
 * the previous key keep working until they expire while new ones carry the new kid, the previous key
 * leaves the JWKS once its last token has expired, `revokePrevious` ends its tokens at once (cached
 * ones too), and a key given as PEM (`--signing-key-file`) signs without its private key being stored.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { describe, it } from 'node:test';
import jwt from 'jsonwebtoken';
import { customerWithToken, startTestApp, type TestApp } from '../../support/test-app.ts';

const kidOf = (token: string): string => jwt.decode(token, { complete: true })!.header.kid!;
const jwksKids = async (app: TestApp): Promise<string[]> => (await app.call('GET', '/.well-known/jwks.json')).body.keys.map((key: { kid: string }) => key.kid);

describe('signing-key rotation', () => {
  it('fails no request during a rollover; old tokens work until they expire, then the old key leaves the JWKS', async () => {
    const app = await startTestApp({ core: { signingKeys: { refreshSeconds: 5 } } });
    try {
      const before = await customerWithToken(app);
      const oldKid = kidOf(before.token);
      // Requests in flight across the rotation, with the token minted before it.
      let rotating = true;
      const statuses: number[] = [];
      const load = (async () => {
        while (rotating) statuses.push((await app.call('GET', '/api/v1/fleets', { token: before.token })).status);
      })();
      const { kid: newKid, revoked } = await app.trailwire.keys.rotate();
      const after = await customerWithToken(app, 'Later');
      rotating = false;
      await load;
      assert.deepEqual(revoked, []);
      assert.ok(statuses.length > 0 && statuses.every((status) => status === 200), `every request answered 200: ${statuses}`);
      assert.notEqual(newKid, oldKid);
      assert.equal(kidOf(after.token), newKid, 'new tokens carry the new kid');
      assert.equal((await app.call('GET', '/api/v1/fleets', { token: before.token })).status, 200, 'a token of the previous key still works');
      assert.deepEqual((await jwksKids(app)).sort(), [oldKid, newKid].sort(), 'both keys are published during the rollover');
      assert.deepEqual(
        app.trailwire.keys.list().map(({ kid, status }) => ({ kid, status })),
        [{ kid: oldKid, status: 'previous' }, { kid: newKid, status: 'current' }],
      );
      // The last token of the old key expires 1800 s after the rotation at the latest (+ the refresh interval).
      app.clock.advance(1800_000);
      assert.ok((await jwksKids(app)).includes(oldKid), 'still published while a token it signed may be alive');
      app.clock.advance(5_000 + 1);
      assert.deepEqual(await jwksKids(app), [newKid], 'gone once every token it signed has expired');
      assert.equal(app.trailwire.keys.list()[0]!.status, 'expired');
    } finally {
      await app.close();
    }
  });

  it('revokePrevious ends the previous key\'s tokens at once, cached ones included, and unpublishes it', async () => {
    const app = await startTestApp();
    try {
      const customer = await customerWithToken(app);
      assert.equal((await app.call('GET', '/api/v1/fleets', { token: customer.token })).status, 200, 'verified, so cached');
      const oldKid = kidOf(customer.token);
      const { kid, revoked } = await app.trailwire.keys.rotate({ revokePrevious: true });
      assert.deepEqual(revoked, [oldKid]);
      const refused = await app.call('GET', '/api/v1/fleets', { token: customer.token });
      assert.equal(refused.status, 401);
      assert.equal(refused.headers.get('content-type'), 'application/problem+json');
      assert.deepEqual(await jwksKids(app), [kid]);
      assert.equal(app.trailwire.keys.list()[0]!.status, 'revoked');
      const fresh = await customerWithToken(app, 'Again');
      assert.equal((await app.call('GET', '/api/v1/fleets', { token: fresh.token })).status, 200);
    } finally {
      await app.close();
    }
  });
});

describe('a signing key kept outside the store', () => {
  for (const [type, alg] of [['ec', 'ES256'], ['rsa', 'RS256']] as const) {
    it(`signs with a ${alg} key given as PEM, storing only its public key`, async () => {
      const { privateKey } =
        type === 'ec' ? generateKeyPairSync('ec', { namedCurve: 'P-256' }) : generateKeyPairSync('rsa', { modulusLength: 2048 });
      const privateKeyPem = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
      const app = await startTestApp({ core: { signingKeys: { privateKeyPem } } });
      try {
        const customer = await customerWithToken(app);
        const { header } = jwt.decode(customer.token, { complete: true })!;
        assert.equal(header.alg, alg);
        const stored = await app.trailwire.store.listSigningKeys();
        const mine = stored.find((key) => key.kid === header.kid);
        assert.ok(mine, 'the key is registered in the store');
        assert.equal(mine.privateKeyPem, null, 'without its private key');
        assert.match(mine.publicKeyPem ?? '', /BEGIN PUBLIC KEY/);
        assert.ok(!JSON.stringify(stored).includes(privateKeyPem.split('\n')[1]!), 'no part of the private key is stored');
        assert.equal((await app.call('GET', '/api/v1/fleets', { token: customer.token })).status, 200);
        assert.deepEqual(
          app.trailwire.keys.list().map(({ status, storage }) => ({ status, storage })),
          [{ status: 'current', storage: 'file' }],
        );
        await assert.rejects(app.trailwire.keys.rotate(), /rotate it by starting the servers with a new key file/);
      } finally {
        await app.close();
      }
    });
  }

  it('refuses a key of another type', async () => {
    const { privateKey } = generateKeyPairSync('ed25519');
    await assert.rejects(
      startTestApp({ core: { signingKeys: { privateKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString() } } }),
      /RSA \(RS256\) or EC P-256 \(ES256\), not ed25519/,
    );
  });
});
