/**
 * `mountPathOf`: where a host mounted Trailwire, from koa-mount's `ctx.mountPath` or from what
 * Express (or Connect) cut off `req.url`; nothing when neither says, and nothing for a mount path
 * that is not a plain prefix, since it is written into `Location`, the OpenAPI document and HTML.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Context } from 'koa';
import { mountPathOf } from '../../../adapters/koa/mount-path.ts';

const ctxOf = (req: { url: string; originalUrl?: string }, mountPath?: string) => ({ req, ...(mountPath === undefined ? {} : { mountPath }) }) as unknown as Context;

describe('mountPathOf', () => {
  it('reads what Express cut off req.url, the query aside, and the mount path itself as "/"', () => {
    assert.equal(mountPathOf(ctxOf({ url: '/api/v1/fleets?take=2', originalUrl: '/fleet-api/api/v1/fleets?take=2' })), '/fleet-api');
    assert.equal(mountPathOf(ctxOf({ url: '/', originalUrl: '/fleet-api' })), '/fleet-api');
    assert.equal(mountPathOf(ctxOf({ url: '/?x=1', originalUrl: '/fleet-api?x=1' })), '/fleet-api');
    assert.equal(mountPathOf(ctxOf({ url: '/docs', originalUrl: '/v1/trailwire/docs' })), '/v1/trailwire');
  });

  it('reads koa-mount’s ctx.mountPath', () => {
    assert.equal(mountPathOf(ctxOf({ url: '/docs' }, '/fleet-api')), '/fleet-api');
  });

  it('is empty at the root, and for a mount path with anything to escape', () => {
    assert.equal(mountPathOf(ctxOf({ url: '/docs' })), '');
    assert.equal(mountPathOf(ctxOf({ url: '/docs', originalUrl: '/docs' })), '');
    assert.equal(mountPathOf(ctxOf({ url: '/docs', originalUrl: '/a%22%3E%3Cscript%3E/docs' })), '');
    assert.equal(mountPathOf(ctxOf({ url: '/docs', originalUrl: '//evil.example/docs' })), '');
    assert.equal(mountPathOf(ctxOf({ url: '/docs' }, '/a"b')), '');
  });
});
