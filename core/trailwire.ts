/**
 * The composition root of the core: `createTrailwire` assembles the services a transport mounts
 * (auth, reads, admin, limits, intake, the live hub) over one store, one window-counter backend,
 * one intake queue, one live bus and one rotation feed. Adapters (Koa, gRPC) take the returned `Trailwire` and never
 * build services themselves; the server starts and stops its intake worker.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { AdminService } from './admin-service.ts';
import { AuthService } from './auth-service.ts';
import { type Clock, type IdGenerator, randomIds, systemClock, timeOrderedIds } from './clock.ts';
import { CursorCodec } from './paging.ts';
import { ReadService, type ReadServiceOptions } from './read-service.ts';
import { FixedWindowLimiter, MemoryWindowCounter, type WindowCounter } from './rate-limit.ts';
import { type SigningAlgorithm, SigningKeyRing } from './signing-keys.ts';
import type { TrailwireStore, WebhookDeliveryStore } from './store.ts';
import { DEFAULT_TOKEN_TTL_SECONDS, KeyVersions, TokenService, type TokenServiceOptions } from './tokens.ts';
import { type IntakeQueue, isProcessable } from './intake-queue.ts';
import { IntakeService } from './intake-service.ts';
import { IntakeWorker, type IntakeWorkerDependencies, type IntakeWorkerOptions } from './intake-worker.ts';
import { endStreamsOnRotation, LiveHub, type LiveHubOptions } from './live-hub.ts';
import { storeLiveSnapshot } from './live-snapshot.ts';
import type { LiveConnectLimits } from './live-streams.ts';
import { createProductRegistry, type IntakeLimit, type Product, type ProductRegistry } from './products.ts';
import { MemoryRotationFeed, PrincipalRotations, resolveRotationOptions, type RotationOptions } from './rotation-feed.ts';
import { type OperatorChangeOptions, TrailerChangeFeed } from './trailer-changes.ts';
import { PartnerIntakeRules, type PartnerIntakeOptions } from './partner-intake-rules.ts';
import { DEFAULT_WEBHOOK_ADDRESS_RULES, type WebhookAddressRules } from './webhook-address.ts';
import { WebhookDeliverer, type WebhookDelivererOptions } from './webhook-deliverer.ts';
import { WebhookSender } from './webhook-sender.ts';
import { WEBHOOK_ID_PREFIX, WebhookService } from './webhook-service.ts';

/** A fixed-window limit: `requests` per window of `windowSeconds`. */
export interface LimitSetting {
  requests: number;
  windowSeconds: number;
}

export interface LimitSettings {
  /** Authenticate requests per API key presented. Default 10 per 300 s (the specification). */
  authenticate: LimitSetting;
  /** Failed authenticate attempts per client address. Default 30 per 300 s. */
  failedAuthenticatePerAddress: LimitSetting;
  /** Key rotations per partner or customer. Default 3 per 3600 s (the specification). */
  rotate: LimitSetting;
  /** Read API requests per customer. Default 600 per 60 s. */
  read: LimitSetting;
  /**
   * Live streams opened per customer, SSE and LiveFeed together (issue 37: a reconnect storm with
   * snapshots stalled every tenant). Default 120 per 60 s: a customer's 100 streams (the default cap)
   * all reconnecting after a deploy still fit.
   */
  liveConnect: LimitSetting;
  /** Live streams opened per client address. Default 120 per 60 s. */
  liveConnectPerAddress: LimitSetting;
}

export const DEFAULT_LIMITS: LimitSettings = {
  authenticate: { requests: 10, windowSeconds: 300 },
  failedAuthenticatePerAddress: { requests: 30, windowSeconds: 300 },
  rotate: { requests: 3, windowSeconds: 3600 },
  read: { requests: 600, windowSeconds: 60 },
  liveConnect: { requests: 120, windowSeconds: 60 },
  liveConnectPerAddress: { requests: 120, windowSeconds: 60 },
};

