/**
 * The deliverer's retry schedule and settings (contract 14): delays double from the first up to the
 * ceiling, each drawn between half and all of it; with the defaults about 24 hours hold a few dozen
 * attempts; a bad setting is refused naming it. And the address rules: which addresses are public.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_WEBHOOK_DELIVERER_OPTIONS, resolveWebhookDelivererOptions, retryDelay } from '../../core/webhook-deliverer.ts';
import { isNonPublicAddress } from '../../core/webhook-address.ts';

describe('retryDelay', () => {
  it('doubles from the first delay to the ceiling, drawn between half and all of it', () => {
    assert.deepEqual([1, 2, 3, 4].map((attempt) => retryDelay(attempt, 5000, 3_600_000, 1)), [5000, 10_000, 20_000, 40_000]);
    assert.deepEqual([1, 2, 3].map((attempt) => retryDelay(attempt, 5000, 3_600_000, 0)), [2500, 5000, 10_000]);
    assert.equal(retryDelay(30, 5000, 3_600_000, 1), 3_600_000);
    assert.equal(retryDelay(1000, 5000, 3_600_000, 0.5), 2_700_000, 'no overflow far out');
  });

  it('with the defaults, the 24 hours hold a few dozen attempts, the last an hour apart', () => {
    const { retryFirstMs, retryMaxMs, retryPeriodMs } = DEFAULT_WEBHOOK_DELIVERER_OPTIONS;
    for (const random of [0, 1]) {
      let elapsed = 0;
      let attempts = 1;
      while (elapsed < retryPeriodMs) elapsed += retryDelay(attempts++, retryFirstMs, retryMaxMs, random);
      assert.ok(attempts > 20 && attempts < 60, `${attempts} attempts at jitter ${random}`);
    }
  });
});

describe('resolveWebhookDelivererOptions', () => {
  it('fills in the defaults and refuses a bad setting by name', () => {
    assert.deepEqual(resolveWebhookDelivererOptions({ lingerMs: 0 }), { ...DEFAULT_WEBHOOK_DELIVERER_OPTIONS, lingerMs: 0 });
    assert.throws(() => resolveWebhookDelivererOptions({ maxEvents: 0 }), /`maxEvents` must be a positive integer, got 0/);
    assert.throws(() => resolveWebhookDelivererOptions({ concurrency: 1.5 }), /`concurrency`/);
    assert.throws(() => resolveWebhookDelivererOptions({ maxEvents: 5000 }), /`maxEvents` must be at most 1000/);
  });
});

describe('isNonPublicAddress', () => {
  it('tells public unicast addresses from everything else', () => {
    for (const address of ['8.8.8.8', '1.1.1.1', '203.0.114.7', '2606:4700:4700::1111', '2001:4860:4860::8888']) assert.equal(isNonPublicAddress(address), false, address);
    for (const address of ['127.0.0.1', '10.0.0.1', '172.31.255.255', '192.168.0.1', '169.254.169.254', '100.100.100.200', '0.0.0.0', '224.0.0.1', '255.255.255.255', '::1', '::', 'fd00:ec2::254', 'fe80::1', '::ffff:7f00:1', 'ff02::1', 'not an address'])
      assert.equal(isNonPublicAddress(address), true, address);
  });
});
