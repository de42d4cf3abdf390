/**
 * Where webhooks may be sent (contract 14): `https` only, and never to a private, loopback,
 * link-local, shared, multicast or reserved address — the cloud metadata service (169.254.169.254,
 * fd00:ec2::254) among them — unless the operator allows it (`serve --webhook-allow-http`,
 * `--webhook-allow-private`). A URL is checked when it is registered, and every connection is
 * checked again after its DNS lookup (`guardedLookup`), so a name that resolves to a public address
 * at registration and to an internal one later (DNS rebinding) is still refused.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { invalidField } from './errors.ts';

/** What the operator allows beyond the defaults. */
export interface WebhookAddressRules {
  /** Plain `http://` URLs. Default false. */
  allowHttp: boolean;
  /** Private, loopback, link-local and other non-public addresses. Default false. */
  allowPrivate: boolean;
}

export const DEFAULT_WEBHOOK_ADDRESS_RULES: WebhookAddressRules = { allowHttp: false, allowPrivate: false };

/** Longest URL accepted, in characters. */
export const WEBHOOK_URL_MAX_LENGTH = 2048;

// One list per family: a BlockList checks an IPv4 address against its IPv6 rules too (as mapped
// ::ffff:a.b.c.d), so an IPv4-mapped rule in a shared list would refuse every IPv4 address.
const NON_PUBLIC_V4 = new BlockList();
const NON_PUBLIC_V6 = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], // "this" network
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, the metadata service
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const)
  NON_PUBLIC_V4.addSubnet(network, prefix, 'ipv4');
for (const [network, prefix] of [
  ['::', 127], // unspecified and loopback
  ['::ffff:0:0', 96], // IPv4-mapped: never a webhook's address
  ['64:ff9b:1::', 48], // local-use NAT64
  ['100::', 64], // discard
  ['2001:db8::', 32], // documentation
  ['fc00::', 7], // unique local (fd00:ec2::254, the AWS metadata service, among them)
  ['fe80::', 10], // link-local
  ['ff00::', 8], // multicast
] as const)
  NON_PUBLIC_V6.addSubnet(network, prefix, 'ipv6');

/** Whether `address` (an IPv4 or IPv6 literal) is anything but a public unicast address. */
export function isNonPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return NON_PUBLIC_V4.check(address, 'ipv4');
  if (family === 6) return NON_PUBLIC_V6.check(address, 'ipv6');
  return true;
}

/**
 * Checks a URL a customer registers and answers it normalized; throws `validation_failed` on
 * `/url` naming the rule it breaks. A host name is resolved now, and refused when it does not
 * resolve or any of its addresses is not allowed.
 */
export async function checkWebhookUrl(raw: unknown, rules: WebhookAddressRules): Promise<URL> {
  if (typeof raw !== 'string' || raw.length === 0) throw invalidField('/url', 'is required: an https URL');
  if (raw.length > WEBHOOK_URL_MAX_LENGTH) throw invalidField('/url', `must be at most ${WEBHOOK_URL_MAX_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalidField('/url', 'is not a URL');
  }
  if (url.protocol !== 'https:' && !(rules.allowHttp && url.protocol === 'http:'))
    throw invalidField('/url', rules.allowHttp ? 'must be an http or https URL' : 'must be an https URL (the operator has not allowed http)');
  if (url.username !== '' || url.password !== '') throw invalidField('/url', 'must not carry a user name or password');
  if (url.hash !== '') throw invalidField('/url', 'must not have a fragment');
  if (rules.allowPrivate) return url;
  const host = hostOf(url);
  const addresses = isIP(host) ? [host] : await resolveAll(host);
  if (addresses === null) throw invalidField('/url', `its host ${host} does not resolve`);
  const refused = addresses.find(isNonPublicAddress);
  if (refused !== undefined)
    throw invalidField('/url', `resolves to ${refused}, a private, loopback, link-local or reserved address; webhooks go to public addresses only`);
  return url;
}

/** The URL's host without the brackets of an IPv6 literal. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/** The error a connection to a refused address fails with. */
class WebhookAddressRefused extends Error {
  constructor(readonly host: string, readonly address: string) {
    super(`${host} resolves to ${address}, which is not a public address`);
    this.name = 'WebhookAddressRefused';
  }
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for `http.request` that resolves as `dns.lookup` does and fails the connection when
 * any address is not public (`allowPrivate` false), so what is checked is what is connected to.
 */
export function guardedLookup(rules: WebhookAddressRules) {
  return (hostname: string, options: { all?: boolean; family?: number | string }, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true } as { all: true }, (error, addresses) => {
      if (error) return callback(error, []);
      const refused = rules.allowPrivate ? undefined : addresses.find((entry) => isNonPublicAddress(entry.address));
      if (refused) return callback(Object.assign(new WebhookAddressRefused(hostname, refused.address), { code: 'EWEBHOOKADDRESS' }), []);
      if (options.all) return callback(null, addresses);
      const first = addresses[0]!;
      callback(null, first.address, first.family);
    });
  };
}

function resolveAll(host: string): Promise<string[] | null> {
  return new Promise((resolve) => dnsLookup(host, { all: true }, (error, addresses) => resolve(error ? null : addresses.map((entry) => entry.address))));
}
