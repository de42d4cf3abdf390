/**
 * What one partner may do to intake (contract 4, issue 29), so that one partner — or a leaked key —
 * cannot hurt every tenant:
 * - a budget of intake requests per window, counted for every request (refusals included) before its
 *   body is read, so that bad bodies cost the sender and stop costing the server once it is spent;
 * - a cap on the new VINs (ones the store does not know, which processing would create as unassigned
 *   trailers) it may send to per UTC day, so that it cannot fill the disk with made-up trailers;
 * - the customers' grants: a customer that has granted any partner (or every customer, with
 *   `requireGrants`) takes intake for its registered trailers only from its granted partners.
 *
 * The defaults are settings; the operator's per-partner overrides and the grants live in the store
 * (`PartnerPolicyStore`), so a `trailwire` command in another process changes them. A serving process
 * caches them for `refreshSeconds`. Which customer owns a VIN it caches until the store's change feed
 * says otherwise (`noteTrailerChange`, within the feed's poll interval): ownership changes only by an
 * operator's action, which the feed reports whichever process made it, so a VIN reporting every few
 * seconds costs one store read when first seen, not one a minute (`vinOwnerSeconds` only bounds what a
 * missed note could cost). A VIN the store does not know is asked again after a minute, since
 * processing (in any process) makes it a trailer. The window maths is `FixedWindowLimiter`'s; counting
 * is the window counter's, so with Redis the budgets hold across processes.
 *
 * The grant rule (`takesIntakeFrom`) is applied twice: at accept (`checkGrant`, cached as above) and
 * again when a payload is processed (`refusedByGrants`, contract 4, issue 37). A payload accepted
 * while its VIN had no owner (open to any partner of the product) may be processed after an operator
 * registered the VIN to a customer that takes intake only from the partners it granted — or after
 * that customer withdrew the partner's grant. Its data must not land in that customer's trailer,
 * history and live state: the worker dead-letters it (`failed`) with the reason `refusedByGrants`
 * gives, which the partner reads in its status, and which an operator can re-queue after a grant
 * (`trailwire queue retry <id>`). At processing the owners and grants are read as the store holds
 * them, never cached: ownership changes by an operator's registration, which a cache would hear of
 * too late. Per batch, one read of the grants (few: a list); the VINs' owners only when some customer
 * restricts intake (it granted a partner, or `requireGrants`), asked side by side (one statement a
 * batch on PostgreSQL, whose store answers a turn's owners together). On SQLite these reads run
 * inside the batch's write transaction, so a registration commits wholly before or after the batch;
 * on PostgreSQL they run on the pool, and a registration that commits in the few milliseconds between
 * them and the batch's write is seen by the VIN's next payload only.
 */
import type { Clock } from './clock.ts';
import { TrailwireError } from './errors.ts';
import type { IntakeEntry } from './intake-queue.ts';
import { FixedWindowLimiter, type RateLimitState, type WindowCounter } from './rate-limit.ts';
import type { PartnerPolicyStore, TrailerChange, VinOwner } from './store.ts';

export type { VinOwner } from './store.ts';

/** `createTrailwire`'s `partnerIntake` option; every field has a default. */
export interface PartnerIntakeOptions {
  /**
   * Intake requests per partner per window, unless the operator set the partner's own
   * (`trailwire partners set-limit`). Default 60,000 per 60 s: about 1,000 a second, 20,000 trailers
   * reporting every 20 s; a larger partner gets an override.
   */
  budget?: { requests: number; windowSeconds: number };
  /**
   * New VINs (unknown to the store) a partner may send to per UTC day, unless the operator set the
   * partner's own. Default 10,000: a day's worth of a large fleet's new trailers, and ~10 MB of
   * unassigned trailers at most (issue 29 measured ~1 KB of database per trailer).
   */
  newVinsPerDay?: number;
  /** Every customer takes intake for its registered trailers only from partners it granted (`serve --require-grants`). Default false. */
  requireGrants?: boolean;
  /** How long grants and per-partner overrides are cached, in seconds: how soon a change made elsewhere applies here. Default 5. */
  refreshSeconds?: number;
  /**
   * How long the owner of a VIN is cached, in seconds, when the change feed says nothing. Default
   * 3600. The feed tells this process of every assignment within its poll interval (a second by
   * default), so this only bounds how long a missed note could last; a VIN the store does not know
   * is asked again after at most a minute.
   */
  vinOwnerSeconds?: number;
  /** VINs whose owner is cached at most; the oldest is forgotten first. Default 100,000. */
  maxCachedVins?: number;
}

export const DEFAULT_PARTNER_INTAKE: Required<PartnerIntakeOptions> = {
  budget: { requests: 60_000, windowSeconds: 60 },
  newVinsPerDay: 10_000,
  requireGrants: false,
  refreshSeconds: 5,
  vinOwnerSeconds: 3600,
  maxCachedVins: 100_000,
};

