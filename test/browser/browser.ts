/**
 * Test support for the pages (contract 12), in a real browser: the system's Chromium (Debian's
 * `chromium` package, which `.ci/run` installs) driven by playwright-core, which never downloads a
 * browser of its own. Without a Chromium the browser tests are skipped and say why. A served
 * Trailwire with the demo fleet, over the system clock (the page asks for "the last 24 h" by its
 * own clock), and a place for the screenshots each test leaves for a person to look at.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import { pino } from 'pino';
import { createTrailwireApp, type TrailwireAppOptions } from '../../adapters/koa/app.ts';
import { createLiveEventsRoute } from '../../adapters/koa/live-events-route.ts';
import { openSqliteStore } from '../../adapters/sqlite/index.ts';
import { openSqliteIntakeQueue } from '../../adapters/sqlite/intake-queue.ts';
import { createTrailwire, type Trailwire, type TrailwireOptions } from '../../core/trailwire.ts';
import { builtInProducts } from '../../products/index.ts';
import { type DemoSeed, seedDemo } from '../../simulator/demo-seed.ts';
import { REPO_ROOT } from '../support/cli.ts';

/** `TRAILWIRE_CHROMIUM` names the browser to use (and only that one); else the usual system paths. */
const CANDIDATES = process.env.TRAILWIRE_CHROMIUM ? [process.env.TRAILWIRE_CHROMIUM] : ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];

/** The Chromium to drive, or undefined when this machine has none. */
export const chromiumPath: string | undefined = CANDIDATES.find((path) => existsSync(path));

/** The reason to give `{ skip }` when there is no browser; false when there is one. */
export const skipWithoutChromium: string | false = chromiumPath
  ? false
  : `no Chromium at ${CANDIDATES.join(' or ')}: the browser tests are skipped (apt-get install -y chromium, or set TRAILWIRE_CHROMIUM; .ci/run installs it)`;

/** Where screenshots go: `TRAILWIRE_SCREENSHOT_DIR`, or `test-output/screenshots` (git-ignored). */
export const SCREENSHOT_DIR = process.env.TRAILWIRE_SCREENSHOT_DIR ?? join(REPO_ROOT, 'test-output/screenshots');

export async function launchChromium(): Promise<Browser> {
  // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
  return chromium.launch({ executablePath: chromiumPath!, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
}

/** Saves a screenshot of the page (or of one element of it) as `<name>.png` and answers its path. */
export async function screenshot(page: Page | Locator, name: string): Promise<string> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const path = join(SCREENSHOT_DIR, `${name}.png`);
  await ('goto' in page ? page.screenshot({ path, fullPage: true }) : page.screenshot({ path }));
  return path;
}

/**
 * Watches what a page does that it must not: a request to any origin but `origin`, and a
 * Content-Security-Policy violation (which would mean the policy blocked something the page needs).
 */
export async function watchPage(page: Page, origin: string): Promise<{ foreignRequests: string[]; violations: () => Promise<string[]> }> {
  const foreignRequests: string[] = [];
  page.on('request', (request) => {
    const url = request.url();
    if (!url.startsWith(`${origin}/`) && !url.startsWith('data:')) foreignRequests.push(url);
  });
  await page.addInitScript(() => {
    const seen: string[] = [];
    (window as unknown as { __violations: string[] }).__violations = seen;
    document.addEventListener('securitypolicyviolation', (event) => seen.push(`${event.violatedDirective} ${event.blockedURI}`));
  });
  return { foreignRequests, violations: () => page.evaluate(() => (window as unknown as { __violations: string[] }).__violations) };
}

/** A served Trailwire over a fresh SQLite file with the demo fleet. */
export interface DemoServer {
  trailwire: Trailwire;
  url: string;
  server: Server;
  demo: DemoSeed;
  /** The API key of a demo principal: `customers` (Demo Logistics) or a partner's product. */
  key(who: 'customers' | string): string;
  close(): Promise<void>;
}

/**
 * Starts the server. `core` and `app` options pass through; `liveHeartbeatMs` sets the heartbeat of
 * `GET /api/v1/live` (each heartbeat also checks the stream's token against the core's clock).
 */
export async function startDemoServer(
  options: { core?: Omit<TrailwireOptions, 'store'>; app?: TrailwireAppOptions; liveHeartbeatMs?: number } = {},
): Promise<DemoServer> {
  const dir = mkdtempSync(join(tmpdir(), 'trailwire-browser-'));
  const store = await openSqliteStore({ file: join(dir, 'trailwire.db') });
  const trailwire = await createTrailwire({ products: builtInProducts, ...options.core, store, intakeQueue: openSqliteIntakeQueue(store.db) });
  await trailwire.intake!.worker!.start();
  const demo = await seedDemo(trailwire, { products: builtInProducts.map((product) => product.name) });
  const liveEvents = options.liveHeartbeatMs === undefined ? undefined : createLiveEventsRoute(trailwire, { heartbeatIntervalMs: options.liveHeartbeatMs });
  const server = createServer(createTrailwireApp(trailwire, { logger: pino({ level: 'silent' }), ...(liveEvents ? { liveEvents } : {}), ...options.app }).callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    trailwire,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    server,
    demo,
    key(who) {
      const principal = demo.principals.find((p) => (who === 'customers' ? p.audience === 'customers' : p.product === who));
      if (!principal) throw new Error(`no demo principal ${who}`);
      return principal.apiKey;
    },
    async close() {
      liveEvents?.endAllStreams();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await trailwire.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
