/**
 * Key rotations seen by every process sharing one store (contract 3 and 11). A rotation is done by
 * one process, but every process must from then on reject the tokens minted before it, and end the
 * rotated customer's LiveFeed streams with UNAUTHENTICATED. Each process caches principals' key
 * versions (`KeyVersions`), so it has to be told: the rotating process publishes a
 * `RotationNotice` on a `RotationFeed`, and every process sharing the feed notes the new version and
 * ends the customer's streams. `MemoryRotationFeed` is the in-process default (one process needs
 * nothing more); a networked feed (Redis, `trailwire/redis`) carries notices between processes.
 * Every implementation passes `test/conformance/channel.ts` (the contract it shares with the live bus)
 * and `test/conformance/rotation-feed.ts` (a rotation on one process honoured by another).
 *
 * The window. The notice is published once the rotation is committed in the store, so another
 * process learns of it one publish round trip later, and until then still accepts the old tokens:
 * with Redis on the same host, B's streams were ended a median 0.6 ms and at worst under 4 ms after
 * A's `rotate()` answered (test/adapters/redis/rotation-feed.test.ts measures it; add the network
 * round trip between hosts). A client quick enough to use an old token on B inside that window gets
 * one more answer. A stream opened on B with a fresh token before the notice arrives there is ended
 * by it too (the hub does not know a stream's key version); its client re-authenticates and
 * reconnects with the new key.
 *
 * A notice can be lost: the feed's connection is down when it is published or delivered (Redis
 * pub/sub keeps nothing for an absent subscriber). Defence in depth: a process trusts a cached key
 * version only for `recheckAfterSeconds` (default 30) and then reads it again from the store — one
 * primary-key read per principal in use, per process, per 30 s — so a lost notice leaves old tokens
 * accepted for at most that long, and the streams end at their next revocation check (the gRPC
 * heartbeat, 15 s) after it.
 */
import { randomUUID } from 'node:crypto';
import { TrailwireError } from './errors.ts';
import { type Channel, type ChannelListener, MemoryChannel } from './channel.ts';
import type { RotationSource } from './live-hub.ts';
import type { Audience } from './model.ts';
import type { KeyVersions } from './tokens.ts';

/** One rotation of one principal's key, as told to every process. */
export interface RotationNotice {
  audience: Audience;
  principalId: string;
  /** The principal's key version after the rotation: a token whose `ver` is lower is revoked. */
  keyVersion: number;
  /** The process that rotated, so that it can pass over its own notice. */
  origin: string;
}

export type RotationNoticeListener = ChannelListener<RotationNotice>;

/**
 * The seam that carries rotation notices between processes: a `Channel` of notices
 * (`core/channel.ts`), the same contract as the live bus's, held to it by the same suite.
 */
export type RotationFeed = Channel<RotationNotice>;

/**
 * The in-process feed: listeners are called synchronously in `publish`; one that throws does not
 * stop the others (its error goes to `onListenerError`, by default re-thrown asynchronously).
 * Several `Trailwire`s of one process may share one to see each other's rotations.
 */
export class MemoryRotationFeed extends MemoryChannel<RotationNotice> implements RotationFeed {
  constructor(onListenerError?: (error: unknown) => void) {
    super('rotation feed', onListenerError);
  }
}

/** `createTrailwire`'s `rotations` option: how key rotations reach the other processes. */
export interface RotationOptions {
  /**
   * Where rotation notices travel. Default: a new `MemoryRotationFeed`, owned (and closed) by the
   * `Trailwire`: enough for one process. Several processes sharing a store need a shared feed
   * (`openRedisRotationFeed` of `trailwire/redis`); the caller closes it after `Trailwire.close()`.
   */
  feed?: RotationFeed;
  /**
   * How long a process trusts a principal's cached key version before reading it from the store
   * again, in seconds: the most a rotation whose notice was lost goes unnoticed. 0 reads the store
   * on every token check; `Infinity` never re-reads. Default 30.
   */
  recheckAfterSeconds?: number;
  /**
   * Told of a notice that could not be published (the feed is down) or that arrived malformed, and
   * of an error thrown by a rotation listener. Default: ignored — a missed notice is still caught
   * within `recheckAfterSeconds`. The server passes its logger's warn.
   */
  onError?: (error: unknown) => void;
}

export const DEFAULT_ROTATION_OPTIONS = {
  recheckAfterSeconds: 30,
  onError: () => {},
} as const satisfies Omit<Required<RotationOptions>, 'feed'>;

