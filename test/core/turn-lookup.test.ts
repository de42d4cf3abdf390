/**
 * TurnLookup: the lookups of one event-loop turn answered by one call for their keys.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TurnLookup } from '../../core/turn-lookup.ts';

describe('TurnLookup', () => {
  it("answers a turn's lookups with one call for their distinct keys; a key left out answers the missing value", async () => {
    const calls: string[][] = [];
    const lookup = new TurnLookup<string, number>(
      async (keys) => {
        calls.push(keys);
        return new Map(keys.filter((key) => key !== 'absent').map((key) => [key, key.length]));
      },
      () => -1,
    );
    assert.deepEqual(await Promise.all(['a', 'bb', 'absent', 'a'].map((key) => lookup.get(key))), [1, 2, -1, 1]);
    assert.deepEqual(calls, [['a', 'bb', 'absent']]);
    assert.equal(await lookup.get('ccc'), 3, 'a later turn gets a call of its own');
    assert.deepEqual(calls.at(-1), ['ccc']);
  });

  it("fails every lookup of the turn when the call fails, and the next turn's calls again", async () => {
    let failing = true;
    const lookup = new TurnLookup<string, string>(
      async (keys) => {
        if (failing) throw new Error('down');
        return new Map(keys.map((key) => [key, key]));
      },
      () => '',
    );
    const results = await Promise.allSettled([lookup.get('x'), lookup.get('y')]);
    assert.deepEqual(results.map((result) => result.status), ['rejected', 'rejected']);
    failing = false;
    assert.equal(await lookup.get('x'), 'x');
  });
});