export interface TrailwireOptions {
  /** The store (required), opened by the caller; `Trailwire.close()` closes it. */
  store: TrailwireStore;
  /** Where windowed limits count. Default: in-process memory (one process). */
  windowCounter?: WindowCounter;
  /** Default: the system clock. */
  clock?: Clock;
  /** Default: random UUIDs. */
  ids?: IdGenerator;
  /**
   * The JWT signing algorithm asked for: that of the key generated when the store holds none that
   * signs. The signing keys keep their algorithm: while a key of another one signs, `createTrailwire`
   * refuses (`conflict`; change it with `keys.rotate({ algorithm })`). Default: none asked — the
   * store's current key's, RS256 for a first key.
   */
  signingAlgorithm?: SigningAlgorithm;
  /** Where the signing key comes from and how soon other processes' rotations are seen. See `SigningKeysOptions`. */
  signingKeys?: SigningKeysOptions;
  /** Token issuer and lifetime. Defaults: `trailwire`, 1800 s. */
  tokens?: TokenServiceOptions;
  /** Overrides of the default limits, per limit. */
  limits?: Partial<LimitSettings>;
  /** Read API options (device staleness). */
  reads?: ReadServiceOptions;
  /** Verify the VIN check digit (position 9). Default true. */
  verifyVinCheckDigit?: boolean;
  /** The products partners may send (their token's `product:<name>`). Default: none. */
  products?: readonly Product<any>[];
  /** Operator overrides of products' intake limits, by product name. */
  productLimits?: Record<string, Partial<IntakeLimit>>;
  /**
   * Each partner's intake budget and cap of new VINs per day (defaults; the operator sets a
   * partner's own with `trailwire partners set-limit`), whether every customer must grant its
   * partners (`requireGrants`), and how long the rules' caches trust what they read. See
   * `PartnerIntakeOptions` for the defaults (60,000 per 60 s, 10,000 new VINs a day, false).
   */
  partnerIntake?: PartnerIntakeOptions;
  /**
   * The durable intake queue; without one the service takes no intake. With a worker (the default)
   * it must offer the process role too (`ProcessableIntakeQueue`); a queue whose backend processes
   * it (`processedBy: 'backend'`, as `openSqliteIntake`'s with its thread) comes with `worker: false`.
   */
  intakeQueue?: IntakeQueue;
  /**
   * The intake worker this core builds to process its queue (batch size, retries, retention), or
   * `false` when something else processes it — a processing thread, or other processes sharing the
   * queue — so that no worker is built that nobody starts. Default: a worker with default settings.
   */
  worker?: IntakeWorkerOptions | false;
  /** Told of the worker's failed attempts (a retry or a dead letter) and failed batches, for the log. Default: nobody. */
  intakeEvents?: Pick<IntakeWorkerDependencies, 'onAttemptFailed' | 'onRoundFailed'>;
  /** Ids of intake payloads. Default: time-ordered UUIDv7 (`timeOrderedIds` in `core/clock.ts`). */
  intakeIds?: IdGenerator;
  /**
   * The live hub's bus (default: in-process, with a replay window of `replay`), back-pressure bound,
   * and snapshot source (default: the store's). See `core/live-hub.ts`.
   */
  live?: LiveHubOptions;
  /**
   * How a key rotation reaches every process sharing the store, so that each rejects the tokens
   * minted before it and ends the customer's LiveFeed streams (contract 3): `feed` (default
   * in-process, enough for one process; `openRedisRotationFeed` of `trailwire/redis` for several),
   * `recheckAfterSeconds` (how long a cached key version is trusted if a notice is lost; default 30)
   * and `onError` (default: ignored). See `core/rotation-feed.ts`.
   */
  rotations?: RotationOptions;
  /**
   * How operator changes (a trailer assigned or switched, a device switched) reach the LiveFeed of a
   * serving process, including changes made by another process on the same store: `pollMs` (how
   * often the store's change feed is read; default 1,000) and `onError`. See `core/trailer-changes.ts`.
   */
  operatorChanges?: OperatorChangeOptions;
  /** Webhooks: address rules, the per-customer cap, the deliverer's settings. See `WebhookOptions`. */
  webhooks?: WebhookOptions;
}

