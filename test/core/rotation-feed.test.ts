/**
 * Key rotations across processes, in-process parts: the rotation-feed conformance suite against
 * `MemoryRotationFeed` (two `Trailwire`s over one SQLite file sharing one feed); `PrincipalRotations`
 * (what is published, what is noted, its own echo passed over, malformed notices and failures
 * reported); `KeyVersions` (re-read after its max age, one read in flight, a note outliving an
 * older read, the store the truth); and
 * `createTrailwire`'s `rotations` option — the defence in depth when no notice arrives, the
 * option checks, who closes the feed.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { openSqliteStore } from '../../adapters/sqlite/index.ts';
import { ManualClock } from '../../core/clock.ts';
import { TrailwireError } from '../../core/errors.ts';
import type { Audience, Principal } from '../../core/model.ts';
import { MemoryRotationFeed, PrincipalRotations, type RotationFeed, type RotationNotice, type RotationOptions } from '../../core/rotation-feed.ts';
import { KeyVersions } from '../../core/tokens.ts';
import { createTrailwire, type Trailwire, type TrailwireOptions } from '../../core/trailwire.ts';
import { runRotationFeedConformance, sampleNotice } from '../conformance/rotation-feed.ts';

const directory = mkdtempSync(join(tmpdir(), 'trailwire-rotation-'));
after(() => rmSync(directory, { recursive: true, force: true }));
let files = 0;

/** Two `Trailwire`s over one fresh SQLite file: two processes sharing a store, in effect. */
async function twoProcesses(a: Partial<TrailwireOptions>, b: Partial<TrailwireOptions>): Promise<{ a: Trailwire; b: Trailwire; close(): Promise<void> }> {
  const file = join(directory, `shared-${++files}.db`);
  // One after the other: the first creates the signing key and secrets, the second loads them.
  const first = await createTrailwire({ ...a, store: await openSqliteStore({ file }) });
  const second = await createTrailwire({ ...b, store: await openSqliteStore({ file }) });
  return {
    a: first,
    b: second,
    async close() {
      await Promise.all([first.close(), second.close()]);
    },
  };
}

runRotationFeedConformance({
  name: 'MemoryRotationFeed',
  // In-process: every participant shares the one object.
  openFeeds: async (count, onListenerError) => Array(count).fill(new MemoryRotationFeed(onListenerError)),
  async openTwoProcesses() {
    const feed = new MemoryRotationFeed();
    const processes = await twoProcesses({ rotations: { feed } }, { rotations: { feed } });
    return {
      ...processes,
      async close() {
        await processes.close();
        await feed.close();
      },
    };
  },
});

/** A rotation source the test fires by hand, with the version the AuthService would have noted. */
function rotationRig(options: { feed?: RotationFeed; origin?: string } = {}) {
  const localListeners = new Set<(audience: Audience, principalId: string) => void>();
  const noted: [Audience, string, number][] = [];
  const versions = new Map<string, number>();
  const errors: unknown[] = [];
  const feed = options.feed ?? new MemoryRotationFeed();
  const rotations = new PrincipalRotations({
    local: {
      onRotation(listener) {
        localListeners.add(listener);
        return () => localListeners.delete(listener);
      },
    },
    keyVersions: {
      cached: (audience, id) => versions.get(`${audience}:${id}`),
      noteRotation(audience, id, version) {
        noted.push([audience, id, version]);
        versions.set(`${audience}:${id}`, version);
      },
    },
    feed,
    origin: options.origin,
    onError: (error) => errors.push(error),
  });
  const told: string[] = [];
  rotations.onRotation((audience, principalId) => told.push(`${audience}:${principalId}@${versions.get(`${audience}:${principalId}`)}`));
  return {
    rotations,
    feed,
    noted,
    errors,
    told,
    /** What the AuthService does after a committed rotation: note the version, then tell its listeners. */
    rotateLocally(audience: Audience, principalId: string, version: number) {
      versions.set(`${audience}:${principalId}`, version);
      for (const listener of localListeners) listener(audience, principalId);
    },
    localListenerCount: () => localListeners.size,
  };
}

