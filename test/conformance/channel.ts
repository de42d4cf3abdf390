/**
 * The conformance suite of the core's publish/subscribe seam (`core/channel.ts`), run against every
 * implementation of every message type: the live bus's (`MemoryLiveBus`, `RedisLiveBus` with and
 * without a replay window; its listeners listen to one customer, `listen`) through
 * `runLiveBusConformance`, and the rotation feed's (`MemoryRotationFeed`, `RedisRotationFeed`)
 * through `runRotationFeedConformance`. The cases:
 * delivery of every message to every listener of every participant sharing the channel, with all
 * fields intact; publish order kept per publisher; a throwing listener stopping no other;
 * unsubscribe; close. Each seam's own suite adds what is its alone (the live bus's replay window, a
 * rotation honoured across processes). A test file names a reason for any case it skips.
 *
 * A networked channel delivers asynchronously, so cases wait for deliveries (never for a fixed
 * time): absence of a delivery is shown by a later marker message that does arrive, which is sound
 * because a channel delivers one publisher's messages in publish order.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Channel } from '../../core/channel.ts';
import { TrailwireError } from '../../core/errors.ts';

export type ChannelCase = 'delivers to every listener' | 'keeps publish order' | 'a throwing listener does not stop the others' | 'unsubscribe' | 'close';

/** What the suite needs of a participant: publishing and closing (listening is `listen`'s). */
export type ChannelParticipant<Message> = Pick<Channel<Message>, 'publish' | 'close'>;

/** Adds a listener to a participant, answering (or resolving to, once it hears everything published after) the function that removes it. */
export type ListenTo<Message, Opened> = (channel: Opened, listener: (message: Message) => void) => (() => void) | Promise<() => void>;

export interface ChannelConformanceOptions<Message, Opened extends ChannelParticipant<Message> = Channel<Message>> {
  /** Names the seam and the implementation in the test titles ("LiveBus: redis"). */
  name: string;
  /**
   * Opens a fresh channel isolated from every other case, answering one handle per participant
   * sharing it: `count` processes, in effect. An in-process channel may answer the same object
   * `count` times; a networked one should answer `count` separate connections. The handles report
   * errors thrown by listeners to `onListenerError` when it is given (see `checksListenerErrors`).
   */
  openChannels(count: number, onListenerError?: (error: unknown) => void): Promise<Opened[]>;
  /**
   * Set when `openChannels` hands `onListenerError` to its channels; without it the case 'a throwing
   * listener does not stop the others' is skipped, saying so (the channel's default would re-throw
   * the case's deliberate error outside the test).
   */
  checksListenerErrors?: boolean;
  /** A message with every field set, told apart from others by `n` (a positive integer). */
  sample(n: number): Message;
  /** The `n` of a message `sample` made, as a listener received it. */
  numberOf(message: Message): number;
  /**
   * A received message as it was published: checks what the channel adds to each message (a live
   * bus's window adds its position) and takes it off. Default: the message as received.
   */
  asPublished?(received: Message, channel: Opened): Message;
  /** How long to wait for a delivery before failing. Default 2,000 ms. */
  deliveryTimeoutMs?: number;
  /** Cases this implementation skips, each with the reason. */
  skip?: Partial<Record<ChannelCase, string>>;
  /**
   * How a listener joins a participant. Default: `subscribe` (a `Channel`). A seam whose listening
   * completes asynchronously (the live bus, listening to one customer) resolves once it does.
   */
  listen?: ListenTo<Message, Opened>;
}