const DAY_SECONDS = 24 * 60 * 60;

/**
 * How long "the store has no trailer of this VIN" is believed: processing makes the VIN a trailer
 * within moments of its first payload, in whichever process takes it, and no feed tells of that.
 * Until it is asked again, each payload of the VIN costs a look at the partner's new-VIN count.
 */
const UNKNOWN_VIN_SECONDS = 60;

interface Cached<T> {
  value: T;
  expiresAt: number;
}

/** A small time-bounded cache whose misses load once however many callers wait for them. */
class ExpiringCache<T> {
  private readonly entries = new Map<string, Cached<T>>();
  private readonly loading = new Map<string, Promise<T>>();

  /** @param ttlMs how long a value is fresh: one duration for every value, or one chosen per value */
  constructor(
    private readonly clock: Clock,
    private readonly ttlMs: number | ((value: T) => number),
    private readonly maxEntries: number,
    private readonly load: (key: string) => Promise<T>,
  ) {}

  /** The cached value when fresh (no promise, no microtask), else undefined. */
  fresh(key: string): T | undefined {
    const entry = this.entries.get(key);
    return entry !== undefined && entry.expiresAt > this.clock.now() ? entry.value : undefined;
  }

  get(key: string): T | Promise<T> {
    const value = this.fresh(key);
    if (value !== undefined) return value;
    let pending = this.loading.get(key);
    if (pending === undefined) {
      pending = this.load(key).then(
        (loaded) => {
          this.loading.delete(key);
          this.set(key, loaded);
          return loaded;
        },
        (error: unknown) => {
          this.loading.delete(key);
          throw error;
        },
      );
      this.loading.set(key, pending);
    }
    return pending;
  }

  set(key: string, value: T): void {
    this.entries.delete(key);
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    const ttlMs = typeof this.ttlMs === 'number' ? this.ttlMs : this.ttlMs(value);
    this.entries.set(key, { value, expiresAt: this.clock.now() + ttlMs });
  }

  forget(key: string): void {
    this.entries.delete(key);
  }
}

/** The overrides of one partner as the rules apply them. */
interface PartnerSettings {
  budget: FixedWindowLimiter;
  newVinsPerDay: number;
}

export class PartnerIntakeRules {
  private readonly settings: Required<PartnerIntakeOptions>;
  private readonly owners: ExpiringCache<VinOwner>;
  private readonly grants: ExpiringCache<ReadonlySet<string>>;
  private readonly partners: ExpiringCache<PartnerSettings>;
  /** One limiter per distinct budget: the window maths is the limiter's, the name keeps one count per partner. */
  private readonly budgets = new Map<string, FixedWindowLimiter>();
  private readonly newVinCaps = new Map<number, FixedWindowLimiter>();
  /** Remembers, per partner and UTC day, the new VINs already counted, so a VIN counts once a day. */
  private readonly countedVins: FixedWindowLimiter;
  /**
   * What this process knows `countedVins` holds for today (`partner:VIN`): a VIN that is still new
   * to the store (its trailer not yet made, or the owner cache not yet asked again) skips the
   * lookup — a network round trip with Redis — on each of its payloads after the first.
   */
  private countedToday = { day: -1, vinsByPartner: new Map<string, Set<string>>(), size: 0 };

  constructor(
    private readonly store: PartnerPolicyStore,
    private readonly counter: WindowCounter,
    private readonly clock: Clock,
    options: PartnerIntakeOptions = {},
  ) {
    this.settings = { ...DEFAULT_PARTNER_INTAKE, ...options };
    checkPartnerIntakeOptions(this.settings);
    const { refreshSeconds, vinOwnerSeconds, maxCachedVins } = this.settings;
    const unknownVinMs = Math.min(UNKNOWN_VIN_SECONDS, vinOwnerSeconds) * 1000;
    this.owners = new ExpiringCache(clock, (owner) => (owner.known ? vinOwnerSeconds * 1000 : unknownVinMs), maxCachedVins, (vin) => store.vinOwner(vin));
    // Customers and partners are few next to VINs: a generous bound that only a flood of ids could reach.
    this.grants = new ExpiringCache<ReadonlySet<string>>(clock, refreshSeconds * 1000, 100_000, async (customerId) =>
      new Set((await store.listPartnerGrants({ customerId })).map((grant) => grant.partnerId)),
    );
    this.partners = new ExpiringCache(clock, refreshSeconds * 1000, 100_000, (partnerId) => this.loadPartner(partnerId));
    this.countedVins = new FixedWindowLimiter({ name: 'new-vin-counted', limit: 1, windowSeconds: DAY_SECONDS, counter, clock });
  }

