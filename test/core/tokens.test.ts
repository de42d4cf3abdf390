import assert from 'node:assert/strict';
import { createPublicKey } from 'node:crypto';
import { describe, it } from 'node:test';
import jwt from 'jsonwebtoken';
import { ManualClock } from '../../core/clock.ts';
import { TrailwireError } from '../../core/errors.ts';
import type { Principal } from '../../core/model.ts';
import { SigningKeyRing } from '../../core/signing-keys.ts';
import type { PrincipalStore, SecretStore, StoredSigningKey } from '../../core/store.ts';
import { KeyVersions, requireAudience, TokenService } from '../../core/tokens.ts';
import { otherSpellingsOf } from '../support/token-spellings.ts';

/** Just enough of a store for tokens: signing keys and principals' key versions. */
function memoryStore() {
  const keys: StoredSigningKey[] = [];
  const versions = new Map<string, number>();
  const store: SecretStore & Pick<PrincipalStore, 'getPrincipal'> = {
    listSigningKeys: async () => [...keys],
    saveSigningKey: async (key) => {
      if (!keys.some((k) => k.kid === key.kid)) keys.push({ ...key });
    },
    promoteSigningKey: async (key, at) => {
      if (!keys.some((k) => k.kid === key.kid)) keys.push({ ...key });
      for (const other of keys) if (other.kid !== key.kid && other.retiredAt == null) other.retiredAt = at;
    },
    revokeRetiredSigningKeys: async (at) => {
      const revoked = keys.filter((k) => k.retiredAt != null && k.revokedAt == null);
      for (const key of revoked) key.revokedAt = at;
      return revoked.map((key) => key.kid);
    },
    getOrCreateSecret: async (_name, candidate) => candidate,
    getPrincipal: async (audience, id) => {
      const keyVersion = versions.get(`${audience}:${id}`);
      if (keyVersion === undefined) return null;
      return { audience: 'customers', id, name: 'x', keyVersion, createdAt: 0, rotatedAt: null } as Principal;
    },
  };
  return { store, versions };
}

async function setup(algorithm: 'RS256' | 'ES256' = 'RS256') {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const { store, versions } = memoryStore();
  const ring = await SigningKeyRing.open(store, { algorithm, clock, retiredGraceMs: 1805_000 });
  const keyVersions = new KeyVersions(store);
  const tokens = new TokenService(ring, keyVersions, clock);
  versions.set('customers:c1', 1);
  const customer: Principal = { audience: 'customers', id: 'c1', name: 'C', keyVersion: 1, createdAt: 0, rotatedAt: null };
  return { clock, store, versions, ring, keyVersions, tokens, customer };
}

async function rejectsWith(promise: Promise<unknown>, code: string) {
  await assert.rejects(promise, (error: unknown) => error instanceof TrailwireError && error.code === code);
}

