/**
 * Which address a request comes from, behind reverse proxies (issue 29, finding 7). The failed-
 * authenticate lockout, the access log and the audit lines count per client address, so the address
 * must be one the client cannot choose. `X-Forwarded-For` is a list each proxy appends the address
 * of its peer to: its left-most entries are whatever the client wrote, only the entries written by
 * proxies we trust are facts. So the address is read from the right, as Express's and Fastify's
 * `trustProxy` do with a list of proxies:
 *
 * - nothing trusted (the default): the socket's peer; `X-Forwarded-For` is ignored.
 * - `trustProxy` alone: the peer is one proxy we trust, so the client is the right-most entry (the
 *   one that proxy appended), as Koa's `maxIpsCount: 1`.
 * - `trustedProxies` (addresses and CIDR ranges): when the peer is one of them, walk the list from
 *   the right past every trusted entry; the first untrusted one is the client. A peer that is not
 *   listed is the client itself, whatever it wrote.
 */
import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';
import { TrailwireError } from '../../core/errors.ts';

export interface ClientAddressOptions {
  /** The peer is a reverse proxy: the client is the right-most `X-Forwarded-For` entry. Default false. */
  trustProxy?: boolean;
  /**
   * The reverse proxies to trust, as addresses or CIDR ranges (`10.0.0.0/8`, `::1`, `fd00::/8`):
   * the client is the right-most `X-Forwarded-For` entry that is not one of them. Implies
   * `trustProxy`. Default: none.
   */
  trustedProxies?: readonly string[];
}

/** The client address of a request, by the rules above. */
export type ClientAddressOf = (req: IncomingMessage) => string;

/**
 * The resolver for `options`, or undefined when no proxy is trusted (the socket's address is the
 * client's: Koa's own `ctx.ip` with `proxy` off). Throws `validation_failed` naming a bad entry.
 */
export function clientAddressResolver(options: ClientAddressOptions): ClientAddressOf | undefined {
  const listed = options.trustedProxies ?? [];
  if (listed.length === 0) return options.trustProxy ? rightMostEntry : undefined;
  const trusted = trustedProxyList(listed);
  const isTrusted = (address: string) => {
    const plain = unmapped(address);
    const family = isIP(plain);
    return family !== 0 && trusted.check(plain, family === 4 ? 'ipv4' : 'ipv6');
  };
  return (req) => {
    const peer = req.socket.remoteAddress ?? '';
    if (!isTrusted(peer)) return peer;
    const entries = forwardedFor(req);
    for (let index = entries.length - 1; index >= 0; index--) if (!isTrusted(entries[index]!)) return entries[index]!;
    // Every hop is a proxy of ours: the furthest one is the client as far as anyone can tell.
    return entries[0] ?? peer;
  };
}

/** `trustedProxies` as a `BlockList`, checked; throws `validation_failed` naming a bad entry. */
export function trustedProxyList(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const [address, bits, extra] = entry.trim().split('/');
    const family = isIP(address ?? '');
    const prefix = bits === undefined ? undefined : Number(bits);
    const maxBits = family === 4 ? 32 : 128;
    if (family === 0 || extra !== undefined || (prefix !== undefined && !(Number.isInteger(prefix) && prefix >= 0 && prefix <= maxBits)))
      throw new TrailwireError('validation_failed', `A trusted proxy must be an IP address or a CIDR range such as 10.0.0.0/8, got ${JSON.stringify(entry)}`);
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (prefix === undefined) list.addAddress(address!, type);
    else list.addSubnet(address!, prefix, type);
  }
  return list;
}

function rightMostEntry(req: IncomingMessage): string {
  return forwardedFor(req).at(-1) ?? req.socket.remoteAddress ?? '';
}

/** The `X-Forwarded-For` entries, every header line joined, each trimmed of spaces, a port and brackets. */
function forwardedFor(req: IncomingMessage): string[] {
  const header = req.headers['x-forwarded-for'];
  if (!header) return [];
  return [header]
    .flat()
    .join(',')
    .split(',')
    .map((entry) => bare(entry.trim()))
    .filter((entry) => entry !== '');
}

/** `[2001:db8::1]:443` → `2001:db8::1`, `192.0.2.1:80` → `192.0.2.1`; anything else as it is. */
function bare(entry: string): string {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(entry);
  if (bracketed) return bracketed[1]!;
  const withPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/.exec(entry);
  return withPort ? withPort[1]! : entry;
}

/** `::ffff:10.0.0.1` (an IPv4 peer on a dual-stack socket) → `10.0.0.1`. */
function unmapped(address: string): string {
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}
