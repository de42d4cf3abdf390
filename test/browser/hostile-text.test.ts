/**
 * Operator and partner text is text on the live page (contract 12, issue 29 finding 5), in a real
 * Chromium: a fleet name and unit ids written as HTML — a `<meta http-equiv="refresh">` (which,
 * through the map's tooltip, once navigated the customer's tab to another page on hover), an
 * `<img onerror>` and an `<svg onload>` — are shown literally in the list, the selection and the
 * map's tooltips, and none of them becomes an element: no navigation, no request, nothing run.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser } from 'playwright-core';
import { withCheckDigit } from '../../core/vin.ts';
import { launchChromium, screenshot, skipWithoutChromium, startDemoServer, watchPage, type DemoServer } from './browser.ts';

const HOSTILE_FLEET = '<img src="/hostile-fleet.png" onerror="window.__ran = \'fleet\'">Fleet';
const HOSTILE_UNITS = [
  '<meta http-equiv="refresh" content="0;url=/hostile-refresh">',
  '<img src="/hostile-unit.png" onerror="window.__ran = \'img\'">',
  '<svg onload="window.__ran = \'svg\'"><circle r="9"/></svg>',
];

describe('operator and partner text on the live page', { skip: skipWithoutChromium, timeout: 120_000 }, () => {
  let server: DemoServer;
  let browser: Browser;
  const trailerIds: string[] = [];

  before(async () => {
    [server, browser] = await Promise.all([startDemoServer(), launchChromium()]);
    const customer = server.demo.principals.find((principal) => principal.audience === 'customers')!;
    const fleet = await server.trailwire.admin.createFleet({ customerId: customer.id, name: HOSTILE_FLEET });
    const auth = await fetch(`${server.url}/api/v1/partners/authenticate`, { method: 'POST', headers: { 'x-api-key': server.key('gps-basic') } });
    const token = ((await auth.json()) as { access_token: string }).access_token;
    for (const [index, unitId] of HOSTILE_UNITS.entries()) {
      const vin = withCheckDigit(`1HSTL00X0ZZ00000${index}`);
      trailerIds.push((await server.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin, unitId })).id);
      // Far apart and away from the demo fleet, so that each circle is its own to hover.
      const response = await fetch(`${server.url}/api/v1/telemetry/intake/${vin}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ timestamp: Math.floor(Date.now() / 1000), position: { latitude: 45 + 3 * index, longitude: -120 + 6 * index }, speedKph: 50, bearingDeg: 90 }),
      });
      assert.equal(response.status, 202);
    }
    await server.trailwire.intake!.worker!.drainDue();
  });
  after(async () => {
    await browser?.close();
    await server?.close();
  });

  it('shows hostile names literally in the list, the selection and the tooltips; nothing navigates, loads or runs', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 }, reducedMotion: 'reduce' });
    const watch = await watchPage(page, server.url);
    const requested: string[] = [];
    page.on('request', (request) => requested.push(new URL(request.url()).pathname));
    let navigations = 0;
    page.on('framenavigated', () => navigations++);
    const dialogs: string[] = [];
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    try {
      await page.goto(`${server.url}/`);
      const loaded = navigations;
      await page.fill('#api-key', server.key('customers'));
      await page.click('#connect');
      await page.waitForSelector(`path.trailer-marker[data-trailer-id="${trailerIds.at(-1)}"]`);

      const fleetTitle = await page.locator('section.fleet h2').evaluateAll((titles) => titles.map((title) => title.firstChild?.textContent));
      assert.ok(fleetTitle.includes(HOSTILE_FLEET), `the fleet name is shown as written: ${JSON.stringify(fleetTitle)}`);
      for (const [index, unitId] of HOSTILE_UNITS.entries()) {
        const row = page.locator(`li.trailer[data-trailer-id="${trailerIds[index]}"]`);
        assert.equal(await row.locator('.unit').textContent(), unitId, 'the unit id is shown as written in the list');
        // The tooltip opens on the circle's mouseover, as under a person's pointer.
        await page.locator(`path.trailer-marker[data-trailer-id="${trailerIds[index]}"]`).dispatchEvent('mouseover');
        const tooltip = page.locator('.leaflet-tooltip');
        await tooltip.waitFor();
        assert.ok((await tooltip.textContent())!.startsWith(`${unitId} · `), `the tooltip shows the unit id as text: ${await tooltip.textContent()}`);
        await page.locator(`path.trailer-marker[data-trailer-id="${trailerIds[index]}"]`).dispatchEvent('mouseout');
        await row.click();
        assert.ok((await page.textContent('#selection'))!.startsWith(`${unitId} (`), 'the selection names it as written');
      }
      // A meta refresh of 0 s navigates at once; a little longer covers a slow machine.
      await page.waitForTimeout(1000);
      console.log(`screenshot: ${await screenshot(page, 'live-hostile-text')}`);

      assert.equal(navigations, loaded, 'nothing navigated the tab');
      assert.equal(new URL(page.url()).pathname, '/');
      assert.deepEqual(requested.filter((path) => path.startsWith('/hostile')), [], 'no hostile element loaded anything');
      assert.equal(await page.evaluate(() => (window as unknown as { __ran?: string }).__ran), undefined, 'no hostile handler ran');
      assert.equal(await page.locator('meta[http-equiv], [onerror], [onload], img[src^="/hostile"]').count(), 0, 'no hostile element exists');
      assert.deepEqual(dialogs, []);
      assert.deepEqual(await watch.violations(), [], 'the CSP had nothing to block: no inline handler was even attempted');
    } finally {
      await page.close();
    }
  });
});