describe('TokenService', () => {
  it('mints a JWT with kid and the contract claims, verifiable with the JWKS alone', async () => {
    const { tokens, ring, customer, clock } = await setup();
    const { accessToken, expiresIn, tokenType } = tokens.mint(customer);
    assert.equal(expiresIn, 1800);
    assert.equal(tokenType, 'Bearer');
    const { header } = jwt.decode(accessToken, { complete: true })!;
    assert.equal(header.alg, 'RS256');
    const jwk = ring.jwks().keys.find((key) => key.kid === header.kid);
    assert.ok(jwk, 'the JWKS publishes the signing key');
    const claims = jwt.verify(accessToken, createPublicKey({ key: jwk as never, format: 'jwk' }), {
      clockTimestamp: clock.now() / 1000,
    }) as jwt.JwtPayload;
    assert.equal(claims.iss, 'trailwire');
    assert.equal(claims.aud, 'customers');
    assert.equal(claims.sub, 'c1');
    assert.equal(claims.exp, (claims.iat as number) + 1800);
    assert.match(claims.jti as string, /^[0-9a-f-]{36}$/);
    assert.equal(claims.scope, undefined);
  });

  it('scopes partner tokens to their product', async () => {
    const { tokens, versions } = await setup();
    versions.set('partners:p1', 1);
    const partner: Principal = { audience: 'partners', id: 'p1', name: 'P', product: 'tpms', keyVersion: 1, createdAt: 0, rotatedAt: null };
    const claims = await tokens.verify(tokens.mint(partner).accessToken);
    assert.equal(claims.scope, 'product:tpms');
  });

  it('supports ES256', async () => {
    const { tokens, customer } = await setup('ES256');
    const token = tokens.mint(customer).accessToken;
    assert.equal(jwt.decode(token, { complete: true })?.header.alg, 'ES256');
    assert.equal((await tokens.verify(token)).sub, 'c1');
  });

  it('rejects expired tokens, even from the verified cache', async () => {
    const { tokens, customer, clock } = await setup();
    const token = tokens.mint(customer).accessToken;
    await tokens.verify(token);
    clock.advance(1801 * 1000);
    await rejectsWith(tokens.verify(token), 'invalid_token');
  });

  it('trusts the verified cache only for the very token verified, not one that ends the same way', async () => {
    const { tokens, customer } = await setup();
    const good = tokens.mint(customer).accessToken;
    await tokens.verify(good);
    assert.equal(tokens.cachedClaims(good)?.sub, 'c1');
    // The cache is keyed by the signature's end: a token that shares it but carries other claims is
    // not answered from the cache, and its signature does not verify.
    const [, payload, signature] = good.split('.') as [string, string, string];
    const forgedHeader = Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid: 'forged' })).toString('base64url');
    const forged = `${forgedHeader}.${payload}.${signature}`;
    assert.equal(tokens.cachedClaims(forged), undefined);
    await rejectsWith(tokens.verify(forged), 'invalid_token');
    assert.equal(tokens.cachedClaims(good)?.sub, 'c1');
  });

  for (const algorithm of ['RS256', 'ES256'] as const) {
    it(`refuses the 15 other base64url spellings of a ${algorithm} signature: one token, one cache entry (issue 37)`, async () => {
      const { tokens, customer } = await setup(algorithm);
      const good = tokens.mint(customer).accessToken;
      const spellings = otherSpellingsOf(good);
      assert.equal(spellings.length, 15);
      for (const spelling of spellings) {
        assert.deepEqual(Buffer.from(spelling.split('.')[2]!, 'base64url'), Buffer.from(good.split('.')[2]!, 'base64url'), 'the same signature bytes');
        await rejectsWith(tokens.verify(spelling), 'invalid_token');
        assert.equal(tokens.cachedClaims(spelling), undefined);
      }
      await rejectsWith(tokens.verify(`${good}=`), 'invalid_token');
      assert.equal((await tokens.verify(good)).sub, 'c1', 'the canonical spelling verifies');
      // Something that is no JWT at all (a shell's unset variable) is refused as malformed, not as a misspelled signature.
      await assert.rejects(tokens.verify('undefined'), (error: Error) => (error as TrailwireError).code === 'invalid_token' && !/canonical/.test(error.message));
    });
  }

  it('rejects alg none, a bad signature, a foreign issuer and an unknown kid', async () => {
    const { tokens, customer, store, clock } = await setup();
    const good = tokens.mint(customer).accessToken;
    const [header, payload, signature] = good.split('.') as [string, string, string];
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${payload}.`;
    await rejectsWith(tokens.verify(none), 'invalid_token');
    const flipped = signature.startsWith('A') ? `B${signature.slice(1)}` : `A${signature.slice(1)}`;
    await rejectsWith(tokens.verify(`${header}.${payload}.${flipped}`), 'invalid_token');
    const [key] = await store.listSigningKeys();
    const claims = jwt.decode(good) as jwt.JwtPayload;
    const foreign = jwt.sign({ ...claims, iss: 'someone-else' }, key!.privateKeyPem!, { algorithm: 'RS256', keyid: key!.kid });
    await rejectsWith(tokens.verify(foreign), 'invalid_token');
    const unknownKid = jwt.sign({ ...claims }, key!.privateKeyPem!, { algorithm: 'RS256', keyid: 'nope' });
    await rejectsWith(tokens.verify(unknownKid), 'invalid_token');
    await rejectsWith(tokens.verify('not.a.jwt'), 'invalid_token');
    assert.ok(clock.now() > 0);
  });

  it('rejects every token minted before a rotation, and accepts the ones minted after', async () => {
    const { tokens, customer, keyVersions, versions } = await setup();
    const before = tokens.mint(customer).accessToken;
    await tokens.verify(before);
    versions.set('customers:c1', 2);
    keyVersions.noteRotation('customers', 'c1', 2);
    await rejectsWith(tokens.verify(before), 'invalid_token');
    const after = tokens.mint({ ...customer, keyVersion: 2 }).accessToken;
    assert.equal((await tokens.verify(after)).ver, 2);
  });

  it('requireAudience answers wrong_audience for the other audience', async () => {
    const { tokens, customer } = await setup();
    const claims = await tokens.verify(tokens.mint(customer).accessToken);
    assert.doesNotThrow(() => requireAudience(claims, 'customers'));
    assert.throws(() => requireAudience(claims, 'partners'), (error: unknown) => error instanceof TrailwireError && error.code === 'wrong_audience');
  });
});

describe('SigningKeyRing', () => {
  it('persists its key: a second ring over the same store signs with the same kid', async () => {
    const { store, ring, clock } = await setup();
    const again = await SigningKeyRing.open(store, { algorithm: 'RS256', clock, retiredGraceMs: 1805_000 });
    assert.equal(again.current.kid, ring.current.kid);
  });

  it('keeps its algorithm: after a rotation to ES256, a ring opened with none asked writes nothing and signs ES256 (issue 37)', async () => {
    const { store, ring, clock } = await setup('RS256');
    await ring.rotate({ algorithm: 'ES256' });
    const before = await store.listSigningKeys();
    const again = await SigningKeyRing.open(store, { clock, retiredGraceMs: 1805_000 });
    assert.deepEqual(await store.listSigningKeys(), before, 'no key written');
    assert.equal(again.current.alg, 'ES256');
    assert.deepEqual(again.list().filter((key) => key.status === 'current').map((key) => key.alg), ['ES256'], 'one current key');
  });

  it('refuses to open asking for another algorithm than the one that signs, rather than add a second current key', async () => {
    const { store, clock } = await setup('ES256');
    const before = await store.listSigningKeys();
    await rejectsWith(SigningKeyRing.open(store, { algorithm: 'RS256', clock, retiredGraceMs: 1805_000 }), 'conflict');
    assert.deepEqual(await store.listSigningKeys(), before, 'no key written');
  });

  it('opened with writes: false over an empty store, generates no key; a rotation then makes the first one', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const { store } = memoryStore();
    const ring = await SigningKeyRing.open(store, { clock, retiredGraceMs: 1805_000, writes: false });
    assert.deepEqual(await store.listSigningKeys(), []);
    assert.deepEqual(ring.list(), []);
    const { kid } = await ring.rotate({ algorithm: 'ES256' });
    assert.deepEqual(ring.list().map((key) => [key.kid, key.alg, key.status]), [[kid, 'ES256', 'current']]);
  });
});
