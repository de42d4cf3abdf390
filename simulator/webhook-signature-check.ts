/**
 * How the simulator's webhook receiver judges a delivery's signature: as a Standard Webhooks
 * receiver does (https://www.standardwebhooks.com) — `webhook-signature` holds one or more
 * space-separated `v1,<base64>` signatures, one of which must be the HMAC-SHA256 of
 * `{webhook-id}.{webhook-timestamp}.{body}` keyed with the base64-decoded secret after `whsec_`, and
 * the timestamp must lie within 5 minutes of the receiver's clock (the libraries refuse a replay).
 *
 * Written with node:crypto, not with the `standardwebhooks` package: that one is a devDependency,
 * and the simulator ships in the package and runs where dev dependencies are not installed.
 * `test/simulator/webhook-signature-check.test.ts` holds this to that library's verdicts. It shares no
 * code with the server's signer (`core/webhook-signature.ts`) on purpose: the simulator judges that
 * signer, and a verifier built on it would agree with its mistakes.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** How far a delivery's timestamp may be from the receiver's clock, as the Standard Webhooks libraries allow. */
export const WEBHOOK_TIMESTAMP_TOLERANCE_S = 5 * 60;

const SECRET_PREFIX = 'whsec_';

/** The three signature headers of a delivery, as received (absent ones undefined). */
export interface WebhookSignatureHeaders {
  id: string | undefined;
  timestamp: string | undefined;
  signature: string | undefined;
}

/**
 * Why a receiver holding `secret` would refuse this delivery, or null when it would accept it.
 * `nowMs` is the receiver's clock in the sender's time (epoch ms).
 */
export function webhookSignatureProblem(secret: string, headers: WebhookSignatureHeaders, body: string, nowMs: number): string | null {
  const { id, timestamp, signature } = headers;
  const missing = (['id', 'timestamp', 'signature'] as const).filter((name) => !headers[name]);
  if (missing.length > 0) return `no ${missing.map((name) => `webhook-${name}`).join(', ')} header`;
  if (!/^\d+$/.test(timestamp!)) return `webhook-timestamp ${JSON.stringify(timestamp)} is not Unix seconds`;
  const skewS = Number(timestamp) - Math.floor(nowMs / 1000);
  if (Math.abs(skewS) > WEBHOOK_TIMESTAMP_TOLERANCE_S)
    return `webhook-timestamp is ${Math.abs(skewS)} s ${skewS < 0 ? 'old' : 'ahead'}, beyond the ${WEBHOOK_TIMESTAMP_TOLERANCE_S} s a Standard Webhooks receiver allows`;
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
  const expected = Buffer.from(createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64'));
  const matches = signature!.split(' ').some((versioned) => {
    const [version, value] = versioned.split(',', 2);
    if (version !== 'v1' || value === undefined) return false;
    const given = Buffer.from(value);
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  return matches ? null : 'no v1 signature in webhook-signature matches the body';
}