/** Webhooks (contract 14): where they may go, how many a customer may have, and how they are delivered. */
export interface WebhookOptions {
  /** Allow `http://` URLs and private addresses. Default: neither (https to public addresses only). */
  rules?: Partial<WebhookAddressRules>;
  /** Endpoints per customer. Default 10. */
  maxEndpointsPerCustomer?: number;
  /** How long an attempt may take, connection to answer, in ms. Default 10,000. */
  timeoutMs?: number;
  /** The deliverer's batching, concurrency, leases and retries (`WebhookDelivererOptions`). */
  deliverer?: WebhookDelivererOptions;
  /**
   * Where the deliverer leases endpoints, forms deliveries and records their outcomes. Default: the
   * store's own (`store.webhooks`). `startServer` on SQLite gives its processing thread's, so that
   * these writes never wait on the serving thread for the thread's batches (docs/webhooks.md).
   */
  deliveryStore?: WebhookDeliveryStore;
}

export interface SigningKeysOptions {
  /**
   * A PEM private key (RSA: RS256, EC P-256: ES256) kept outside the store, e.g. read from a mounted
   * secret (`--signing-key-file`). It signs; the store keeps only its public key. Default: none (a key
   * generated and stored in the store).
   */
  privateKeyPem?: string;
  /**
   * How often the signing keys are re-read from the store, in seconds: how soon a rotation or a
   * revocation by another process (`trailwire keys rotate`) takes effect here. Also added to the time
   * a retired key keeps verifying. Default 5.
   */
  refreshSeconds?: number;
  /** Told of a failed refresh (the next one tries again). Default: ignored. */
  onError?: (error: unknown) => void;
  /**
   * Whether opening the keys may write to the store (generate the first key, promote `privateKeyPem`'s).
   * Default true. The CLI's commands pass false: they sign nothing, and a read must never write.
   */
  writes?: boolean;
}

export const DEFAULT_SIGNING_KEY_REFRESH_SECONDS = 5;

export interface Trailwire {
  readonly store: TrailwireStore;
  readonly clock: Clock;
  readonly keys: SigningKeyRing;
  readonly tokens: TokenService;
  readonly auth: AuthService;
  readonly reads: ReadService;
  readonly admin: AdminService;
  /** The per-customer read limit, applied by transports to every read request. */
  readonly readLimiter: FixedWindowLimiter;
  /** The limits on opening live streams, per customer and per address, applied by both live transports. */
  readonly liveConnectLimits: LiveConnectLimits;
  readonly products: ProductRegistry;
  /** Live trailer updates, fanned out per customer (the LiveFeed mounts it). */
  readonly live: LiveHub;
  /**
   * The store's operator-change feed, read into `live`. A serving process calls `start()` (the
   * server does); a one-off command does not need to.
   */
  readonly operatorChanges: TrailerChangeFeed;
  /** The partners' budgets, new-VIN caps and the customers' grants that intake applies. */
  readonly partnerRules: PartnerIntakeRules;
  /**
   * Webhooks: the customers' endpoints (`service`) and the deliverer that sends the outbox to them,
   * which a serving process starts (the server does) and `close()` stops. `stop()` stops delivering
   * alone, as `close()` does first: the connections close, so an attempt in flight fails at once (to
   * be retried) rather than holding the stop for its timeout; a server whose deliverer writes through
   * its intake's processing stops it before that processing ends.
   */
  readonly webhooks: { service: WebhookService; deliverer: WebhookDeliverer; stop(): Promise<void> };
  /** Partner intake, when an intake queue was given. */
  readonly intake: { service: IntakeService; worker: IntakeWorker | undefined; queue: IntakeQueue } | undefined;
  readonly options: { verifyVinCheckDigit: boolean; limits: LimitSettings };
  /** Stops the webhook deliverer (an attempt in flight fails, to be retried), the intake worker and the rotation wiring, closes the live hub, then the store. */
  close(): Promise<void>;
}

