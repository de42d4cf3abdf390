/**
 * The JWT signing key ring. Keys are asymmetric (RS256 by default: cheapest to verify and the most
 * widely supported; ES256 selectable), persisted through the store so tokens survive a restart and
 * every process sharing a store signs with the same key, and published as a JWKS so anyone can verify
 * a token without a shared secret. The `kid` is the key's RFC 7638 thumbprint.
 */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import type { Clock } from './clock.ts';
import type { SecretStore, StoredSigningKey } from './store.ts';

export type SigningAlgorithm = 'RS256' | 'ES256';

export interface SigningKey {
  kid: string;
  alg: SigningAlgorithm;
  privateKey: KeyObject;
  publicKey: KeyObject;
}

/** A public key in JWK form, as served at `/.well-known/jwks.json`. */
export type PublicJwk = JsonWebKey & { kid: string; alg: SigningAlgorithm; use: 'sig' };

export class SigningKeyRing {
  private readonly byKid: Map<string, SigningKey>;

  private constructor(
    readonly current: SigningKey,
    keys: SigningKey[],
  ) {
    this.byKid = new Map(keys.map((key) => [key.kid, key]));
  }

  /**
   * Loads the persisted keys, creating and saving one of `algorithm` when none exists. When several
   * processes race on a fresh store they all settle on the oldest saved key of the algorithm.
   */
  static async open(store: SecretStore, algorithm: SigningAlgorithm, clock: Clock): Promise<SigningKeyRing> {
    let stored = await store.listSigningKeys();
    if (!stored.some((key) => key.alg === algorithm)) {
      await store.saveSigningKey(generateSigningKey(algorithm, clock.now()));
      stored = await store.listSigningKeys();
    }
    const keys = stored.map(toSigningKey);
    const current = keys.find((key) => key.alg === algorithm);
    if (!current) throw new Error(`no ${algorithm} signing key could be stored`);
    return new SigningKeyRing(current, keys);
  }

  /** The public key that verifies tokens carrying `kid`, if it is one of ours. */
  publicKeyFor(kid: string | undefined): KeyObject | undefined {
    return kid === undefined ? undefined : this.byKid.get(kid)?.publicKey;
  }

  /** The JWKS document: every public key that may still verify a live token. */
  jwks(): { keys: PublicJwk[] } {
    return {
      keys: [...this.byKid.values()].map((key) => ({
        ...(key.publicKey.export({ format: 'jwk' }) as JsonWebKey),
        kid: key.kid,
        alg: key.alg,
        use: 'sig' as const,
      })),
    };
  }

  get algorithms(): SigningAlgorithm[] {
    return [...new Set([...this.byKid.values()].map((key) => key.alg))];
  }
}

function generateSigningKey(alg: SigningAlgorithm, createdAt: number): StoredSigningKey {
  const { privateKey } =
    alg === 'RS256'
      ? generateKeyPairSync('rsa', { modulusLength: 2048 })
      : generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return {
    kid: thumbprint(createPublicKey(privateKey)),
    alg,
    privateKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    createdAt,
  };
}

function toSigningKey(stored: StoredSigningKey): SigningKey {
  const privateKey = createPrivateKey(stored.privateKeyPem);
  return { kid: stored.kid, alg: stored.alg, privateKey, publicKey: createPublicKey(privateKey) };
}

/** RFC 7638: SHA-256 over the required public members in lexicographic order. */
function thumbprint(publicKey: KeyObject): string {
  const jwk = publicKey.export({ format: 'jwk' }) as Record<string, string>;
  const members = jwk.kty === 'RSA' ? { e: jwk.e, kty: jwk.kty, n: jwk.n } : { crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y };
  return createHash('sha256').update(JSON.stringify(members)).digest('base64url');
}