/** Checks `options.rotations` of `createTrailwire`, naming the bad field; answers them with defaults. */
export function resolveRotationOptions(options: RotationOptions = {}): Omit<Required<RotationOptions>, 'feed'> & { feed?: RotationFeed } {
  const settings = { ...DEFAULT_ROTATION_OPTIONS, ...options };
  if (typeof settings.recheckAfterSeconds !== 'number' || !(settings.recheckAfterSeconds >= 0))
    throw new TypeError(`createTrailwire: \`rotations.recheckAfterSeconds\` must be a number >= 0, got ${settings.recheckAfterSeconds}`);
  if (typeof settings.onError !== 'function') throw new TypeError('createTrailwire: `rotations.onError` must be a function');
  const feed = settings.feed;
  if (feed !== undefined && (typeof feed?.publish !== 'function' || typeof feed.subscribe !== 'function' || typeof feed.close !== 'function'))
    throw new TypeError('createTrailwire: `rotations.feed` must be a RotationFeed (publish, subscribe, close)');
  return settings;
}

export interface PrincipalRotationsOptions {
  /** This process's rotations (the `AuthService`), heard after the new version is noted. */
  local: RotationSource;
  /** This process's key versions: read for the notice, told of other processes' rotations. */
  keyVersions: Pick<KeyVersions, 'cached' | 'noteRotation'>;
  feed: RotationFeed;
  /** This process's id on the feed. Default: a random UUID. */
  origin?: string;
  /** See `RotationOptions.onError`. */
  onError: (error: unknown) => void;
}

/**
 * Every rotation this process must act on: its own (heard from the `AuthService` and published on
 * the feed) and those of the other processes (heard on the feed, their version noted in
 * `KeyVersions` before anyone is told). `onRotation` listeners — `endStreamsOnRotation` — hear
 * both, each once: a process's own notice coming back from the feed is passed over, so a stream
 * opened with a fresh token just after a rotation is not ended by the echo.
 */
export class PrincipalRotations implements RotationSource {
  readonly origin: string;
  private readonly listeners = new Set<(audience: Audience, principalId: string) => void>();
  private readonly unwire: (() => void)[];

  constructor(private readonly options: PrincipalRotationsOptions) {
    this.origin = options.origin ?? randomUUID();
    this.unwire = [
      options.local.onRotation((audience, principalId) => this.rotatedHere(audience, principalId)),
      options.feed.subscribe((notice) => this.rotatedElsewhere(notice)),
    ];
  }

  /** Calls `listener` after every rotation, by this process or another. Answers the unsubscribe function. */
  onRotation(listener: (audience: Audience, principalId: string) => void): () => void {
    const registration = (audience: Audience, principalId: string) => listener(audience, principalId);
    this.listeners.add(registration);
    return () => {
      this.listeners.delete(registration);
    };
  }

  /** Stops publishing and listening (the feed itself is closed by its owner). */
  stop(): void {
    for (const undo of this.unwire.splice(0)) undo();
    this.listeners.clear();
  }

  private rotatedHere(audience: Audience, principalId: string): void {
    this.tell(audience, principalId);
    // The AuthService notes the new version before it calls its listeners.
    const keyVersion = this.options.keyVersions.cached(audience, principalId);
    if (typeof keyVersion !== 'number') {
      this.options.onError(new TrailwireError('internal', `The rotation of ${audience}:${principalId} has no key version to publish.`));
      return;
    }
    this.options.feed
      .publish({ audience, principalId, keyVersion, origin: this.origin })
      .catch((error: unknown) =>
        this.options.onError(new TrailwireError('unavailable', `The rotation notice of ${audience}:${principalId} was not published.`, { cause: error })),
      );
  }

  private rotatedElsewhere(notice: RotationNotice): void {
    if (!isRotationNotice(notice)) {
      this.options.onError(new TrailwireError('internal', `A malformed rotation notice was ignored: ${safeJson(notice)}.`));
      return;
    }
    if (notice.origin === this.origin) return;
    this.options.keyVersions.noteRotation(notice.audience, notice.principalId, notice.keyVersion);
    this.tell(notice.audience, notice.principalId);
  }

  private tell(audience: Audience, principalId: string): void {
    for (const listener of this.listeners) {
      try {
        listener(audience, principalId);
      } catch (error) {
        this.options.onError(error);
      }
    }
  }
}

/** Whether `value` has the shape of a notice (a networked feed carries whatever was published). */
export function isRotationNotice(value: unknown): value is RotationNotice {
  const notice = value as Partial<RotationNotice> | null;
  return (
    typeof notice === 'object' &&
    notice !== null &&
    (notice.audience === 'partners' || notice.audience === 'customers') &&
    typeof notice.principalId === 'string' &&
    Number.isInteger(notice.keyVersion) &&
    typeof notice.origin === 'string'
  );
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value)?.slice(0, 200) ?? String(value);
  } catch {
    return String(value);
  }
}
