/**
 * Access tokens (contract 3): JWTs signed with the key ring's current key, carrying `kid`, and the
 * claims `iss`, `aud` (the audience), `sub` (the principal id), `iat`, `exp`, `jti`, `scope`
 * (`product:<name>`, partners only) and `ver` — the principal's key version when the token was minted.
 * Rotating a key bumps the version, which is how every token minted before a rotation is rejected.
 *
 * Verification results are cached per token string until the token expires, so a client that
 * reuses its token (as clients should) pays the signature check once; the revocation check still
 * runs on every use, against an in-memory map of current key versions (`KeyVersions`). So a
 * rotation this process learns of — its own, or another process's through the rotation feed
 * (`core/rotation-feed.ts`) — revokes cached tokens too: only `KeyVersions` needs telling.
 */
import { type KeyObject, randomUUID } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { type Clock, systemClock } from './clock.ts';
import { TrailwireError } from './errors.ts';
import type { Audience, Principal } from './model.ts';
import type { SigningKeyRing } from './signing-keys.ts';
import type { PrincipalStore } from './store.ts';

export interface AccessClaims {
  iss: string;
  aud: Audience;
  sub: string;
  iat: number;
  exp: number;
  jti: string;
  /** `product:<name>` on partner tokens. */
  scope?: string;
  /** The principal's key version at mint time. */
  ver: number;
}

export interface IssuedToken {
  accessToken: string;
  tokenType: 'Bearer';
  expiresIn: number;
}

export interface TokenServiceOptions {
  /** The `iss` claim. Default `trailwire`. */
  issuer?: string;
  /** Token lifetime in seconds. Default 1800 (the specification's "about 30 minutes"). */
  ttlSeconds?: number;
  /** How many verified tokens to remember. Default 50,000. */
  verifiedCacheSize?: number;
}

export const DEFAULT_TOKEN_TTL_SECONDS = 1800;

const DEFAULTS = { issuer: 'trailwire', ttlSeconds: DEFAULT_TOKEN_TTL_SECONDS, verifiedCacheSize: 50_000 };

/** The product a partner token is scoped to. */
export function productOfScope(scope: string | undefined): string | undefined {
  return scope?.startsWith('product:') ? scope.slice('product:'.length) : undefined;
}

export interface KeyVersionsOptions {
  /** Measures the age of a cached version. Default: the system clock. */
  clock?: Clock;
  /**
   * How long a cached version is trusted before the next check reads the store again, in ms: the
   * bound on how long a rotation by another process goes unnoticed here when its notice is lost.
   * 0 reads the store on every check. Default `Infinity` (read once; `createTrailwire` passes its
   * `rotations.recheckAfterSeconds`, 30 s by default).
   */
  maxAgeMs?: number;
}

/**
 * Current key versions of principals, read through from the store and kept in memory. A rotation
 * (this process's, or another's through the rotation feed) is noted at once with `noteRotation`;
 * an entry older than `maxAgeMs` is read again, so a missed notice is caught within that time.
 * The store stays the truth: a note is never lowered by an older note, nor by a store read that
 * started before it (which `forget` alone could not promise), but the next re-read replaces it — so
 * a bogus notice cannot lock a principal out for longer than `maxAgeMs`.
 */
export class KeyVersions {
  /** `noted`: the value of `notes` when the entry was last set by a note (0: by a store read). */
  private readonly entries = new Map<string, { version: number | null; checkedAt: number; noted: number }>();
  private notes = 0;
  /** Store reads in flight, so a stale entry under load costs one read, not one per request. */
  private readonly reading = new Map<string, Promise<number | null>>();
  private readonly clock: Clock;
  private readonly maxAgeMs: number;

  constructor(
    private readonly store: Pick<PrincipalStore, 'getPrincipal'>,
    options: KeyVersionsOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
    this.maxAgeMs = options.maxAgeMs ?? Infinity;
    if (typeof this.maxAgeMs !== 'number' || !(this.maxAgeMs >= 0))
      throw new TypeError(`KeyVersions: \`maxAgeMs\` must be a number >= 0, got ${this.maxAgeMs}`);
  }

  /** The principal's current key version (null: no such principal). */
  async current(audience: Audience, id: string): Promise<number | null> {
    const key = `${audience}:${id}`;
    const entry = this.entries.get(key);
    if (entry && this.clock.now() - entry.checkedAt < this.maxAgeMs) return entry.version;
    let read = this.reading.get(key);
    if (!read) {
      read = this.read(key, audience, id).finally(() => this.reading.delete(key));
      this.reading.set(key, read);
    }
    return read;
  }

  /** The version held in memory, without reading the store; undefined when none is held. */
  cached(audience: Audience, id: string): number | null | undefined {
    return this.entries.get(`${audience}:${id}`)?.version;
  }

  /** Records that the principal's key is now at `version` (a lower one than held is ignored). */
  noteRotation(audience: Audience, id: string, version: number): void {
    const key = `${audience}:${id}`;
    const held = this.entries.get(key)?.version;
    this.entries.set(key, { version: held != null && held > version ? held : version, checkedAt: this.clock.now(), noted: ++this.notes });
  }