  /** The settings in force (defaults with the options applied). */
  get options(): Readonly<Required<PartnerIntakeOptions>> {
    return this.settings;
  }

  /**
   * Counts one intake request of the partner against its budget; throws `rate_limited` (with the
   * state, for the RateLimit headers) once the budget of the window is spent. Call it for every
   * intake request, before reading its body.
   */
  async admit(partnerId: string, at: number = this.clock.now()): Promise<RateLimitState> {
    const partner = this.partners.fresh(partnerId) ?? (await this.partners.get(partnerId));
    return partner.budget.enforce(partnerId, at);
  }

  /**
   * Whether the partner may write to `vin` (contract 4, "Partner grants"): answers the VIN's owner,
   * or throws `partner_not_granted` when the VIN belongs to a customer that takes intake only from
   * partners it granted and this partner is not one of them.
   */
  async checkGrant(partnerId: string, vin: string): Promise<VinOwner> {
    const owner = this.owners.fresh(vin) ?? (await this.owners.get(vin));
    if (owner.customerId === null) return owner;
    const granted = this.grants.fresh(owner.customerId) ?? (await this.grants.get(owner.customerId));
    if (takesIntakeFrom(granted, partnerId, this.settings.requireGrants)) return owner;
    throw new TrailwireError(
      'partner_not_granted',
      `The customer that owns VIN ${vin} has not granted this partner intake for its trailers; nothing was stored.`,
    );
  }

  /**
   * Counts a VIN the store does not know against the partner's cap of new VINs per UTC day (once per
   * VIN and day); throws `rate_limited` when the cap is reached. Two concurrent first requests for the
   * same new VIN may both count it: the cap errs on the strict side.
   */
  async admitNewVin(partnerId: string, vin: string, at: number = this.clock.now()): Promise<void> {
    const day = Math.floor(at / (DAY_SECONDS * 1000));
    if (this.countedToday.day !== day) this.countedToday = { day, vinsByPartner: new Map(), size: 0 };
    // By partner, then VIN: no key to join per request.
    let counted = this.countedToday.vinsByPartner.get(partnerId);
    if (counted?.has(vin)) return;
    const subject = `${partnerId}:${vin}`;
    if ((await this.countedVins.peek(subject, at)).allowed) {
      const partner = this.partners.fresh(partnerId) ?? (await this.partners.get(partnerId));
      const cap = this.newVinCapOf(partner.newVinsPerDay);
      if (cap === null) throw this.noNewVins(at);
      const state = await cap.consume(partnerId, at);
      if (!state.allowed) throw cap.limitedError(state);
      await this.countedVins.consume(subject, at);
    }
    // Bounded like the owners: past the bound, the count itself (a lookup more per payload) still answers.
    if (this.countedToday.size >= this.settings.maxCachedVins) this.countedToday = { day, vinsByPartner: new Map(), size: 0 };
    counted = this.countedToday.vinsByPartner.get(partnerId);
    if (counted === undefined) this.countedToday.vinsByPartner.set(partnerId, (counted = new Set()));
    if (!counted.has(vin)) {
      counted.add(vin);
      this.countedToday.size++;
    }
  }

  /**
   * Takes an operator change of a trailer from the store's change feed: its owner is known now, so
   * grants apply to it at once rather than when its cached owner expires.
   */
  noteTrailerChange(change: TrailerChange): void {
    this.owners.set(change.trailer.vin, { known: true, customerId: change.fleet?.customerId ?? null });
  }

  /** Forgets what is cached of a VIN's owner, a customer's grants and a partner's overrides (after this process changed them). */
  forget(ids: { vin?: string; customerId?: string; partnerId?: string }): void {
    if (ids.vin !== undefined) this.owners.forget(ids.vin);
    if (ids.customerId !== undefined) this.grants.forget(ids.customerId);
    if (ids.partnerId !== undefined) this.partners.forget(ids.partnerId);
  }

  private async loadPartner(partnerId: string): Promise<PartnerSettings> {
    const overrides = await this.store.getPartnerIntakeLimits(partnerId);
    const budget = overrides?.intake ?? this.settings.budget;
    return { budget: this.budgetOf(budget), newVinsPerDay: overrides?.newVinsPerDay ?? this.settings.newVinsPerDay };
  }

  private budgetOf(setting: { requests: number; windowSeconds: number }): FixedWindowLimiter {
    const key = `${setting.requests}/${setting.windowSeconds}`;
    let limiter = this.budgets.get(key);
    if (!limiter) {
      // One name for every budget: a partner whose override changes mid-window keeps its count.
      limiter = new FixedWindowLimiter({ name: 'partner-intake', limit: setting.requests, windowSeconds: setting.windowSeconds, counter: this.counter, clock: this.clock });
      this.budgets.set(key, limiter);
    }
    return limiter;
  }

