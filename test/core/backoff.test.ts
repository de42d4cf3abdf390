/** The one backoff of the intake path: doubling from the first delay to the ceiling, and back to the first once reset. */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { Backoff } from '../../core/backoff.ts';

it('doubles each delay up to its ceiling, and starts again from the first once reset', () => {
  const backoff = new Backoff(250, 1000);
  assert.deepEqual([backoff.next(), backoff.next(), backoff.next(), backoff.next()], [250, 500, 1000, 1000]);
  backoff.reset();
  assert.equal(backoff.next(), 250);
});
