/**
 * The JWT signing key ring and the lifecycle of its keys (contract 3, issue 17). Keys are asymmetric
 * (RS256 by default: cheapest to verify and the most widely supported; ES256 selectable), persisted
 * through the store so tokens survive a restart and every process sharing a store signs with the
 * same key, and published as a JWKS so anyone can verify a token without a shared secret. The `kid`
 * is the key's RFC 7638 thumbprint.
 *
 * A key is current (it signs), then retired when a newer one is promoted (`rotate`): a retired key
 * signs nothing new but keeps verifying — and stays in the JWKS — for `retiredGraceMs` after its
 * retirement, which covers the last token it signed (the token lifetime, plus the time another
 * process may take to notice the rotation and stop signing with it), so no request fails during a
 * rollover (RFC 8725 practice). A revoked key (`rotate({ revokePrevious: true })`, for a leaked key)
 * verifies nothing from that moment.
 *
 * The private key can be kept out of the store (`privateKeyPem`, from `--signing-key-file`): then
 * that key signs and the store keeps only its public key, so that every process, and the JWKS of
 * each, knows it.
 *
 * Other processes learn of a rotation by re-reading the store (`refresh`, every few seconds, see
 * `createTrailwire`'s `signingKeys.refreshSeconds`): the store is the one thing every process and
 * the CLI share, whether SQLite or PostgreSQL, with or without Redis.
 */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import type { Clock } from './clock.ts';
import { TrailwireError } from './errors.ts';
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

/** Where a key is in its life, as `trailwire keys list` shows it. */
export interface SigningKeyStatus {
  kid: string;
  alg: SigningAlgorithm;
  createdAt: number;
  /** current: signs; previous: verifies until `until`; expired: its tokens have all expired; revoked: verifies nothing. */
  status: 'current' | 'previous' | 'expired' | 'revoked';
  /** For a previous key: when it stops verifying (epoch ms). */
  until?: number;
  /** For a revoked key: when (epoch ms). */
  revokedAt?: number;
  /** Whether the private key is in the store (`database`) or kept outside it (`file`). */
  storage: 'database' | 'file';
}

export interface SigningKeyRingOptions {
  /**
   * The algorithm the operator asked for. A ring keeps its algorithm: a key of this one is generated
   * only when no key signs yet, and while a key of another algorithm signs, `open` refuses (the way to
   * change it is `rotate({ algorithm })`) rather than add a second current key. Default: none asked —
   * the ring's own, and RS256 for a first key.
   */
  algorithm?: SigningAlgorithm;
  /**
   * Whether `open` may write: generate the first key when none signs, or promote `privateKeyPem`'s key.
   * Default true. False opens the ring as it is, for a process that signs nothing (the CLI's commands:
   * `keys list` and every read must never write).
   */
  writes?: boolean;
  clock: Clock;
  /**
   * A private key (PKCS#8 or PKCS#1/SEC1 PEM, RSA or P-256) kept outside the store: it signs, its
   * algorithm follows from its type, and only its public key is stored. Default: none (the store's).
   */
  privateKeyPem?: string;
  /** How long a retired key keeps verifying, in ms. Required (the token lifetime plus the refresh interval). */
  retiredGraceMs: number;
}

interface RingKey {
  kid: string;
  alg: SigningAlgorithm;
  publicKey: KeyObject;
  privateKey?: KeyObject;
  retiredAt: number | null;
  revokedAt: number | null;
  createdAt: number;
  inStore: boolean;
}

export class SigningKeyRing {
  private keys: RingKey[] = [];
  private signing: RingKey | undefined;
  private readonly listeners = new Set<() => void>();
  private readonly fileKey: RingKey | undefined;

  private constructor(
    private readonly store: SecretStore,
    private readonly options: SigningKeyRingOptions,
  ) {
    if (!Number.isFinite(options.retiredGraceMs) || options.retiredGraceMs < 0)
      throw new TypeError(`SigningKeyRing: \`retiredGraceMs\` must be a finite number >= 0, got ${options.retiredGraceMs}`);
    this.fileKey = options.privateKeyPem === undefined ? undefined : fileKeyOf(options.privateKeyPem, options.clock.now());
  }

