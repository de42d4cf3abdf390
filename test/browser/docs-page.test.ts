/**
 * The API reference at `/docs` (contract 12) in a real Chromium: Swagger UI, served from the
 * package, renders every endpoint of `/openapi.json` without a request leaving the server or a
 * breach of the page's CSP, and its "Try it out" takes a bearer token and calls the API with it.
 * The test saves a screenshot (see SCREENSHOT_DIR).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser } from 'playwright-core';
import { launchChromium, screenshot, skipWithoutChromium, startDemoServer, watchPage, type DemoServer } from './browser.ts';

describe('the API reference page', { skip: skipWithoutChromium, timeout: 120_000 }, () => {
  let server: DemoServer;
  let browser: Browser;

  before(async () => {
    [server, browser] = await Promise.all([startDemoServer(), launchChromium()]);
  });
  after(async () => {
    await browser?.close();
    await server?.close();
  });

  it('renders every endpoint of /openapi.json, and "Try it out" calls the API with the bearer token given', async () => {
    const document = (await (await fetch(`${server.url}/openapi.json`)).json()) as { paths: Record<string, object>; webhooks?: Record<string, object> };
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    const watch = await watchPage(page, server.url);
    try {
      await page.goto(`${server.url}/docs`);
      await page.waitForSelector('.opblock');
      const shown = await page.locator('.opblock-summary-path').evaluateAll((paths) => paths.map((path) => path.getAttribute('data-path')));
      // The outbound webhook deliveries (OpenAPI's `webhooks`) are shown as operations too, under their name.
      const operations = { ...document.paths, ...document.webhooks };
      const expected = Object.entries(operations).flatMap(([path, item]) => Object.keys(item).map(() => path));
      assert.deepEqual([...shown].sort(), [...expected].sort(), 'one operation block per documented operation');
      assert.ok(shown.includes('/api/v1/fleets') && shown.includes('/api/v1/telemetry/intake/{VIN}'));
      console.log(`screenshot: ${await screenshot(page, 'docs')}`);

      // Authorize with a customer token, then try GET /api/v1/fleets.
      const token = ((await (await fetch(`${server.url}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'x-api-key': server.key('customers') } })).json()) as { access_token: string }).access_token;
      await page.click('button.authorize');
      const customerToken = page.locator('.auth-container').filter({ hasText: 'customerToken' });
      await customerToken.locator('input').fill(token);
      await customerToken.locator('button.authorize').click();
      await page.click('button.btn-done');
      const fleets = page.locator('.opblock').filter({ has: page.locator('[data-path="/api/v1/fleets"]') }).first();
      await fleets.locator('.opblock-summary').click();
      await fleets.locator('button.try-out__btn').click();
      await fleets.locator('button.execute').click();
      const status = fleets.locator('.live-responses-table tbody .response-col_status').first();
      await status.waitFor();
      assert.equal((await status.innerText()).trim(), '200');
      assert.match(await fleets.locator('.live-responses-table tbody .microlight').first().innerText(), /Midwest Reefers/);
      console.log(`screenshot: ${await screenshot(fleets, 'docs-try-it')}`);

      assert.deepEqual(watch.foreignRequests, [], 'no request leaves the server');
      assert.deepEqual(await watch.violations(), [], 'Swagger UI works within the Content-Security-Policy');
    } finally {
      await page.close();
    }
  });
});
