/**
 * The simulator's own Standard Webhooks verification (node:crypto, since the `standardwebhooks`
 * package is only a devDependency) agrees with that library: what the library signs it accepts,
 * and it refuses what the library refuses — a changed body, another secret, a replayed timestamp.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { webhookSignatureProblem, type WebhookSignatureHeaders } from '../../simulator/webhook-signature-check.ts';

const secret = `whsec_${randomBytes(32).toString('base64')}`;
const library = new Webhook(secret);
const body = '{"events":[{"type":"trailer.updated","timestamp":"2026-11-29T03:00:00.120Z","data":{"vin":"1HGCM82633A004352"}}]}';

/** The headers the library signs `payload` with at `atMs`, as a sender following the specification sends them. */
function signed(payload: string, atMs = Date.now(), id = 'msg_2b7Kx'): WebhookSignatureHeaders {
  return { id, timestamp: String(Math.floor(atMs / 1000)), signature: library.sign(id, new Date(atMs), payload) };
}

/** The library's verdict on the same delivery: null when it accepts it. */
function libraryVerdict(headers: WebhookSignatureHeaders, payload: string, verifier = library): string | null {
  try {
    verifier.verify(payload, { 'webhook-id': headers.id!, 'webhook-timestamp': headers.timestamp!, 'webhook-signature': headers.signature! });
    return null;
  } catch (error) {
    return (error as Error).message;
  }
}

describe('webhookSignatureProblem', () => {
  it('accepts what the standardwebhooks library signs, as the library does', () => {
    const headers = signed(body);
    assert.equal(libraryVerdict(headers, body), null);
    assert.equal(webhookSignatureProblem(secret, headers, body, Date.now()), null);
  });

  it('refuses a body changed by one space, a signature made with another secret, and a replayed timestamp — as the library does', () => {
    const now = Date.now();
    const tampered = body.replace('"events":[', '"events": [');
    assert.notEqual(libraryVerdict(signed(body, now), tampered), null);
    assert.match(webhookSignatureProblem(secret, signed(body, now), tampered, now) ?? '', /no v1 signature in webhook-signature matches the body/);

    const otherSecret = `whsec_${randomBytes(32).toString('base64')}`;
    assert.notEqual(libraryVerdict(signed(body, now), body, new Webhook(otherSecret)), null);
    assert.match(webhookSignatureProblem(otherSecret, signed(body, now), body, now) ?? '', /no v1 signature/);

    const replayed = signed(body, now - 6 * 60_000);
    assert.notEqual(libraryVerdict(replayed, body), null);
    assert.match(webhookSignatureProblem(secret, replayed, body, now) ?? '', /webhook-timestamp is 36\d s old, beyond the 300 s/);
    // Within the 5 minutes both accept (a receiver's clock a little off the sender's).
    assert.equal(libraryVerdict(signed(body, now - 4 * 60_000), body), null);
    assert.equal(webhookSignatureProblem(secret, signed(body, now - 4 * 60_000), body, now), null);
  });

  it('finds the valid v1 signature among several (a secret being rotated), ignores other versions, and names missing headers', () => {
    const now = Date.now();
    const good = signed(body, now);
    const several = { ...good, signature: `v1a,${good.signature!.slice(3)} v1,${Buffer.alloc(32).toString('base64')} ${good.signature}` };
    assert.equal(libraryVerdict(several, body), null);
    assert.equal(webhookSignatureProblem(secret, several, body, now), null);
    const otherVersionOnly = { ...good, signature: `v1a,${good.signature!.slice(3)}` };
    assert.notEqual(libraryVerdict(otherVersionOnly, body), null);
    assert.notEqual(webhookSignatureProblem(secret, otherVersionOnly, body, now), null);
    assert.equal(webhookSignatureProblem(secret, { ...good, id: undefined, signature: undefined }, body, now), 'no webhook-id, webhook-signature header');
    assert.match(webhookSignatureProblem(secret, { ...good, timestamp: '17e8' }, body, now) ?? '', /is not Unix seconds/);
  });
});