describe('PrincipalRotations', () => {
  it("publishes this process's rotation with its new version and origin, and tells its listeners at once", async () => {
    const heard: RotationNotice[] = [];
    const rig = rotationRig({ origin: 'process-a' });
    rig.feed.subscribe((notice) => heard.push(notice));
    rig.rotateLocally('customers', 'c1', 4);
    assert.deepEqual(rig.told, ['customers:c1@4']);
    await Promise.resolve();
    assert.deepEqual(heard, [{ audience: 'customers', principalId: 'c1', keyVersion: 4, origin: 'process-a' }]);
    assert.deepEqual(rig.noted, [], 'its own notice coming back is passed over');
    assert.deepEqual(rig.told, ['customers:c1@4'], 'listeners are told once');
    assert.deepEqual(rig.errors, []);
  });

  it("notes another process's rotation before telling its listeners", async () => {
    const rig = rotationRig({ origin: 'process-b' });
    await rig.feed.publish(sampleNotice(7, { origin: 'process-a', audience: 'partners', principalId: 'p9' }));
    assert.deepEqual(rig.noted, [['partners', 'p9', 7]]);
    assert.deepEqual(rig.told, ['partners:p9@7'], 'the listener already sees the new version');
  });

  it('passes over its own notice even when it comes back from the feed without a local rotation', async () => {
    const rig = rotationRig();
    await rig.feed.publish(sampleNotice(3, { origin: rig.rotations.origin }));
    assert.deepEqual(rig.noted, []);
    assert.deepEqual(rig.told, []);
    assert.match(rig.rotations.origin, /^[0-9a-f-]{36}$/, 'a random origin by default');
  });

  it('reports a malformed notice and acts on nothing in it', async () => {
    const rig = rotationRig();
    for (const malformed of [{ audience: 'admins', principalId: 'x', keyVersion: 2, origin: 'o' }, { audience: 'customers', principalId: 'x', keyVersion: '2', origin: 'o' }, null])
      await rig.feed.publish(malformed as unknown as RotationNotice);
    assert.deepEqual(rig.noted, []);
    assert.deepEqual(rig.told, []);
    assert.equal(rig.errors.length, 3);
    for (const error of rig.errors) assert.ok(error instanceof TrailwireError && /malformed rotation notice/.test(error.message));
  });

  it('reports a notice that could not be published, after telling its own listeners', async () => {
    const failure = new Error('connection lost');
    const down: RotationFeed = { publish: () => Promise.reject(failure), subscribe: () => () => {}, close: async () => {} };
    const rig = rotationRig({ feed: down });
    rig.rotateLocally('customers', 'c1', 2);
    assert.deepEqual(rig.told, ['customers:c1@2']);
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(rig.errors.length, 1);
    const [error] = rig.errors as TrailwireError[];
    assert.equal(error!.code, 'unavailable');
    assert.equal(error!.cause, failure);
  });

  it('a throwing listener is reported and does not stop the others', async () => {
    const rig = rotationRig();
    const bug = new Error('listener bug');
    rig.rotations.onRotation(() => {
      throw bug;
    });
    const late: string[] = [];
    rig.rotations.onRotation((_, id) => late.push(id));
    await rig.feed.publish(sampleNotice(2, { origin: 'elsewhere', principalId: 'c2' }));
    assert.deepEqual(late, ['c2']);
    assert.deepEqual(rig.errors, [bug]);
  });

  it('stop() unwires it from both the local source and the feed', async () => {
    const rig = rotationRig();
    assert.equal(rig.localListenerCount(), 1);
    rig.rotations.stop();
    rig.rotations.stop();
    assert.equal(rig.localListenerCount(), 0);
    await rig.feed.publish(sampleNotice(2, { origin: 'elsewhere' }));
    assert.deepEqual(rig.noted, []);
    assert.deepEqual(rig.told, []);
  });
});

/** A principal store whose reads are counted and can be held open. */
function versionStore(initial: number) {
  let version = initial;
  let reads = 0;
  let gate: Promise<void> | undefined;
  return {
    store: {
      async getPrincipal(audience: Audience, id: string): Promise<Principal | null> {
        reads++;
        const seen = version;
        await gate;
        return { audience, id, name: 'C', keyVersion: seen, createdAt: 0, rotatedAt: null } as Principal;
      },
    },
    set: (next: number) => (version = next),
    reads: () => reads,
    hold() {
      let release!: () => void;
      gate = new Promise((resolve) => (release = resolve));
      return () => {
        gate = undefined;
        release();
      };
    },
  };
}

