/** What a conformance client of any transport records: its messages, and waits on them without sleeping. */
import type { LiveStreamMessage } from '../../conformance/live-stream.ts';

export function recordMessages() {
  const messages: LiveStreamMessage[] = [];
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const waiter of [...waiters]) waiter();
  };
  let ended = false;
  return {
    messages,
    push(message: LiveStreamMessage) {
      messages.push(message);
      wake();
    },
    end() {
      ended = true;
      wake();
    },
    /** Resolves once `predicate` holds; rejects when the stream ends first or after `ms`, naming what arrived. */
    until(predicate: (messages: LiveStreamMessage[]) => boolean, ms = 5_000): Promise<void> {
      return new Promise<void>((resolve, reject) => {
        const fail = (why: string) => {
          const kinds = messages.map((message) => message.kind);
          reject(new Error(`${why}; got ${messages.length} messages, the last ${JSON.stringify(kinds.slice(-5))}`));
        };
        const check = () => {
          if (predicate(messages)) done(resolve);
          else if (ended) done(() => fail('the stream ended'));
        };
        const timer = globalThis.setTimeout(() => done(() => fail(`timed out after ${ms} ms`)), ms);
        const done = (then: () => void) => {
          clearTimeout(timer);
          waiters.delete(check);
          then();
        };
        waiters.add(check);
        check();
      });
    },
  };
}