/** Registers the suite's cases with `node:test`. */
export function runChannelConformance<Message, Opened extends ChannelParticipant<Message>>(options: ChannelConformanceOptions<Message, Opened>): void {
  const timeoutMs = options.deliveryTimeoutMs ?? 2_000;
  const { sample, numberOf } = options;
  const listenTo: ListenTo<Message, Opened> = options.listen ?? ((channel, listener) => (channel as unknown as Channel<Message>).subscribe(listener));
  const hear = (channel: Opened) => collect<Message>((listener) => listenTo(channel, listener));
  const asPublished = options.asPublished ?? ((received: Message) => received);
  const skips: Partial<Record<ChannelCase, string>> = {
    ...(options.checksListenerErrors ? {} : { 'a throwing listener does not stop the others': 'openChannels does not take onListenerError' }),
    ...options.skip,
  };

  const caseOf = (name: ChannelCase, body: () => Promise<void>) => {
    it(name, { skip: skips[name] ?? false }, body);
  };

  async function withChannels(count: number, body: (channels: Opened[], reported: unknown[]) => Promise<void>): Promise<void> {
    const reported: unknown[] = [];
    const channels = await options.openChannels(count, (error) => reported.push(error));
    try {
      await body(channels, reported);
    } finally {
      await Promise.all([...new Set(channels)].map((channel) => channel.close()));
    }
  }

  describe(`Channel conformance: ${options.name}`, () => {
    caseOf('delivers to every listener', () =>
      withChannels(2, async ([publisher, peer]) => {
        // Two listeners of the publisher's own handle, one of another participant's.
        const listeners = [await hear(publisher!), await hear(publisher!), await hear(peer!)];
        const message = sample(1);
        await publisher!.publish(message);
        // Every field survives, whatever the channel does to carry it (JSON over a network, say).
        for (const listener of listeners) assert.deepEqual(asPublished((await listener.next(1, timeoutMs))[0]!, publisher!), message);
      }),
    );

    caseOf('keeps publish order', () =>
      withChannels(2, async ([publisher, peer]) => {
        const remote = await hear(peer!);
        const local = await hear(publisher!);
        const messages = Array.from({ length: 200 }, (_, index) => sample(index + 1));
        // Published without waiting for one another: the order is the order of the publish calls.
        await Promise.all(messages.map((message) => publisher!.publish(message)));
        const expected = messages.map(numberOf);
        assert.deepEqual((await remote.next(200, timeoutMs)).map(numberOf), expected);
        assert.deepEqual((await local.next(200, timeoutMs)).map(numberOf), expected);
      }),
    );

    caseOf('a throwing listener does not stop the others', () =>
      withChannels(2, async ([publisher, peer], reported) => {
        const failure = new Error('listener bug');
        await listenTo(peer!, () => {
          throw failure;
        });
        const after = await hear(peer!);
        const local = await hear(publisher!);
        await publisher!.publish(sample(1));
        await publisher!.publish(sample(2));
        assert.deepEqual((await after.next(2, timeoutMs)).map(numberOf), [1, 2], 'a later listener still hears every message');
        assert.deepEqual((await local.next(2, timeoutMs)).map(numberOf), [1, 2]);
        assert.deepEqual(reported, [failure, failure], 'each error is reported, once per message');
      }),
    );

    caseOf('unsubscribe', () =>
      withChannels(2, async ([publisher, peer]) => {
        const leaving = await hear(peer!);
        const staying = await hear(peer!);
        await publisher!.publish(sample(1));
        await leaving.next(1, timeoutMs);
        await staying.next(1, timeoutMs);

        leaving.stop();
        leaving.stop(); // a second call is harmless
        await publisher!.publish(sample(2));
        await publisher!.publish(sample(3));
        assert.deepEqual((await staying.next(2, timeoutMs)).map(numberOf), [2, 3]);
        assert.equal(leaving.received.length, 1, 'an unsubscribed listener receives nothing more');
      }),
    );

    caseOf('close', async () => {
      const [channel] = await options.openChannels(1);
      const listener = await hear(channel!);
      await channel!.close();
      await assert.rejects(channel!.publish(sample(1)), (error: unknown) => {
        assert.ok(error instanceof TrailwireError);
        assert.equal(error.code, 'unavailable');
        return true;
      });
      await channel!.close(); // idempotent
      assert.equal(listener.received.length, 0);
    });
  });
}

/** What a listener of a case received. */
export interface Collector<Message> {
  received: Message[];
  /** Resolves with the next `count` messages not yet taken, failing after `timeoutMs`. */
  next(count: number, timeoutMs: number): Promise<Message[]>;
  stop(): void;
}

/** Adds a recording listener with `listen` (for a `Channel`: `(listener) => channel.subscribe(listener)`); resolves once it listens. */
export async function collect<Message>(listen: (listener: (message: Message) => void) => (() => void) | Promise<() => void>): Promise<Collector<Message>> {
  const received: Message[] = [];
  let taken = 0;
  let waiter: (() => void) | undefined;
  const stop = await listen((message) => {
    received.push(message);
    waiter?.();
  });
  return {
    received,
    stop,
    next(count, timeoutMs) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiter = undefined;
          reject(new Error(`expected ${count} more messages within ${timeoutMs} ms, got ${received.length - taken}`));
        }, timeoutMs);
        const check = () => {
          if (received.length - taken < count) return;
          clearTimeout(timer);
          waiter = undefined;
          const batch = received.slice(taken, taken + count);
          taken += count;
          resolve(batch);
        };
        waiter = check;
        check();
      });
    },
  };
}
