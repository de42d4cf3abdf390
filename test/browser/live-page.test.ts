/**
 * The live fleet page (contract 12) in a real Chromium: a person pastes the demo customer's key and
 * sees its two fleets and twelve trailers in their status colours, on a map drawn from the outlines
 * shipped in the package (no request leaves the machine, nothing breaks the page's CSP); a selected
 * trailer shows its last 24 h track; an intake post moves the trailer's marker (the test prints the
 * intake-to-browser latency); a dropped stream reconnects; an operator's tile server is the one
 * other origin the map may load images from; a wrong key says so. Tests save screenshots (see
 * SCREENSHOT_DIR).
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { serveTrailwire } from '../support/fixtures.ts';
import { launchChromium, screenshot, skipWithoutChromium, startDemoServer, watchPage, type DemoServer } from './browser.ts';


/** A 1×1 PNG: what the test's tile server answers for every tile. */
const ONE_PIXEL_PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');

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
  async function openWithKey(key: string, connected = true, url = server.url): Promise<{ page: Page; watch: Awaited<ReturnType<typeof watchPage>> }> {
    // Reduced motion: the map jumps instead of animating, so a screenshot never catches it mid-zoom.
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 }, reducedMotion: 'reduce' });
    const watch = await watchPage(page, url);
    await page.goto(`${url}/`);
    await page.fill('#api-key', key);
    await page.click('#connect');
    if (connected) await page.waitForSelector('li.trailer');
    return { page, watch };
  }

  it('shows the demo fleet after pasting the demo key: fleets, trailers in status colours, a marker each', async (t) => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 }, reducedMotion: 'reduce' });
    const watch = await watchPage(page, server.url);
    // The bytes on the wire (gzipped where the server gzips), as Chromium counts them.
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Network.enable');
    let transferred = 0;
    let requests = 0;
    cdp.on('Network.loadingFinished', (event) => {
      transferred += event.encodedDataLength;
      requests++;
    });
    try {
      await page.goto(`${server.url}/`);
      // The outlines drawn (countries and states are SVG paths) is the page fully loaded.
      await page.waitForFunction(() => document.querySelectorAll('.leaflet-overlay-pane path').length > 100);
      const pageWeight = { kb: transferred / 1024, requests };
      t.diagnostic(`page weight, first load: ${pageWeight.kb.toFixed(1)} KB transferred in ${pageWeight.requests} requests`);
      console.log(`page weight, first load: ${pageWeight.kb.toFixed(1)} KB transferred in ${pageWeight.requests} requests`);
      assert.ok(pageWeight.kb < 400, 'the page stays small');
      await page.fill('#api-key', server.key('customers'));
      await page.click('#connect');
      await page.waitForSelector('li.trailer');
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
      console.log(`with the demo fleet loaded: ${(transferred / 1024).toFixed(1)} KB in ${requests} requests`);
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
      // Attached, not visible: a trailer parked all day (the demo's trips follow the time of day)
      // has a track of one point, which draws no visible line.
      await page.waitForSelector('path.trailer-track', { state: 'attached' });
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

  /** Posts a gps-basic fix for `vin` as the demo partner, answering when it was sent (epoch ms). */
  async function postFix(vin: string, latitude: number, longitude: number, to: DemoServer = server): Promise<number> {
    const auth = await fetch(`${to.url}/api/v1/partners/authenticate`, { method: 'POST', headers: { 'x-api-key': to.key('gps-basic') } });
    const token = ((await auth.json()) as { access_token: string }).access_token;
    const sentAt = Date.now();
    const response = await fetch(`${to.url}/api/v1/telemetry/intake/${vin}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ timestamp: Math.floor(sentAt / 1000), position: { latitude, longitude }, speedKph: 90, bearingDeg: 45 }),
    });
    assert.equal(response.status, 202);
    return sentAt;
  }

  /** Notes in the page when the trailer's row first shows the position (epoch ms, same clock as Node's). */
  async function watchForPosition(page: Page, trailerId: string, lat: number, long: number): Promise<void> {
    // A string, not a function: tsx would wrap a named function in a helper the page does not have.
    await page.evaluate(`(() => {
      const row = document.querySelector('li.trailer[data-trailer-id="${trailerId}"]');
      window.movedAt = undefined;
      new MutationObserver(() => {
        if (Math.abs(Number(row.dataset.lat) - ${lat}) < 1e-4 && Math.abs(Number(row.dataset.long) - ${long}) < 1e-4) window.movedAt ??= Date.now();
      }).observe(row, { attributes: true });
    })()`);
  }

  it("an intake post moves the trailer's marker on the map (and the test prints the intake-to-browser latency)", async (t) => {
    const { page } = await openWithKey(server.key('customers'));
    try {
      await page.waitForSelector('#connection[data-state="live"]');
      const row = page.locator('li.trailer').first();
      const trailerId = (await row.getAttribute('data-trailer-id'))!;
      const vin = (await row.locator('.vin').innerText()).trim();
      const marker = page.locator(`path.trailer-marker[data-trailer-id="${trailerId}"]`);
      const before = await marker.getAttribute('d');
      const [lat, long] = [Number(await row.getAttribute('data-lat')) + 1.5, Number(await row.getAttribute('data-long')) - 2];
      await watchForPosition(page, trailerId, lat, long);
      const sentAt = await postFix(vin, lat, long);
      await page.waitForFunction(() => (window as unknown as { movedAt?: number }).movedAt !== undefined, undefined, { timeout: 10_000 });
      const latency = (await page.evaluate(() => (window as unknown as { movedAt: number }).movedAt)) - sentAt;
      t.diagnostic(`intake-to-browser latency: ${latency} ms (POST sent → the trailer's row and marker updated in the page)`);
      console.log(`intake-to-browser latency: ${latency} ms`);
      assert.notEqual(await marker.getAttribute('d'), before, 'the marker moved');
      console.log(`screenshot: ${await screenshot(page, 'live-marker-moved')}`);
    } finally {
      await page.close();
    }
  });

  it("a tyre fault reported by intake turns the trailer red and its fleet's counts follow", async () => {
    const { page } = await openWithKey(server.key('customers'));
    try {
      await page.waitForSelector('#connection[data-state="live"]');
      const row = page.locator('li.trailer[data-status="OK"]').first();
      const trailerId = (await row.getAttribute('data-trailer-id'))!;
      const fleet = page.locator('section.fleet').filter({ has: page.locator(`li.trailer[data-trailer-id="${trailerId}"]`) });
      const faultedBefore = Number(/(\d+) Faulted/.exec(await fleet.locator('h2 small').innerText())?.[1] ?? 0);
      const auth = await fetch(`${server.url}/api/v1/partners/authenticate`, { method: 'POST', headers: { 'x-api-key': server.key('tpms') } });
      const token = ((await auth.json()) as { access_token: string }).access_token;
      const vin = (await row.locator('.vin').innerText()).trim();
      const reading = { readAt: new Date().toISOString(), sensors: [{ sensorId: `BROWSER-${trailerId}`, wheel: 'L1', pressurePsi: 52, temperatureC: 30 }] };
      const posted = await fetch(`${server.url}/api/v1/telemetry/intake/${vin}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(reading) });
      assert.equal(posted.status, 202);
      const faultedRow = page.locator(`li.trailer[data-trailer-id="${trailerId}"][data-status="Faulted"]`);
      await faultedRow.waitFor({ timeout: 10_000 });
      assert.equal(await faultedRow.locator('.status-dot').evaluate((dot) => getComputedStyle(dot).backgroundColor), STATUS_RGB.Faulted);
      assert.equal(await page.locator(`path.trailer-marker[data-trailer-id="${trailerId}"]`).getAttribute('fill'), '#c81e1e', 'the marker is red too');
      assert.match(await fleet.locator('h2 small').innerText(), new RegExp(`${faultedBefore + 1} Faulted`));
    } finally {
      await page.close();
    }
  });

  it('a dropped stream is said, reconnects by itself, and moves markers again', async () => {
    const { page } = await openWithKey(server.key('customers'));
    try {
      await page.waitForSelector('#connection[data-state="live"]');
      server.server.closeAllConnections();
      await page.waitForFunction(() => /Live updates interrupted .* Reconnecting in 1 s \(attempt 1\)/.test(document.querySelector('#notice')!.textContent!));
      console.log(`screenshot: ${await screenshot(page, 'live-stream-dropped')}`);
      await page.waitForFunction(() => document.querySelector('#notice')!.textContent === 'Live updates resumed.', undefined, { timeout: 10_000 });
      await page.waitForSelector('#connection[data-state="live"]');
      const row = page.locator('li.trailer').nth(1);
      const trailerId = (await row.getAttribute('data-trailer-id'))!;
      const [lat, long] = [Number(await row.getAttribute('data-lat')) - 1, Number(await row.getAttribute('data-long')) + 1];
      await watchForPosition(page, trailerId, lat, long);
      await postFix((await row.locator('.vin').innerText()).trim(), lat, long);
      await page.waitForFunction(() => (window as unknown as { movedAt?: number }).movedAt !== undefined, undefined, { timeout: 10_000 });
    } finally {
      await page.close();
    }
  });

  it('when the token expires, the page signs in again with the key in memory and goes on live', async () => {
    // A server whose clock the test moves past the token's 30 minutes; its stream checks at each 300 ms heartbeat.
    const clock = { skewMs: 0, now: () => Date.now() + clock.skewMs };
    const expiring = await startDemoServer({ core: { clock }, liveHeartbeatMs: 300 });
    const { page } = await openWithKey(expiring.key('customers'), true, expiring.url);
    try {
      await page.waitForSelector('#connection[data-state="live"]');
      clock.skewMs = 31 * 60_000;
      await page.waitForFunction(() => /^Session renewed/.test(document.querySelector('#notice')!.textContent!), undefined, { timeout: 10_000 });
      await page.waitForSelector('#connection[data-state="live"]');
      console.log(`screenshot: ${await screenshot(page, 'live-token-renewed')}`);
      // The renewed stream delivers.
      const row = page.locator('li.trailer').first();
      const trailerId = (await row.getAttribute('data-trailer-id'))!;
      const [lat, long] = [Number(await row.getAttribute('data-lat')) + 0.5, Number(await row.getAttribute('data-long')) + 0.5];
      await watchForPosition(page, trailerId, lat, long);
      await postFix((await row.locator('.vin').innerText()).trim(), lat, long, expiring);
      await page.waitForFunction(() => (window as unknown as { movedAt?: number }).movedAt !== undefined, undefined, { timeout: 10_000 });
    } finally {
      await page.close();
      await expiring.close();
    }
  });

  it('a rotated key ends the stream, and the page says the key is no longer accepted', async () => {
    const rotating = await startDemoServer();
    const { page } = await openWithKey(rotating.key('customers'), true, rotating.url);
    try {
      await page.waitForSelector('#connection[data-state="live"]');
      const auth = await fetch(`${rotating.url}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'x-api-key': rotating.key('customers') } });
      const token = ((await auth.json()) as { access_token: string }).access_token;
      assert.equal((await fetch(`${rotating.url}/api/v1/customers/rotate`, { method: 'PUT', headers: { authorization: `Bearer ${token}` } })).status, 200);
      await page.waitForFunction(() => /Live updates stopped\. That key was not accepted/.test(document.querySelector('#notice')!.textContent!), undefined, { timeout: 10_000 });
      assert.equal(await page.getAttribute('#connection', 'data-state'), 'idle');
    } finally {
      await page.close();
      await rotating.close();
    }
  });

  it("with a tile URL the map draws the operator's tiles, the only images allowed from elsewhere", async () => {
    // A tile server of the operator's, on another port (another origin) of this machine.
    const tileRequests: string[] = [];
    const tiles = createServer((request, response) => {
      tileRequests.push(request.url!);
      response.writeHead(200, { 'content-type': 'image/png' }).end(ONE_PIXEL_PNG);
    });
    await new Promise<void>((resolve) => tiles.listen(0, '127.0.0.1', resolve));
    const tileOrigin = `http://127.0.0.1:${(tiles.address() as AddressInfo).port}`;
    const tiled = await serveTrailwire(server.trailwire, { pages: { mapTilesUrl: `${tileOrigin}/{z}/{x}/{y}.png` } });
    const page = await browser.newPage({ viewport: { width: 1000, height: 700 }, reducedMotion: 'reduce' });
    try {
      const watch = await watchPage(page, tiled.url);
      await page.goto(`${tiled.url}/`);
      await page.waitForFunction(() => document.querySelectorAll('img.leaflet-tile-loaded').length > 0);
      assert.ok(tileRequests.some((url) => /^\/\d+\/\d+\/\d+\.png$/.test(url)), tileRequests.join(' '));
      assert.ok(watch.foreignRequests.length > 0 && watch.foreignRequests.every((url) => url.startsWith(`${tileOrigin}/`)), 'only tiles come from elsewhere');
      assert.deepEqual(await watch.violations(), []);
    } finally {
      await page.close();
      await tiled.close();
      tiles.close();
    }
  });

  it('a wrong key shows why it was refused, and a partner key is named as such', async () => {
    const { page, watch } = await openWithKey('twc_not-a-real-key', false);
    try {
      await page.waitForSelector('#notice[data-kind="error"]');
      assert.match((await page.textContent('#notice'))!, /key was not accepted/);
      assert.equal(await page.locator('li.trailer').count(), 0);
      assert.match(await page.locator('#fleets').innerText(), /Paste a customer API key/, 'the panel still says how to connect');
      console.log(`screenshot: ${await screenshot(page, 'live-bad-key')}`);

      await page.fill('#api-key', server.key('gps-basic'));
      await page.click('#connect');
      await page.waitForFunction(() => /is a partner key/.test(document.querySelector('#notice')!.textContent!));
      assert.deepEqual(await watch.violations(), []);
    } finally {
      await page.close();
    }
  });
  it('at phone width (390 px) nothing runs past the right edge, connected or with a trailer selected', async () => {
    const page = await browser.newPage({ viewport: { width: 390, height: 844 }, reducedMotion: 'reduce' });
    const overflow = () => page.evaluate(() => ({ scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth }));
    try {
      await page.goto(`${server.url}/`);
      let { scrollWidth, innerWidth } = await overflow();
      assert.ok(scrollWidth <= innerWidth, `before connecting: ${scrollWidth} px wide in a ${innerWidth} px window`);
      await page.fill('#api-key', server.key('customers'));
      await page.click('#connect');
      await page.waitForSelector('li.trailer');
      await page.waitForSelector('#forget', { state: 'visible' });
      ({ scrollWidth, innerWidth } = await overflow());
      assert.ok(scrollWidth <= innerWidth, `connected: ${scrollWidth} px wide in a ${innerWidth} px window`);
      // The key field, the buttons and the map fit inside the window.
      for (const selector of ['#api-key', '#connect', '#forget', '#map', '#fleets']) {
        const box = (await page.locator(selector).boundingBox())!;
        assert.ok(box.x >= 0 && box.x + box.width <= innerWidth, `${selector} spans ${box.x}..${box.x + box.width} px`);
      }
      await page.locator('li.trailer').nth(1).click();
      await page.waitForFunction(() => /fixes in the last 24 h/.test(document.querySelector('#selection')!.textContent!));
      ({ scrollWidth, innerWidth } = await overflow());
      assert.ok(scrollWidth <= innerWidth, `a trailer selected: ${scrollWidth} px wide in a ${innerWidth} px window`);
      console.log(`screenshot: ${await screenshot(page, 'live-390px')}`);
    } finally {
      await page.close();
    }
  });

  it("each trailer says how old its last fix is, and one from hours ago is marked stale (its speed is not current) until a fresh fix arrives", async () => {
    // The demo seeded three hours ago (its server's clock behind), then the clock set right: every
    // trailer's last fix is three hours old.
    const clock = { skewMs: -3 * 3_600_000, now: () => Date.now() + clock.skewMs };
    const old = await startDemoServer({ core: { clock } });
    clock.skewMs = 0;
    const { page } = await openWithKey(old.key('customers'), true, old.url);
    try {
      await page.waitForSelector('#connection[data-state="live"]');
      const rows = () =>
        page.locator('li.trailer').evaluateAll((items) =>
          items.map((item) => ({ id: (item as HTMLElement).dataset.trailerId!, stale: (item as HTMLElement).dataset.stale, where: item.querySelector('.where')!.textContent! })),
        );
      const before = await rows();
      assert.equal(before.length, 12);
      for (const row of before) {
        assert.equal(row.stale, 'true', row.where);
        assert.match(row.where, /^stale last fix 3 h ago · then \d+ mph [NESW]{1,2}$/, 'the age comes first, the speed as what it was then');
      }
      assert.equal(await page.locator('li.trailer .stale-mark').count(), 12);
      const marker = page.locator(`path.trailer-marker[data-trailer-id="${before[0]!.id}"]`);
      assert.equal(await marker.getAttribute('data-stale'), 'true', 'the map draws it faded too');
      console.log(`screenshot: ${await screenshot(page, 'live-stale-fixes')}`);

      // A fix now: that trailer is current again, the others stay stale.
      const row = page.locator(`li.trailer[data-trailer-id="${before[0]!.id}"]`);
      const [lat, long] = [Number(await row.getAttribute('data-lat')) + 0.1, Number(await row.getAttribute('data-long')) + 0.1];
      await postFix((await row.locator('.vin').innerText()).trim(), lat, long, old);
      await page.waitForFunction((id) => document.querySelector(`li.trailer[data-trailer-id="${id}"]`)!.getAttribute('data-stale') === 'false', before[0]!.id, { timeout: 10_000 });
      const after = await rows();
      const fresh = after.find((candidate) => candidate.id === before[0]!.id)!;
      assert.match(fresh.where, /^56 mph (NE|N|E) · just now$/, 'a fresh fix: its speed and "just now", no mark');
      assert.equal(after.filter((candidate) => candidate.stale === 'true').length, 11);
      assert.equal(await marker.getAttribute('data-stale'), 'false');
    } finally {
      await page.close();
      await old.close();
    }
  });
});