  /** Drops the cached entry: the next check reads the store. */
  forget(audience: Audience, id: string): void {
    this.entries.delete(`${audience}:${id}`);
  }

  private async read(key: string, audience: Audience, id: string): Promise<number | null> {
    const checkedAt = this.clock.now();
    const notesBefore = this.notes;
    const principal = await this.store.getPrincipal(audience, id);
    const stored = principal?.keyVersion ?? null;
    // A rotation noted while the read was in flight is newer than what the read saw.
    const entry = this.entries.get(key);
    const notedMeanwhile = entry !== undefined && entry.noted > notesBefore && entry.version !== null && stored !== null && entry.version > stored;
    const version = notedMeanwhile ? entry.version : stored;
    this.entries.set(key, { version, checkedAt, noted: notedMeanwhile ? entry.noted : 0 });
    return version;
  }
}

export class TokenService {
  readonly issuer: string;
  readonly ttlSeconds: number;
  private readonly cacheSize: number;
  /**
   * Verified tokens by the end of their signature (`cacheKeyOf`), each with the whole token it was
   * verified for: a lookup hashes a few dozen characters instead of the whole token, which costs
   * most of a microsecond per request for a token of 700 characters, and the whole token is still
   * compared before its claims are trusted.
   */
  private readonly verified = new Map<string, { token: string; claims: AccessClaims }>();
  /** The `kid` that signed each verified token's claims, so a revoked signing key ends cached tokens and streams too. */
  private readonly signedBy = new WeakMap<AccessClaims, string>();

  constructor(
    private readonly keys: SigningKeyRing,
    readonly keyVersions: KeyVersions,
    /** The clock tokens are minted and verified by (a LiveFeed stream ends at `exp` on it too). */
    readonly clock: Clock,
    options: TokenServiceOptions = {},
  ) {
    const settings = { ...DEFAULTS, ...options };
    if (!settings.issuer) throw new TypeError('TokenService: `issuer` must be a non-empty string');
    if (!Number.isInteger(settings.ttlSeconds) || settings.ttlSeconds < 60)
      throw new TypeError(`TokenService: \`ttlSeconds\` must be an integer >= 60, got ${settings.ttlSeconds}`);
    this.issuer = settings.issuer;
    this.ttlSeconds = settings.ttlSeconds;
    this.cacheSize = settings.verifiedCacheSize;
  }

  /** Mints a token for the principal, at its current key version. */
  mint(principal: Principal): IssuedToken {
    const iat = Math.floor(this.clock.now() / 1000);
    const claims: AccessClaims = {
      iss: this.issuer,
      aud: principal.audience,
      sub: principal.id,
      iat,
      exp: iat + this.ttlSeconds,
      jti: randomUUID(),
      ver: principal.keyVersion,
      ...(principal.audience === 'partners' ? { scope: `product:${principal.product}` } : {}),
    };
    const key = this.keys.current;
    const accessToken = jwt.sign(claims, key.privateKey, { algorithm: key.alg, keyid: key.kid });
    return { accessToken, tokenType: 'Bearer', expiresIn: this.ttlSeconds };
  }

  /**
   * The key that verifies a token of this header: the key of its `kid` as the ring holds it now, and
   * only for that key's own algorithm (RFC 8725 3.1: never a list). Throws `invalid_token` for a `kid`
   * the ring does not hold (or no longer trusts) and for any other algorithm. `verify` checks by it,
   * and so does a transport's own JWT middleware (koa-jwt's `secret`).
   */
  verificationKeyFor(header: { kid?: string; alg?: string }): KeyObject {
    const verifier = this.keys.verifierFor(header.kid);
    if (!verifier) throw new TrailwireError('invalid_token', 'The token was not signed by this service (unknown kid).');
    if (header.alg !== verifier.alg) throw new TrailwireError('invalid_token', `The token is invalid: its key signs ${verifier.alg}, not ${String(header.alg)}.`);
    return verifier.publicKey;
  }

  /**
   * What else `jsonwebtoken.verify` checks, by the same rules as `verify`: the issuer, and the time of
   * the injected clock, read at each check (a getter: keep it on this object, do not spread it).
   */
  verifyOptions(): { issuer: string; readonly clockTimestamp: number } {
    const clock = this.clock;
    return {
      issuer: this.issuer,
      get clockTimestamp() {
        return Math.floor(clock.now() / 1000);
      },
    };
  }

  /**
   * Verifies a token fully: signature, issuer, expiry, claim shapes, and key version (revocation).
   * Throws `invalid_token`; does not check the audience (see `requireAudience`).
   */
  async verify(token: string): Promise<AccessClaims> {
    const cached = this.cachedClaims(token);
    if (cached) {
      await this.assertNotRevoked(cached);
      return cached;
    }
    const claims = this.checkClaims(this.verifySignature(token));
    await this.assertNotRevoked(claims);
    this.remember(token, claims);
    return claims;
  }

