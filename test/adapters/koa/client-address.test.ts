/**
 * The client address behind reverse proxies (issue 29, finding 7). X-Forwarded-For's left-most
 * entries are whatever the client wrote; a proxy appends its peer's address on the right. So with
 * `trustProxy` the address is the right-most entry, and with `trustedProxies` the right-most entry
 * that is not a listed proxy: a spoofed header can neither dodge the failed-authenticate lockout nor
 * lock out somebody else's address.
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { clientAddressResolver } from '../../../adapters/koa/client-address.ts';
import { generateApiKey } from '../../../core/api-keys.ts';
import { startTestApp, type TestApp } from '../../support/test-app.ts';

const request = (peer: string, forwardedFor?: string | string[]) =>
  ({ socket: { remoteAddress: peer }, headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor } }) as unknown as IncomingMessage;

describe('clientAddressResolver', () => {
  it('trusts nothing by default: Koa keeps the socket address', () => {
    assert.equal(clientAddressResolver({}), undefined);
    assert.equal(clientAddressResolver({ trustProxy: false, trustedProxies: [] }), undefined);
  });

  it('with trustProxy takes the right-most entry, the one the proxy appended, never the client-written left-most', () => {
    const addressOf = clientAddressResolver({ trustProxy: true })!;
    assert.equal(addressOf(request('10.0.0.2', '198.51.100.66, 203.0.113.7')), '203.0.113.7');
    assert.equal(addressOf(request('10.0.0.2', ['198.51.100.66', '203.0.113.7'])), '203.0.113.7', 'several header lines are one list');
    assert.equal(addressOf(request('10.0.0.2', '203.0.113.7:51234')), '203.0.113.7', 'a port is not part of the address');
    assert.equal(addressOf(request('10.0.0.2', '[2001:db8::7]:443')), '2001:db8::7');
    assert.equal(addressOf(request('10.0.0.2')), '10.0.0.2', 'without the header, the peer');
  });

  it('with trustedProxies takes the right-most entry that is not a listed proxy, and ignores the header from an unlisted peer', () => {
    const addressOf = clientAddressResolver({ trustedProxies: ['10.0.0.0/8', '::1', '192.0.2.10'] })!;
    // client → CDN edge (192.0.2.10) → load balancer (10.0.0.5) → us.
    assert.equal(addressOf(request('10.0.0.5', '6.6.6.6, 203.0.113.9, 192.0.2.10')), '203.0.113.9');
    assert.equal(addressOf(request('::ffff:10.0.0.5', '203.0.113.9')), '203.0.113.9', 'an IPv4 peer on a dual-stack socket');
    assert.equal(addressOf(request('::1', '2001:db8::9')), '2001:db8::9');
    assert.equal(addressOf(request('203.0.113.50', '10.0.0.1, 198.51.100.1')), '203.0.113.50', 'a peer that is no proxy of ours is the client, whatever it wrote');
    assert.equal(addressOf(request('10.0.0.5', '10.0.0.8, 10.0.0.9')), '10.0.0.8', 'every hop ours: the furthest');
    assert.equal(addressOf(request('10.0.0.5', 'not-an-address, 203.0.113.9')), '203.0.113.9');
    assert.equal(addressOf(request('10.0.0.5', '203.0.113.9, not-an-address')), 'not-an-address', 'garbage is no proxy of ours: it stops the walk');
  });

  it('names a bad proxy entry', () => {
    for (const bad of ['10.0.0.0/33', 'proxy.example.com', '10.0.0.1/8/8', '::1/129', ''])
      assert.throws(() => clientAddressResolver({ trustedProxies: [bad] }), (error: Error) => error.message.includes(JSON.stringify(bad)));
  });
});

/** Three failed authentications from `forwardedFor`, then one with the good key: its status. */
async function lockoutAfterFailures(app: TestApp, apiKey: string, failures: string[], then: string): Promise<number> {
  for (const forwardedFor of failures)
    assert.equal((await app.call('POST', '/api/v1/customers/authenticate', { apiKey: generateApiKey('customers'), headers: { 'x-forwarded-for': forwardedFor } })).status, 401);
  return (await app.call('POST', '/api/v1/customers/authenticate', { apiKey, headers: { 'x-forwarded-for': then } })).status;
}

describe('spoofed X-Forwarded-For behind an appending proxy', () => {
  const limits = { failedAuthenticatePerAddress: { requests: 3, windowSeconds: 300 } };

  it('an attacker who varies the left-most entry is still locked out by the address the proxy appended', async () => {
    const app = await startTestApp({ core: { limits }, app: { trustProxy: true } });
    try {
      const { apiKey } = await app.trailwire.auth.createCustomer({ name: 'Target' });
      const spoofed = ['10.1.1.1, 203.0.113.66', '10.1.1.2, 203.0.113.66', '10.1.1.3, 203.0.113.66'];
      assert.equal(await lockoutAfterFailures(app, apiKey, spoofed, '10.1.1.4, 203.0.113.66'), 429, 'the attacker is locked out');
      assert.equal((await app.call('POST', '/api/v1/customers/authenticate', { apiKey, headers: { 'x-forwarded-for': '198.51.100.1' } })).status, 200, 'others are not');
    } finally {
      await app.close();
    }
  });

  it("an attacker cannot lock out a victim's address by writing it on the left", async () => {
    const app = await startTestApp({ core: { limits }, app: { trustedProxies: ['127.0.0.1', '10.0.0.0/8'] } });
    try {
      const { apiKey } = await app.trailwire.auth.createCustomer({ name: 'Victim Co' });
      const framing = Array.from({ length: 3 }, () => '198.51.100.1, 203.0.113.66, 10.0.0.5');
      assert.equal(await lockoutAfterFailures(app, apiKey, framing, '198.51.100.1, 10.0.0.5'), 200, 'the victim (198.51.100.1 as its proxy saw it) still signs in');
      assert.equal((await app.call('POST', '/api/v1/customers/authenticate', { apiKey, headers: { 'x-forwarded-for': '203.0.113.66, 10.0.0.5' } })).status, 429, 'the attacker is the one locked out');
    } finally {
      await app.close();
    }
  });
});
