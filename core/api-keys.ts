/**
 * API keys (contract 3): 256 random bits behind a prefix that tells the audience at a glance
 * (`twp_` partners, `twc_` customers), shown once, stored only as a SHA-256 hash. A plain hash is
 * the right tool here: the key is high-entropy, so there is nothing for a slow hash to protect, and
 * lookup by hash keeps authentication one indexed query.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Audience } from './model.ts';

export const API_KEY_PREFIX: Record<Audience, string> = { partners: 'twp_', customers: 'twc_' };

/** 32 random bytes in base64url: 43 characters. */
const KEY_BODY = /^[A-Za-z0-9_-]{43}$/;

/** A new random API key of the audience. */
export function generateApiKey(audience: Audience): string {
  return API_KEY_PREFIX[audience] + randomBytes(32).toString('base64url');
}

/** The stored form of a key. */
export function hashApiKey(apiKey: string): string {
  return createHash('sha256').update(apiKey).digest('hex');
}

/** Whether `apiKey` has the shape of a key of this audience (so junk never reaches the store). */
export function looksLikeApiKey(audience: Audience, apiKey: string): boolean {
  const prefix = API_KEY_PREFIX[audience];
  return apiKey.startsWith(prefix) && KEY_BODY.test(apiKey.slice(prefix.length));
}
