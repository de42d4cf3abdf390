/**
 * The simulator's progress line: the traffic's figures while it runs, then the check of the accepted
 * payloads' states, which against a deployment can wait minutes for the partners' read limits and
 * must not look like a hang.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { formatProgress } from '../../simulator/progress-line.ts';
import type { SimulationProgress } from '../../simulator/simulation.ts';

const traffic: SimulationProgress = {
  elapsedMs: 4200,
  durationMs: 6000,
  sent: 900,
  rate: 240,
  accepted: 700,
  limited: 200,
  clientErrors: 0,
  serverErrors: 1,
  p50Ms: 5,
  p99Ms: 49,
  liveUpdates: 1234,
};

it('shows the traffic while it runs', () => {
  assert.equal(formatProgress(traffic), '    4.2/6s    240 req/s  202 700  429 200  4xx 0  5xx 1  p50 5 ms  p99 49 ms  live 1234');
});

it('then how many accepted payloads have a final state, and why it may take a while', () => {
  const line = formatProgress({ ...traffic, checking: { settled: 640, accepted: 700 } });
  assert.equal(line, "checking  640/700 accepted payloads settled  live 1234  (status reads count against each partner's read limit)");
});