  /**
   * Loads the persisted keys. With `privateKeyPem`, that key is promoted in the store (once; the key
   * it replaces retires and keeps verifying); otherwise a key of `algorithm` (RS256 when none is asked)
   * is created and saved when none signs yet — and only then. With `writes: false`, neither. When
   * several processes race on a fresh store they all settle on the oldest saved key.
   */
  static async open(store: SecretStore, options: SigningKeyRingOptions): Promise<SigningKeyRing> {
    const ring = new SigningKeyRing(store, options);
    const fileKey = ring.fileKey;
    const writes = options.writes ?? true;
    if (fileKey) {
      const stored = (await store.listSigningKeys()).find((key) => key.kid === fileKey.kid);
      if (stored?.revokedAt != null) throw new TrailwireError('invalid_token', `The signing key of the key file (kid ${fileKey.kid}) was revoked; give a new key.`);
      if (!stored && writes) await store.promoteSigningKey(toStored(fileKey), options.clock.now());
    } else {
      const stored = await store.listSigningKeys();
      const signs = stored.some((key) => key.retiredAt == null && key.revokedAt == null);
      if (!signs && writes) await store.saveSigningKey(generateSigningKey(options.algorithm ?? 'RS256', options.clock.now()));
    }
    await ring.refresh();
    const signing = ring.signing;
    if (!fileKey && options.algorithm !== undefined && signing && signing.alg !== options.algorithm)
      throw new TrailwireError(
        'conflict',
        `The signing keys sign ${signing.alg} (kid ${signing.kid}), not the ${options.algorithm} asked for: a ring keeps its algorithm. ` +
          `Change it with \`trailwire keys rotate --algorithm ${options.algorithm}\`, or ask for none.`,
      );
    return ring;
  }

  /** The key that signs new tokens. Throws when it is kept in a file this process was not given. */
  get current(): SigningKey {
    const key = this.signing;
    if (!key) throw new TrailwireError('internal', 'No signing key signs yet: this ring was opened without writing (`writes: false`).');
    if (!key.privateKey)
      throw new TrailwireError('internal', 'The current signing key is kept outside the store (--signing-key-file) and this process was not given it.');
    return { kid: key.kid, alg: key.alg, privateKey: key.privateKey, publicKey: key.publicKey };
  }

  /** The public key that verifies tokens carrying `kid`, if it is one of ours and not revoked or past its grace. */
  publicKeyFor(kid: string | undefined): KeyObject | undefined {
    return this.verifierFor(kid)?.publicKey;
  }

  /**
   * The public key and its algorithm for tokens carrying `kid` (as `publicKeyFor`), read from the ring
   * as it is now: after a refresh that brought a key of another algorithm, its tokens verify at once.
   * A token is checked with its key's own algorithm only (RFC 8725 3.1), never a list.
   */
  verifierFor(kid: string | undefined): { publicKey: KeyObject; alg: SigningAlgorithm } | undefined {
    if (kid === undefined) return undefined;
    const key = this.keys.find((candidate) => candidate.kid === kid);
    return key && this.verifies(key) ? { publicKey: key.publicKey, alg: key.alg } : undefined;
  }

  /** The JWKS document: every public key that may still verify a live token. */
  jwks(): { keys: PublicJwk[] } {
    return {
      keys: this.keys
        .filter((key) => this.verifies(key))
        .map((key) => ({ ...(key.publicKey.export({ format: 'jwk' }) as JsonWebKey), kid: key.kid, alg: key.alg, use: 'sig' as const })),
    };
  }

  /** Every key the store holds, oldest first, with its status. */
  list(): SigningKeyStatus[] {
    const now = this.options.clock.now();
    return this.keys.map((key) => {
      const base = { kid: key.kid, alg: key.alg, createdAt: key.createdAt, storage: key.inStore ? ('database' as const) : ('file' as const) };
      if (key.revokedAt !== null) return { ...base, status: 'revoked' as const, revokedAt: key.revokedAt };
      if (key.retiredAt === null) return { ...base, status: 'current' as const };
      const until = key.retiredAt + this.options.retiredGraceMs;
      return { ...base, status: until > now ? ('previous' as const) : ('expired' as const), until };
    });
  }

  /**
   * Makes a new key (of `algorithm`, default the current key's, RS256 when none signs yet) the one that signs, and retires the
   * others; with `revokePrevious`, revokes every retired key at once (their tokens answer 401 and their
   * streams end). Other processes follow at their next `refresh`. Refused while the current key is kept
   * in a file: that one is rotated by giving the servers a new file.
   */
  async rotate(options: { algorithm?: SigningAlgorithm; revokePrevious?: boolean } = {}): Promise<{ kid: string; revoked: string[] }> {
    if (this.fileKey || (this.signing !== undefined && (this.signing.privateKey === undefined || !this.signing.inStore)))
      throw new TrailwireError(
        'conflict',
        'The current signing key is kept in a file (--signing-key-file): rotate it by starting the servers with a new key file.',
      );
    const now = this.options.clock.now();
    const key = generateSigningKey(options.algorithm ?? this.signing?.alg ?? 'RS256', now);
    await this.store.promoteSigningKey(key, now);
    const revoked = options.revokePrevious ? await this.store.revokeRetiredSigningKeys(now) : [];
    await this.refresh();
    return { kid: key.kid, revoked };
  }

