/**
 * The authentication API's logic (contract 3 and 7), independent of HTTP: exchanging an API key for
 * a token under the authenticate limits, rotating keys under the rotate limit, and provisioning
 * partners and customers for the operator. Rotation listeners let the LiveFeed end the streams of a
 * rotated customer.
 */
import { generateApiKey, hashApiKey, looksLikeApiKey } from './api-keys.ts';
import type { Clock, IdGenerator } from './clock.ts';
import { TrailwireError } from './errors.ts';
import type { Audience, Principal } from './model.ts';
import type { FixedWindowLimiter, RateLimitState } from './rate-limit.ts';
import type { PrincipalStore } from './store.ts';
import type { AccessClaims, IssuedToken, TokenService } from './tokens.ts';

export interface AuthLimiters {
  /** Authenticate requests per API key presented (default 10 per 5 minutes). */
  authenticatePerKey: FixedWindowLimiter;
  /** Failed authenticate attempts per client address (default 30 per 5 minutes). */
  failedAuthenticatePerAddress: FixedWindowLimiter;
  /** Rotations per principal (default 3 per hour). */
  rotatePerPrincipal: FixedWindowLimiter;
}

export interface Authenticated {
  token: IssuedToken;
  /** Who authenticated (for the audit trail). */
  principal: Pick<Principal, 'audience' | 'id'>;
  rateLimit: RateLimitState;
}

export interface Rotated {
  apiKey: string;
  rotatedAt: number;
  rateLimit: RateLimitState;
}

export type RotationListener = (audience: Audience, principalId: string) => void;

export class AuthService {
  private readonly rotationListeners = new Set<RotationListener>();

  constructor(
    private readonly store: PrincipalStore,
    readonly tokens: TokenService,
    private readonly limiters: AuthLimiters,
    private readonly clock: Clock,
    private readonly ids: IdGenerator,
  ) {}

  /**
   * Exchanges an API key for a token. The key presented is counted whether or not it is valid;
   * failures are also counted per client address, and an address over its failure limit is refused
   * before its key is even looked at (so guessing keys from one address stops quickly).
   */
  async authenticate(audience: Audience, apiKey: string | undefined, clientAddress: string): Promise<Authenticated> {
    const addressState = await this.limiters.failedAuthenticatePerAddress.peek(clientAddress);
    if (!addressState.allowed) throw this.limiters.failedAuthenticatePerAddress.limitedError(addressState);

    if (!apiKey) {
      await this.limiters.failedAuthenticatePerAddress.consume(clientAddress);
      throw new TrailwireError('invalid_api_key', 'The X-API-KEY header is required.');
    }
    const keyHash = hashApiKey(apiKey);
    const rateLimit = await this.limiters.authenticatePerKey.enforce(keyHash);
    const principal = looksLikeApiKey(audience, apiKey) ? await this.store.findPrincipalByKeyHash(audience, keyHash) : null;
    if (!principal) {
      await this.limiters.failedAuthenticatePerAddress.consume(clientAddress);
      throw new TrailwireError('invalid_api_key', `The API key is not a current ${audience.slice(0, -1)} key.`);
    }
    return { token: this.tokens.mint(principal), principal: { audience: principal.audience, id: principal.id }, rateLimit };
  }

  /**
   * Replaces the caller's key. From this moment the old key no longer authenticates and every token
   * minted before is rejected; the new key is answered once and stored only as a hash.
   */
  async rotate(claims: AccessClaims): Promise<Rotated> {
    const rateLimit = await this.limiters.rotatePerPrincipal.enforce(`${claims.aud}:${claims.sub}`);
    const apiKey = generateApiKey(claims.aud);
    const rotatedAt = this.clock.now();
    const version = await this.store.rotateKey(claims.aud, claims.sub, hashApiKey(apiKey), rotatedAt, claims.ver);
    // Null: the principal is gone, or another rotation with this token won the race and revoked it.
    if (version === null) throw new TrailwireError('invalid_token', 'The key of this token was already rotated; authenticate with the current key.');
    this.tokens.keyVersions.noteRotation(claims.aud, claims.sub, version);
    for (const listener of this.rotationListeners) listener(claims.aud, claims.sub);
    return { apiKey, rotatedAt, rateLimit };
  }

  /** Calls `listener` after every rotation done by this process. Answers the unsubscribe function. */
  onRotation(listener: RotationListener): () => void {
    this.rotationListeners.add(listener);
    return () => this.rotationListeners.delete(listener);
  }

  /** Operator: issues a partner key for exactly one product integration. */
  async createPartner(input: { name: string; product: string }): Promise<{ principal: Principal; apiKey: string }> {
    const apiKey = generateApiKey('partners');
    const partner = await this.store.createPartner({
      id: this.ids(),
      name: input.name,
      product: input.product,
      keyHash: hashApiKey(apiKey),
      createdAt: this.clock.now(),
    });
    return { principal: { audience: 'partners', ...partner }, apiKey };
  }

  /** Operator: issues a customer key. */
  async createCustomer(input: { name: string }): Promise<{ principal: Principal; apiKey: string }> {
    const apiKey = generateApiKey('customers');
    const customer = await this.store.createCustomer({
      id: this.ids(),
      name: input.name,
      keyHash: hashApiKey(apiKey),
      createdAt: this.clock.now(),
    });
    return { principal: { audience: 'customers', ...customer }, apiKey };
  }
}