  private newVinCapOf(perDay: number): FixedWindowLimiter | null {
    if (perDay === 0) return null;
    let limiter = this.newVinCaps.get(perDay);
    if (!limiter) {
      limiter = new FixedWindowLimiter({ name: 'new-vins', limit: perDay, windowSeconds: DAY_SECONDS, counter: this.counter, clock: this.clock });
      this.newVinCaps.set(perDay, limiter);
    }
    return limiter;
  }

  /** The refusal of a partner whose cap is 0: it sends only to VINs the store knows. */
  private noNewVins(at: number): TrailwireError {
    const dayEnd = (Math.floor(at / (DAY_SECONDS * 1000)) + 1) * DAY_SECONDS * 1000;
    const resetSeconds = Math.max(1, Math.ceil((dayEnd - this.clock.now()) / 1000));
    return new TrailwireError('rate_limited', 'This partner may not send to VINs the service does not know yet (its new-VIN cap is 0).', {
      rateLimit: { allowed: false, limit: 0, remaining: 0, resetSeconds },
    });
  }
}

/**
 * The grant rule of contract 4, for accepting and for processing alike: a customer that granted the
 * partners `granted` takes intake for its registered trailers from `partnerId` when it granted it, or
 * when it granted nobody and the server does not require grants.
 */
export function takesIntakeFrom(granted: ReadonlySet<string>, partnerId: string, requireGrants: boolean): boolean {
  return granted.has(partnerId) || (granted.size === 0 && !requireGrants);
}

export interface GrantsAtProcessing {
  /** Where the owners and grants are read, as of processing. */
  store: Pick<PartnerPolicyStore, 'vinOwner' | 'listPartnerGrants'>;
  /** As the accept path's (`serve --require-grants`): every customer takes intake only from partners it granted. */
  requireGrants: boolean;
}

/** The reason a payload is dead-lettered with, by `seq`, for each entry whose VIN's owner does not take intake from its partner. */
export async function refusedByGrants(grants: GrantsAtProcessing, entries: readonly IntakeEntry[]): Promise<Map<number, string>> {
  const refused = new Map<number, string>();
  const granted = new Map<string, Set<string>>();
  for (const { customerId, partnerId } of await grants.store.listPartnerGrants({})) {
    let partners = granted.get(customerId);
    if (partners === undefined) granted.set(customerId, (partners = new Set()));
    partners.add(partnerId);
  }
  // No customer restricts intake: every partner may write every VIN, whoever owns it.
  if (granted.size === 0 && !grants.requireGrants) return refused;
  const vins = [...new Set(entries.map((entry) => entry.vin))];
  const owners = new Map(await Promise.all(vins.map(async (vin) => [vin, (await grants.store.vinOwner(vin)).customerId] as const)));
  for (const entry of entries) {
    const customerId = owners.get(entry.vin);
    if (customerId == null || takesIntakeFrom(granted.get(customerId) ?? NO_GRANTS, entry.partnerId, grants.requireGrants)) continue;
    refused.set(
      entry.seq,
      `partner_not_granted: the customer that owns VIN ${entry.vin} (registered after this payload was accepted, or since it withdrew the grant) ` +
        'has not granted this partner intake for its trailers; nothing of this payload was written',
    );
  }
  return refused;
}

const NO_GRANTS: ReadonlySet<string> = new Set();

/** Checks the settings once, naming the bad field. */
export function checkPartnerIntakeOptions(settings: Required<PartnerIntakeOptions>): void {
  const positive = (value: unknown) => Number.isSafeInteger(value) && (value as number) >= 1;
  if (!positive(settings.budget?.requests) || !positive(settings.budget?.windowSeconds))
    throw new TypeError(`createTrailwire: \`partnerIntake.budget\` must be { requests, windowSeconds } of positive integers, got ${JSON.stringify(settings.budget)}`);
  if (!Number.isSafeInteger(settings.newVinsPerDay) || settings.newVinsPerDay < 0)
    throw new TypeError(`createTrailwire: \`partnerIntake.newVinsPerDay\` must be a whole number ≥ 0, got ${settings.newVinsPerDay}`);
  if (typeof settings.requireGrants !== 'boolean')
    throw new TypeError(`createTrailwire: \`partnerIntake.requireGrants\` must be a boolean, got ${String(settings.requireGrants)}`);
  for (const field of ['refreshSeconds', 'vinOwnerSeconds', 'maxCachedVins'] as const)
    if (!(settings[field] > 0) || !Number.isFinite(settings[field]))
      throw new TypeError(`createTrailwire: \`partnerIntake.${field}\` must be a positive number, got ${settings[field]}`);
}
