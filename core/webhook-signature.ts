/**
 * Standard Webhooks signatures (contract 14, https://www.standardwebhooks.com): a secret is
 * `whsec_` and the base64 of 32 random bytes; a delivery carries `webhook-id`, `webhook-timestamp`
 * (Unix seconds) and `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, keyed
 * with the secret's decoded bytes, so receivers verify it with the specification's libraries.
 */
import { createHmac, randomBytes } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';

/** A new signing secret. */
export function newWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

/** The three headers of a delivery of `body` with id `id`, signed at `atMs` (epoch ms). */
export function webhookHeaders(secret: string, id: string, atMs: number, body: string): Record<string, string> {
  const timestamp = String(Math.floor(atMs / 1000));
  const key = Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
  const signature = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': `v1,${signature}` };
}