/** Assembles the core over a store. Loads (or creates, once) the signing key and paging secret. */
export async function createTrailwire(options: TrailwireOptions): Promise<Trailwire> {
  if (!options?.store) throw new TypeError('createTrailwire: `store` is required');
  if (options.intakeQueue && options.worker !== false && !isProcessable(options.intakeQueue))
    throw new TypeError('createTrailwire: `intakeQueue` has no process role for the core (its backend processes it, or it lacks nextBatch, commitBatch...); pass `worker: false` when its backend processes it');
  const clock = options.clock ?? systemClock;
  const ids = options.ids ?? randomIds;
  const store = options.store;
  const counter = options.windowCounter ?? new MemoryWindowCounter(clock);
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const limiter = (name: string, setting: LimitSetting) =>
    new FixedWindowLimiter({ name, limit: setting.requests, windowSeconds: setting.windowSeconds, counter, clock });

  const rotationSettings = resolveRotationOptions(options.rotations);

  const refreshSeconds = options.signingKeys?.refreshSeconds ?? DEFAULT_SIGNING_KEY_REFRESH_SECONDS;
  if (typeof refreshSeconds !== 'number' || !(refreshSeconds > 0) || !Number.isFinite(refreshSeconds))
    throw new TypeError(`createTrailwire: \`signingKeys.refreshSeconds\` must be a positive number, got ${refreshSeconds}`);
  const keys = await SigningKeyRing.open(store, {
    algorithm: options.signingAlgorithm,
    writes: options.signingKeys?.writes,
    clock,
    privateKeyPem: options.signingKeys?.privateKeyPem,
    // A token signed just before another process's rotation became visible here lives its whole lifetime after it.
    retiredGraceMs: ((options.tokens?.ttlSeconds ?? DEFAULT_TOKEN_TTL_SECONDS) + refreshSeconds) * 1000,
  });
  const onKeyRefreshError = options.signingKeys?.onError ?? (() => {});
  const keyRefresh = setInterval(() => keys.refresh().catch(onKeyRefreshError), refreshSeconds * 1000);
  keyRefresh.unref();
  const keyVersions = new KeyVersions(store, { clock, maxAgeMs: rotationSettings.recheckAfterSeconds * 1000 });
  const tokens = new TokenService(keys, keyVersions, clock, options.tokens);
  const auth = new AuthService(
    store,
    tokens,
    {
      authenticatePerKey: limiter('authenticate', limits.authenticate),
      failedAuthenticatePerAddress: limiter('authenticate-failures', limits.failedAuthenticatePerAddress),
      rotatePerPrincipal: limiter('rotate', limits.rotate),
    },
    clock,
    ids,
  );
  const cursorSecret = await store.getOrCreateSecret('cursor-hmac', randomBytes(32).toString('base64url'));
  const cursors = new CursorCodec(cursorSecret);
  const reads = new ReadService(store, cursors, clock, options.reads);
  const verifyVinCheckDigit = options.verifyVinCheckDigit ?? true;
  const products = createProductRegistry(options.products ?? [], { limitOverrides: options.productLimits });
  // The hub's own bus (when none is given) ages its replay window by the core's clock; snapshots are read from the store.
  const live = new LiveHub({ clock, snapshot: storeLiveSnapshot(store, clock), ...options.live });
  const operatorChanges = new TrailerChangeFeed(store, live, clock, options.operatorChanges);
  const partnerRules = new PartnerIntakeRules(store, counter, clock, options.partnerIntake);
  // An assignment changes who owns a VIN: the rules hear of it from the feed, whichever process made it.
  operatorChanges.onChange((change) => partnerRules.noteTrailerChange(change));
  const admin = new AdminService(store, clock, ids, {
    verifyVinCheckDigit,
    requireGrants: options.partnerIntake?.requireGrants ?? false,
    onTrailerChanged: () => void operatorChanges.poll(),
    onPartnerPolicyChanged: (changed) => partnerRules.forget(changed),
  });
  const rotationFeed = rotationSettings.feed ?? new MemoryRotationFeed();
  const rotations = new PrincipalRotations({ local: auth, keyVersions, feed: rotationFeed, onError: rotationSettings.onError });
  endStreamsOnRotation(rotations, live);

  const webhookRules = { ...DEFAULT_WEBHOOK_ADDRESS_RULES, ...options.webhooks?.rules };
  const webhookSender = new WebhookSender({ rules: webhookRules, timeoutMs: options.webhooks?.timeoutMs });
  const deliveryIds = timeOrderedIds(clock);
  const webhooks = {
    service: new WebhookService(store, cursors, clock, ids, webhookSender, {
      rules: webhookRules,
      maxEndpointsPerCustomer: options.webhooks?.maxEndpointsPerCustomer,
    }),
    deliverer: new WebhookDeliverer(
      // The lease owner names this process (and this core, of several in one process).
      { store: options.webhooks?.deliveryStore ?? store.webhooks, sender: webhookSender, clock, owner: `${hostname()}:${process.pid}:${randomBytes(6).toString('hex')}`, newId: () => WEBHOOK_ID_PREFIX + deliveryIds() },
      options.webhooks?.deliverer,
    ),
    async stop() {
      webhookSender.close();
      await webhooks.deliverer.stop();
    },
  };

  let intake: Trailwire['intake'];
  if (options.intakeQueue) {
    const queue = options.intakeQueue;
    const worker =
      options.worker !== false && isProcessable(queue)
        ? new IntakeWorker(
            {
              queue,
              store,
              products,
              clock,
              grants: { store, requireGrants: partnerRules.options.requireGrants },
              publish: (event) => live.publish(event),
              onAttemptFailed: options.intakeEvents?.onAttemptFailed,
              onRoundFailed: options.intakeEvents?.onRoundFailed,
              // A batch that changed trailers may have filled outboxes: the deliverer looks at once rather than at its next poll.
              onRound: ({ processed }) => {
                if (processed > 0) webhooks.deliverer.notify();
              },
            },
            options.worker,
          )
        : undefined;
    const service = new IntakeService({
      queue,
      products,
      counter,
      clock,
      ids: options.intakeIds ?? timeOrderedIds(clock),
      verifyVinCheckDigit,
      rules: partnerRules,
      // Wakes this core's worker once the enqueue is committed: the only prompt wake of the queues it
      // processes (SQLite's on the event loop, PostgreSQL's, whose LISTEN hears this process only after
      // a round trip, and the partitioned one, which has no hook). A queue its backend processes
      // (SQLite's thread) has no worker here and is woken by its own queue: nothing to wire.
      onEnqueued: worker ? () => worker.notify() : undefined,
    });
    intake = { service, worker, queue };
  }

  return {
    store,
    clock,
    keys,
    tokens,
    auth,
    reads,
    admin,
    readLimiter: limiter('read', limits.read),
    liveConnectLimits: {
      perCustomer: limiter('live-connect', limits.liveConnect),
      perAddress: limiter('live-connect-address', limits.liveConnectPerAddress),
    },
    products,
    live,
    operatorChanges,
    partnerRules,
    webhooks,
    intake,
    options: { verifyVinCheckDigit, limits },
    async close() {
      clearInterval(keyRefresh);
      await webhooks.stop();
      await intake?.worker?.stop();
      await operatorChanges.stop();
      rotations.stop();
      if (rotationSettings.feed === undefined) await rotationFeed.close();
      await live.close();
      await store.close();
    },
  };
}