  /** Re-reads the store: learns of rotations and revocations by other processes. Tells `onChange` listeners when the keys changed. */
  async refresh(): Promise<void> {
    const stored = await this.store.listSigningKeys();
    const before = this.fingerprint();
    this.keys = stored.map((key) => (key.kid === this.fileKey?.kid ? { ...this.fileKey, ...lifeOf(key) } : toRingKey(key)));
    if (this.fileKey && !this.keys.some((key) => key.kid === this.fileKey!.kid)) this.keys.push(this.fileKey);
    this.signing = this.chooseSigningKey() ?? this.signing;
    if (before !== '' && before !== this.fingerprint()) for (const listener of this.listeners) listener();
  }

  /** Calls `listener` after a refresh that changed the signing key or revoked one. Answers the unsubscribe function. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private verifies(key: RingKey): boolean {
    if (key.revokedAt !== null) return false;
    return key.retiredAt === null || this.options.clock.now() < key.retiredAt + this.options.retiredGraceMs;
  }

  /**
   * The file's key; else a current key kept in a file (another process signs with it: this one must
   * not sign beside it); else the oldest current key, whatever its algorithm (the ring's).
   */
  private chooseSigningKey(): RingKey | undefined {
    if (this.fileKey) return this.keys.find((key) => key.kid === this.fileKey!.kid);
    const candidates = this.keys.filter((key) => key.retiredAt === null && key.revokedAt === null);
    return candidates.find((key) => key.privateKey === undefined) ?? candidates[0];
  }

  private fingerprint(): string {
    if (this.keys.length === 0) return '';
    return `${this.signing?.kid}|${this.keys.map((key) => `${key.kid}:${key.revokedAt ?? ''}`).join(',')}`;
  }
}

/** The algorithm a key's type calls for: RSA → RS256, EC P-256 → ES256. */
export function algorithmOfKey(key: KeyObject): SigningAlgorithm {
  if (key.asymmetricKeyType === 'rsa') return 'RS256';
  if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1') return 'ES256';
  throw new TrailwireError(
    'validation_failed',
    `A signing key must be RSA (RS256) or EC P-256 (ES256), not ${key.asymmetricKeyType}${key.asymmetricKeyDetails?.namedCurve ? ` ${key.asymmetricKeyDetails.namedCurve}` : ''}.`,
  );
}

function fileKeyOf(pem: string, now: number): RingKey {
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(pem);
  } catch (error) {
    throw new TrailwireError('validation_failed', 'The signing key file does not hold a PEM private key.', { cause: error });
  }
  const publicKey = createPublicKey(privateKey);
  return { kid: thumbprint(publicKey), alg: algorithmOfKey(privateKey), privateKey, publicKey, retiredAt: null, revokedAt: null, createdAt: now, inStore: false };
}

function toStored(key: RingKey): StoredSigningKey {
  return { kid: key.kid, alg: key.alg, privateKeyPem: null, publicKeyPem: key.publicKey.export({ format: 'pem', type: 'spki' }).toString(), createdAt: key.createdAt };
}

function lifeOf(stored: StoredSigningKey): Pick<RingKey, 'retiredAt' | 'revokedAt' | 'createdAt'> {
  return { retiredAt: stored.retiredAt ?? null, revokedAt: stored.revokedAt ?? null, createdAt: stored.createdAt };
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

function toRingKey(stored: StoredSigningKey): RingKey {
  const privateKey = stored.privateKeyPem === null ? undefined : createPrivateKey(stored.privateKeyPem);
  const publicKey = privateKey ? createPublicKey(privateKey) : createPublicKey(stored.publicKeyPem!);
  return { kid: stored.kid, alg: stored.alg, privateKey, publicKey, inStore: privateKey !== undefined, ...lifeOf(stored) };
}

/** RFC 7638: SHA-256 over the required public members in lexicographic order. */
function thumbprint(publicKey: KeyObject): string {
  const jwk = publicKey.export({ format: 'jwk' }) as Record<string, string>;
  const members = jwk.kty === 'RSA' ? { e: jwk.e, kty: jwk.kty, n: jwk.n } : { crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y };
  return createHash('sha256').update(JSON.stringify(members)).digest('base64url');
}
