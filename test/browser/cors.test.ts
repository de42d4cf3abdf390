/**
 * CORS from a real browser (issue 31, finding 6): a customer's own web page on another origin calls
 * the read API from Chromium. With `corsOrigins` naming that origin it authenticates, reads its fleets
 * (and the RateLimit headers the server exposes), and opens the live event stream with a
 * `Last-Event-ID`, as the live page does on a reconnect, which only works when the preflight allows
 * that header; intake stays closed to it. A server without the option, or a page on an origin it does
 * not name, is blocked by the browser itself: `fetch` fails and nothing of the answer is readable.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { Browser } from 'playwright-core';
import { launchChromium, skipWithoutChromium, startDemoServer, type DemoServer } from './browser.ts';

/** A server of one empty page: the customer's own web app, on an origin of its own. */
async function startAppOrigin(): Promise<{ origin: string; server: Server }> {
  const server = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end('<!doctype html><title>Customer app</title><p>A customer\'s own app.</p>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  // `localhost`, while the API is on 127.0.0.1: another origin, as a browser counts origins.
  return { origin: `http://localhost:${(server.address() as AddressInfo).port}`, server };
}

/** What the page's script saw of each call: the status and a header or body, or the browser's refusal. */
interface Calls {
  authenticate: { status?: number; token?: boolean; failed?: string };
  fleets: { status?: number; fleets?: string[]; rateLimitRemaining?: string | null; failed?: string };
  live: { status?: number; events?: string[]; failed?: string };
  intake: { status?: number; failed?: string };
}

// A string, not a function: tsx would wrap a named function in a helper the page does not have.
const CALL_THE_API = (api: string, key: string, vin: string) => `(async () => {
  const calls = { authenticate: {}, fleets: {}, live: {}, intake: {} };
  const failed = (error) => error.name + ': ' + error.message;
  let token;
  try {
    const response = await fetch(${JSON.stringify(api)} + '/api/v1/customers/authenticate', { method: 'POST', headers: { 'X-API-KEY': ${JSON.stringify(key)} } });
    calls.authenticate.status = response.status;
    token = (await response.json()).access_token;
    calls.authenticate.token = typeof token === 'string';
  } catch (error) { calls.authenticate.failed = failed(error); }
  try {
    const response = await fetch(${JSON.stringify(api)} + '/api/v1/fleets', { headers: { Authorization: 'Bearer ' + token } });
    calls.fleets.status = response.status;
    calls.fleets.rateLimitRemaining = response.headers.get('RateLimit-Remaining');
    calls.fleets.fleets = (await response.json()).data.map((fleet) => fleet.name);
  } catch (error) { calls.fleets.failed = failed(error); }
  try {
    const controller = new AbortController();
    const response = await fetch(${JSON.stringify(api)} + '/api/v1/live', {
      headers: { Authorization: 'Bearer ' + token, Accept: 'text/event-stream', 'Last-Event-ID': '1-0' },
      signal: controller.signal,
    });
    calls.live.status = response.status;
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let text = '';
    const giveUp = setTimeout(() => controller.abort(), 5000);
    try {
      while (!/^event: resume-reset$/m.test(text)) {
        const { value, done } = await reader.read();
        if (done) break;
        text += value;
      }
    } catch {}
    clearTimeout(giveUp);
    calls.live.events = [...text.matchAll(/^event: (.+)$/gm)].map((match) => match[1]);
    controller.abort();
  } catch (error) { calls.live.failed = failed(error); }
  try {
    const response = await fetch(${JSON.stringify(api)} + '/api/v1/telemetry/intake/' + ${JSON.stringify(vin)}, {
      method: 'POST', headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' }, body: '{}',
    });
    calls.intake.status = response.status;
  } catch (error) { calls.intake.failed = failed(error); }
  return calls;
})()`;

describe('CORS from a page on another origin, in Chromium', { skip: skipWithoutChromium, timeout: 120_000 }, () => {
  let app: { origin: string; server: Server };
  let browser: Browser;
  let open: DemoServer;
  let closed: DemoServer;

  before(async () => {
    app = await startAppOrigin();
    [browser, open, closed] = await Promise.all([launchChromium(), startDemoServer({ app: { corsOrigins: [app.origin] } }), startDemoServer()]);
  });
  after(async () => {
    await browser?.close();
    await Promise.all([open?.close(), closed?.close()]);
    app?.server.close();
  });

  /** Runs the calls from the app's page against `api`. */
  async function callFromApp(api: DemoServer, pageOrigin = app.origin): Promise<Calls> {
    const page = await browser.newPage();
    try {
      await page.goto(`${pageOrigin}/`);
      return (await page.evaluate(CALL_THE_API(api.url, api.key('customers'), '1HGCM82633A004352'))) as Calls;
    } finally {
      await page.close();
    }
  }

  it('with --cors-origin naming the page\'s origin: authenticate, the read API and the live stream (resumed with Last-Event-ID) work; intake stays closed', async () => {
    const calls = await callFromApp(open);
    assert.deepEqual(calls.authenticate, { status: 200, token: true });
    assert.equal(calls.fleets.status, 200);
    assert.deepEqual(calls.fleets.fleets, ['Midwest Reefers', 'Southern Dry Vans']);
    assert.match(calls.fleets.rateLimitRemaining ?? '', /^\d+$/, 'the exposed RateLimit headers are readable');
    assert.equal(calls.live.status, 200, calls.live.failed);
    // The Last-Event-ID reached the server: a position long out of the replay window is answered with resume-reset first.
    assert.ok(calls.live.events?.includes('resume-reset'), JSON.stringify(calls.live));
    assert.match(calls.intake.failed ?? '', /TypeError: Failed to fetch/, 'intake is server-to-server: the browser refuses the answer');
    assert.equal(calls.intake.status, undefined);
  });

  it('without the option, and from an origin the option does not name, the browser blocks every call', async () => {
    for (const [api, pageOrigin] of [[closed, app.origin], [open, `http://127.0.0.1:${new URL(app.origin).port}`]] as const) {
      const calls = await callFromApp(api, pageOrigin);
      for (const call of ['authenticate', 'fleets', 'live', 'intake'] as const) {
        assert.match(calls[call].failed ?? '', /TypeError: Failed to fetch/, `${call} from ${pageOrigin} to ${api === open ? 'the CORS server' : 'the server without CORS'}`);
        assert.equal(calls[call].status, undefined);
      }
    }
  });
});