  /** Validates the shape of verified claims (signature and expiry already checked). */
  checkClaims(decoded: unknown): AccessClaims {
    const claims = decoded as Partial<AccessClaims> | undefined;
    const valid =
      typeof claims === 'object' &&
      claims !== null &&
      (claims.aud === 'partners' || claims.aud === 'customers') &&
      typeof claims.sub === 'string' &&
      Number.isInteger(claims.ver) &&
      Number.isInteger(claims.exp) &&
      (claims.aud === 'customers' || productOfScope(claims.scope) !== undefined);
    if (!valid) throw new TrailwireError('invalid_token', 'The token does not carry the claims this service issues.');
    return claims as AccessClaims;
  }

  /**
   * Throws `invalid_token` when the principal's key was rotated (or the principal removed) since
   * minting, or when the signing key of a token verified here was revoked (`keys rotate --revoke-previous`).
   */
  async assertNotRevoked(claims: AccessClaims): Promise<void> {
    const kid = this.signedBy.get(claims);
    if (kid !== undefined && this.keys.publicKeyFor(kid) === undefined)
      throw new TrailwireError('invalid_token', 'The key that signed this token was revoked; authenticate again.');
    const version = await this.keyVersions.current(claims.aud, claims.sub);
    if (version === null || claims.ver < version)
      throw new TrailwireError('invalid_token', 'The token was minted before the key was rotated; authenticate again.');
  }

  /** Claims of a token verified before and not yet expired. */
  cachedClaims(token: string): AccessClaims | undefined {
    const key = cacheKeyOf(token);
    const entry = this.verified.get(key);
    if (entry === undefined || entry.token !== token) return undefined;
    if (entry.claims.exp * 1000 <= this.clock.now()) {
      this.verified.delete(key);
      return undefined;
    }
    return entry.claims;
  }

  /** Remembers a verified token; the oldest entry goes when the cache is full. */
  remember(token: string, claims: AccessClaims): void {
    const kid = jwt.decode(token, { complete: true })?.header.kid;
    if (kid !== undefined) this.signedBy.set(claims, kid);
    if (this.verified.size >= this.cacheSize) {
      const oldest = this.verified.keys().next().value;
      if (oldest !== undefined) this.verified.delete(oldest);
    }
    this.verified.set(cacheKeyOf(token), { token, claims });
  }

  /**
   * Checks signature, algorithm, issuer and expiry; answers the decoded payload. The key and its
   * algorithm are looked up in the ring on every call, never copied: a rotation to another algorithm
   * (`keys rotate --algorithm ES256`) verifies as soon as the ring has refreshed (issue 29). The event
   * stream and the LiveFeed come through here (`verify`); HTTP's koa-jwt by the same two rules. `audience` is checked
   * separately: a token of the other audience is a 403, not a 401.
   */
  private verifySignature(token: string): unknown {
    assertCanonicalSignature(token);
    try {
      const header = jwt.decode(token, { complete: true })?.header;
      if (!header) throw new Error('not a JWT');
      const key = this.verificationKeyFor(header);
      return jwt.verify(token, key, { ...this.verifyOptions(), algorithms: [header.alg as jwt.Algorithm] });
    } catch (error) {
      if (error instanceof TrailwireError) throw error;
      throw new TrailwireError('invalid_token', describeJwtError(error), { cause: error });
    }
  }
}

/**
 * Throws `invalid_token` unless the token's signature is spelled in canonical base64url (RFC 7515
 * appendix C: no padding, and the spare low bits of the last character zero). A decoder ignores those
 * bits, so each signature has 15 other spellings that verify alike; refusing them keeps one token one
 * string, hence one verified-cache entry. Call it before verifying, as `verify` does.
 */
export function assertCanonicalSignature(token: string): void {
  // Not three parts: no signature to judge; the verifier refuses it as malformed, the clearer reason.
  if (token.split('.', 4).length !== 3) return;
  const signature = token.slice(token.lastIndexOf('.') + 1);
  if (Buffer.from(signature, 'base64url').toString('base64url') !== signature)
    throw new TrailwireError('invalid_token', 'The token is invalid: its signature is not in canonical base64url.');
}

/** Throws `wrong_audience` unless the claims belong to `audience`. */
export function requireAudience(claims: AccessClaims, audience: Audience): void {
  if (claims.aud !== audience)
    throw new TrailwireError('wrong_audience', `This endpoint takes a ${audience.slice(0, -1)} token, not a ${claims.aud.slice(0, -1)} token.`);
}

/** A short, safe reason for a failed verification (jsonwebtoken's messages name no secrets). */
export function describeJwtError(error: unknown): string {
  if (error instanceof jwt.TokenExpiredError) return 'The token has expired; authenticate again.';
  if (error instanceof jwt.JsonWebTokenError) return `The token is invalid: ${error.message}.`;
  return 'The token is invalid.';
}

/**
 * The key a verified token is cached under: the last 32 characters of its signature, random to
 * anyone without the signing key. Two tokens sharing them only share a slot; the whole token decides.
 */
function cacheKeyOf(token: string): string {
  return token.length > 32 ? token.slice(-32) : token;
}