describe('KeyVersions', () => {
  it('reads the store again once its entry is older than maxAgeMs', async () => {
    const clock = new ManualClock();
    const backing = versionStore(1);
    const versions = new KeyVersions(backing.store, { clock, maxAgeMs: 30_000 });
    assert.equal(await versions.current('customers', 'c1'), 1);
    backing.set(2); // rotated by a process whose notice never came
    clock.advance(29_999);
    assert.equal(await versions.current('customers', 'c1'), 1, 'trusted until it is maxAgeMs old');
    assert.equal(backing.reads(), 1);
    clock.advance(1);
    assert.equal(await versions.current('customers', 'c1'), 2);
    assert.equal(backing.reads(), 2);
  });

  it('without maxAgeMs it reads each principal once; with 0 on every check', async () => {
    const backing = versionStore(1);
    const once = new KeyVersions(backing.store);
    await once.current('customers', 'c1');
    await once.current('customers', 'c1');
    assert.equal(backing.reads(), 1);
    const always = new KeyVersions(backing.store, { maxAgeMs: 0 });
    await always.current('customers', 'c1');
    await always.current('customers', 'c1');
    assert.equal(backing.reads(), 3);
  });

  it('concurrent checks of a stale entry share one store read', async () => {
    const backing = versionStore(5);
    const versions = new KeyVersions(backing.store);
    const release = backing.hold();
    const checks = Array.from({ length: 20 }, () => versions.current('customers', 'c1'));
    release();
    assert.deepEqual(new Set(await Promise.all(checks)), new Set([5]));
    assert.equal(backing.reads(), 1);
  });

  it('a rotation noted during a store read outlives the read, and an older notice changes nothing', async () => {
    const backing = versionStore(1);
    const versions = new KeyVersions(backing.store);
    const release = backing.hold();
    const inFlight = versions.current('customers', 'c1'); // sees version 1 in the store
    versions.noteRotation('customers', 'c1', 2); // the notice arrives before the read answers
    release();
    assert.equal(await inFlight, 2);
    assert.equal(versions.cached('customers', 'c1'), 2);
    versions.noteRotation('customers', 'c1', 1); // a late, older notice
    assert.equal(await versions.current('customers', 'c1'), 2);
  });

  it('the store stays the truth: a bogus notice lasts only until the next re-read', async () => {
    const clock = new ManualClock();
    const backing = versionStore(3);
    const versions = new KeyVersions(backing.store, { clock, maxAgeMs: 30_000 });
    versions.noteRotation('customers', 'c1', 1_000_000);
    assert.equal(await versions.current('customers', 'c1'), 1_000_000);
    clock.advance(30_000);
    assert.equal(await versions.current('customers', 'c1'), 3);
  });

  it('rejects a negative or non-numeric maxAgeMs', () => {
    for (const maxAgeMs of [-1, Number.NaN, '30' as unknown as number])
      assert.throws(() => new KeyVersions(versionStore(1).store, { maxAgeMs }), /maxAgeMs/);
  });
});

describe('createTrailwire rotations option', () => {
  /** A customer authenticated on B (its token checked there), then rotated on A. */
  async function rotateOnAWithTokenOnB(processes: { a: Trailwire; b: Trailwire }) {
    const { a, b } = processes;
    const { apiKey } = await a.auth.createCustomer({ name: 'C' });
    const token = (await b.auth.authenticate('customers', apiKey, '127.0.0.1')).token.accessToken;
    const claims = await b.tokens.verify(token);
    await a.auth.rotate(claims);
    return token;
  }

  it('without a shared feed, B rejects an old token once its cached version is recheckAfterSeconds old (the defence in depth)', async () => {
    const clock = new ManualClock(Date.now());
    // Each process has its own default in-process feed: no notice crosses between them.
    const processes = await twoProcesses({ clock }, { clock });
    try {
      const token = await rotateOnAWithTokenOnB(processes);
      await assert.rejects(processes.a.tokens.verify(token), /rotated/, 'A knows at once');
      clock.advance(29_000);
      await processes.b.tokens.verify(token); // the window a lost notice leaves open
      clock.advance(1_000);
      await assert.rejects(processes.b.tokens.verify(token), (error: unknown) => error instanceof TrailwireError && error.code === 'invalid_token');
    } finally {
      await processes.close();
    }
  });

  it('recheckAfterSeconds: 0 closes that window at the cost of a store read per check', async () => {
    const processes = await twoProcesses({}, { rotations: { recheckAfterSeconds: 0 } });
    try {
      const token = await rotateOnAWithTokenOnB(processes);
      await assert.rejects(processes.b.tokens.verify(token), (error: unknown) => error instanceof TrailwireError && error.code === 'invalid_token');
    } finally {
      await processes.close();
    }
  });

  it('a local rotation still ends the customer\'s streams on its own process', async () => {
    const processes = await twoProcesses({}, {});
    try {
      const { principal, apiKey } = await processes.a.auth.createCustomer({ name: 'C' });
      const claims = await processes.a.tokens.verify((await processes.a.auth.authenticate('customers', apiKey, '127.0.0.1')).token.accessToken);
      const ended: TrailwireError[] = [];
      processes.a.live.subscribe(principal.id, { write: () => true, end: (reason) => ended.push(reason) });
      await processes.a.auth.rotate(claims);
      assert.deepEqual(ended.map((reason) => reason.code), ['invalid_token']);
    } finally {
      await processes.close();
    }
  });

  it('closes the feed it created, and leaves a given one to its owner', async () => {
    const given = new MemoryRotationFeed();
    const processes = await twoProcesses({ rotations: { feed: given } }, {});
    await processes.close();
    await given.publish(sampleNotice(1)); // still open
    await given.close();
  });

  it('rejects bad rotations options, naming the field', async () => {
    const store = await openSqliteStore({ file: ':memory:' });
    try {
      const cases: [string, RotationOptions][] = [
        ['rotations.recheckAfterSeconds', { recheckAfterSeconds: -1 }],
        ['rotations.recheckAfterSeconds', { recheckAfterSeconds: '30' as unknown as number }],
        ['rotations.onError', { onError: 'log' as unknown as () => void }],
        ['rotations.feed', { feed: {} as RotationFeed }],
      ];
      for (const [field, rotations] of cases)
        await assert.rejects(createTrailwire({ store, rotations }), (error: unknown) => error instanceof TypeError && error.message.includes(`\`${field}\``));
    } finally {
      await store.close();
    }
  });
});
