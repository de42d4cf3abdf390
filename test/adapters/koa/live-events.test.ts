/**
 * `GET /api/v1/live` with a real HTTP client reading the event stream (fetch, as a browser page
 * does): heartbeats, an intake post reaching the stream as the read API's trailer JSON and only its
 * customer's stream, refusals as problem+json, the per-customer cap shared with the gRPC LiveFeed,
 * the end at the token's expiry or rotation, and shutdown.
 */
import assert from 'node:assert/strict';
import { get as httpGet, type IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { startGrpcServer } from '../../../adapters/grpc/grpc-server.ts';
import { startServer } from '../../../adapters/server/index.ts';
import type { LiveTrailerEvent } from '../../../core/live-bus.ts';
import { ManualClock } from '../../../core/clock.ts';
import type { Trailer } from '../../../core/model.ts';
import { PROTO_ROOT } from '../../../adapters/grpc/proto.ts';
import { createLiveEventsRoute, type LiveEventsRoute } from '../../../adapters/koa/live-events-route.ts';
import { uniqueVin } from '../../support/fixtures.ts';
import { customerWithToken, partnerWithToken, startTestApp, type TestApp } from '../../support/test-app.ts';

const HEARTBEAT_MS = 80;

export interface ServerSentEvent {
  event: string;
  id?: string;
  data: string;
}

/** A stream of `GET /api/v1/live` read with fetch, its events parsed as the SSE specification says. */
export async function openLiveEvents(baseUrl: string, token: string | undefined) {
  const controller = new AbortController();
  const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` };
  const response = await fetch(`${baseUrl}/api/v1/live`, { headers, signal: controller.signal });
  const events: ServerSentEvent[] = [];
  const waiters: Array<() => void> = [];
  const wake = () => {
    for (const resolve of waiters.splice(0)) resolve();
  };
  let ended = false;
  const parser = eventStreamParser((event) => {
    events.push(event);
    wake();
  });
  const done = (async () => {
    if (!response.ok || !response.body) return;
    const decoder = new TextDecoder();
    try {
      for await (const chunk of response.body) parser.push(decoder.decode(chunk as Uint8Array, { stream: true }));
    } catch {
      // Aborted by close().
    } finally {
      ended = true;
      wake();
    }
  })();
  return {
    response,
    events,
    /** Resolves once the server ended the response. */
    done,
    get ended() {
      return ended;
    },
    updates: () => events.filter((e) => e.event === 'update').map((e) => JSON.parse(e.data)),
    /** Resolves once `predicate` holds over the events (or fails after `ms`). */
    async until(predicate: (events: ServerSentEvent[]) => boolean, ms = 5000) {
      const deadline = Date.now() + ms;
      while (!predicate(events)) {
        if (Date.now() > deadline) throw new Error(`timed out; got ${JSON.stringify(events.map((e) => e.event))}`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 50);
        });
      }
    },
    close() {
      controller.abort();
    },
  };
}

/** Splits event-stream text into events as the SSE specification says (`field: value` lines, a blank line ends an event). */
function eventStreamParser(onEvent: (event: ServerSentEvent) => void) {
  let buffer = '';
  return {
    push(text: string) {
      buffer += text;
      let split: number;
      while ((split = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, split);
        buffer = buffer.slice(split + 2);
        const event: ServerSentEvent = { event: 'message', data: '' };
        const data: string[] = [];
        for (const line of block.split('\n')) {
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'event') event.event = value;
          else if (field === 'id') event.id = value;
          else if (field === 'data') data.push(value);
        }
        event.data = data.join('\n');
        onEvent(event);
      }
    },
  };
}

/** A stream read with node:http, whose reading can be paused (a slow reader). */
function openPausableLiveEvents(baseUrl: string, token: string) {
  const events: ServerSentEvent[] = [];
  const parser = eventStreamParser((event) => events.push(event));
  let response: IncomingMessage | undefined;
  const request = httpGet(`${baseUrl}/api/v1/live`, { headers: { authorization: `Bearer ${token}` } }, (res) => {
    response = res;
    res.setEncoding('utf8');
    res.on('data', (text: string) => parser.push(text));
  });
  request.on('error', () => {});
  return {
    events,
    updates: () => events.filter((e) => e.event === 'update').map((e) => JSON.parse(e.data)),
    pause: () => response?.pause(),
    resume: () => response?.resume(),
    close: () => request.destroy(),
  };
}

/**
 * The HTTP/1.1 chunks of a `GET /api/v1/live?snapshot=true` answer as they come off the wire (each
 * one write of the server's), heartbeats left out, up to the one holding `snapshot-end`.
 */
async function snapshotChunks(baseUrl: string, token: string): Promise<string[]> {
  const { hostname, port } = new URL(baseUrl);
  const socket = connect(Number(port), hostname);
  socket.write(`GET /api/v1/live?snapshot=true HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${token}\r\n\r\n`);
  let buffer = Buffer.alloc(0);
  let inBody = false;
  const chunks: string[] = [];
  for await (const data of socket) {
    buffer = Buffer.concat([buffer, data as Buffer]);
    if (!inBody) {
      const headEnd = buffer.indexOf('\r\n\r\n');
      if (headEnd < 0) continue;
      assert.match(buffer.subarray(0, headEnd).toString(), /^HTTP\/1\.1 200 [^]*\r\ntransfer-encoding: chunked/i);
      buffer = buffer.subarray(headEnd + 4);
      inBody = true;
    }
    for (let lineEnd: number; (lineEnd = buffer.indexOf('\r\n')) >= 0; ) {
      const size = Number.parseInt(buffer.subarray(0, lineEnd).toString(), 16);
      if (buffer.length < lineEnd + 2 + size + 2) break;
      chunks.push(buffer.subarray(lineEnd + 2, lineEnd + 2 + size).toString());
      buffer = buffer.subarray(lineEnd + 2 + size + 2);
    }
    if (chunks.some((chunk) => chunk.includes('event: snapshot-end'))) break;
  }
  socket.destroy();
  return chunks.filter((chunk) => !/^(id: [^\n]*\n)?event: heartbeat\n/.test(chunk));
}

const gpsPayload = (latitude: number) => ({ timestamp: 1780315200.25, position: { latitude, longitude: -87.25 }, speedKph: 100, bearingDeg: 200 });

describe('GET /api/v1/live (Server-Sent Events)', () => {
  let app: TestApp;
  let live: LiveEventsRoute;

  before(async () => {
    // The route is built before the app it is mounted in, so the test can set it and end its streams.
    app = await startTestApp({
      app: (trailwire) => {
        live = createLiveEventsRoute(trailwire, { heartbeatIntervalMs: HEARTBEAT_MS, maxStreamsPerCustomer: 2 });
        return { liveEvents: live };
      },
    });
  });
  after(async () => {
    await app.close();
  });

  it('answers text/event-stream, uncached, with a heartbeat at once and then every interval', async () => {
    const customer = await customerWithToken(app, 'Heartbeat Co');
    const stream = await openLiveEvents(app.url, customer.token);
    assert.equal(stream.response.status, 200);
    assert.match(stream.response.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.equal(stream.response.headers.get('cache-control'), 'no-cache');
    await stream.until((events) => events.length >= 4);
    stream.close();
    assert.ok(stream.events.every((e) => e.event === 'heartbeat'), 'only heartbeats on a quiet feed');
    assert.equal(typeof JSON.parse(stream.events[0]!.data).timestamp, 'string');
  });

  it('sends the first heartbeat at once, not after an interval', async () => {
    const slow = await startTestApp({ app: (trailwire) => ({ liveEvents: createLiveEventsRoute(trailwire, { heartbeatIntervalMs: 60_000 }) }) });
    try {
      const customer = await customerWithToken(slow, 'Prompt Co');
      const stream = await openLiveEvents(slow.url, customer.token);
      await stream.until((events) => events.length >= 1, 10_000);
      assert.equal(stream.events[0]!.event, 'heartbeat');
      stream.close();
    } finally {
      await slow.close();
    }
  });

  it("delivers an intake post as `event: update` carrying exactly the read API's trailer JSON and the update's time, to its customer only", async () => {
    const owner = await customerWithToken(app, 'Owner Co');
    const other = await customerWithToken(app, 'Other Co');
    const fleet = await app.trailwire.admin.createFleet({ customerId: owner.id, name: 'Reefers' });
    const vin = uniqueVin();
    const trailer = await app.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin, unitId: 'TR-7' });
    const partner = await partnerWithToken(app, 'gps-basic');
    const ownerStream = await openLiveEvents(app.url, owner.token);
    const otherStream = await openLiveEvents(app.url, other.token);
    await ownerStream.until((e) => e.length >= 1);
    await otherStream.until((e) => e.length >= 1);

    const accepted = await app.call('POST', `/api/v1/telemetry/intake/${vin}`, { token: partner.token, body: gpsPayload(41.5) });
    assert.equal(accepted.status, 202);
    await app.trailwire.intake!.worker!.drainDue();
    await ownerStream.until(() => ownerStream.updates().length >= 1);

    const read = await app.call('GET', `/api/v1/trailers/${trailer.id}`, { token: owner.token });
    assert.equal(read.status, 200);
    const [{ updatedAt, ...update }] = ownerStream.updates();
    assert.deepEqual(update, read.body);
    // When the server made the update, as the LiveFeed's `ts` and the payload's processed time: what a client measures latency from.
    const status = await app.call('GET', `/api/v1/telemetry/intake/status/${accepted.body.id}`, { token: partner.token });
    assert.equal(updatedAt, status.body.processedAt);
    assert.deepEqual(update.telemetry, { timestamp: '2026-06-01T12:00:00.250Z', lat: 41.5, long: -87.25, speed: 62.1, heading: 'S' });
    const event = ownerStream.events.find((e) => e.event === 'update')!;
    // Its position in the replay window: what Last-Event-ID resumes after.
    assert.match(event.id ?? '', /^\d+-\d+$/);

    await new Promise((resolve) => setTimeout(resolve, HEARTBEAT_MS * 3));
    assert.ok(otherStream.events.length >= 2, 'the other stream is alive');
    assert.equal(otherStream.updates().length, 0, 'another customer hears nothing of it');
    ownerStream.close();
    otherStream.close();
  });

  it('refuses a missing or invalid token with 401 and a partner token with 403, as problem+json', async () => {
    const partner = await partnerWithToken(app, 'tpms');
    for (const [token, status] of [
      [undefined, 401],
      ['not.a.token', 401],
      [partner.token, 403],
    ] as const) {
      const response = await fetch(`${app.url}/api/v1/live`, { headers: token === undefined ? {} : { authorization: `Bearer ${token}` } });
      assert.equal(response.status, status);
      assert.equal(response.headers.get('content-type'), 'application/problem+json');
      const body = (await response.json()) as { status: number; detail: string };
      assert.equal(body.status, status);
      assert.ok(body.detail.length > 0);
    }
  });

  it('caps the streams of one customer (2 here): the third is refused 429 before it starts, a closed one frees its slot', async () => {
    const customer = await customerWithToken(app, 'Greedy Co');
    const other = await customerWithToken(app, 'Modest Co');
    const first = await openLiveEvents(app.url, customer.token);
    const second = await openLiveEvents(app.url, customer.token);
    await first.until((e) => e.length >= 1);
    await second.until((e) => e.length >= 1);
    const refused = await fetch(`${app.url}/api/v1/live`, { headers: { authorization: `Bearer ${customer.token}` } });
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get('content-type'), 'application/problem+json');
    assert.equal(refused.headers.get('retry-after'), '5', 'every 429 says when to try again');
    assert.equal(refused.headers.get('ratelimit-remaining'), '0');
    assert.match(((await refused.json()) as { detail: string }).detail, /2 live streams/);
    const modest = await openLiveEvents(app.url, other.token);
    await modest.until((e) => e.length >= 1);
    first.close();
    await until(() => app.trailwire.live.subscriberCount(customer.id) < 2);
    const again = await openLiveEvents(app.url, customer.token);
    assert.equal(again.response.status, 200);
    for (const stream of [second, modest, again]) stream.close();
  });

  it('counts SSE and gRPC LiveFeed streams of one customer against one cap', async () => {
    const grpcServer = await startGrpcServer({ port: 0, host: '127.0.0.1', tokens: app.trailwire.tokens, hub: app.trailwire.live, heartbeatIntervalMs: 60_000, maxStreamsPerCustomer: 2 });
    const client = new livefeed.LiveFeed(`127.0.0.1:${grpcServer.port}`, grpc.credentials.createInsecure());
    try {
      const customer = await customerWithToken(app, 'Mixed Co');
      const metadata = new grpc.Metadata();
      metadata.set('authorization', `Bearer ${customer.token}`);
      const call = client.Subscribe({}, metadata);
      call.on('error', () => {});
      await new Promise((resolve) => call.once('data', resolve));
      const sse = await openLiveEvents(app.url, customer.token);
      await sse.until((e) => e.length >= 1);
      // One of each is open: a third stream is refused on either transport.
      const refused = await fetch(`${app.url}/api/v1/live`, { headers: { authorization: `Bearer ${customer.token}` } });
      assert.equal(refused.status, 429);
      const grpcRefused = client.Subscribe({}, metadata);
      const status = await new Promise<grpc.ServiceError>((resolve) => grpcRefused.on('error', resolve));
      assert.equal(status.code, grpc.status.RESOURCE_EXHAUSTED);
      call.cancel();
      sse.close();
    } finally {
      client.close();
      await grpcServer.shutdown();
    }
  });

  it("ends the stream with a final `event: error` (invalid_token) when the token expires", async () => {
    const customer = await customerWithToken(app, 'Expiring Co');
    const stream = await openLiveEvents(app.url, customer.token);
    await stream.until((e) => e.length >= 2);
    // Past the token's 30-minute lifetime on the tokens' (manual) clock: the next heartbeat ends it.
    app.clock.advance(1_800_000);
    await stream.done;
    const last = stream.events.at(-1)!;
    assert.equal(last.event, 'error');
    const problem = JSON.parse(last.data);
    assert.equal(problem.status, 401);
    assert.match(problem.type, /invalid-token/);
    assert.match(problem.detail, /expired/);
  });

  it("ends the customer's streams with `event: error` (invalid_token) when its key is rotated", async () => {
    const customer = await customerWithToken(app, 'Rotating Co');
    const stream = await openLiveEvents(app.url, customer.token);
    await stream.until((e) => e.length >= 1);
    const rotated = await app.call('PUT', '/api/v1/customers/rotate', { token: customer.token });
    assert.equal(rotated.status, 200);
    await stream.done;
    const last = stream.events.at(-1)!;
    assert.equal(last.event, 'error');
    assert.match(JSON.parse(last.data).detail, /rotated/);
  });

  it('a paused reader does not hold back a fast one, holds at most one pending update per trailer, then gets the latest state of each', async () => {
    const customer = await customerWithToken(app, 'Busy Co');
    const fleet = await app.trailwire.admin.createFleet({ customerId: customer.id, name: 'Busy' });
    const trailers: Trailer[] = [];
    for (let i = 0; i < 5; i++) trailers.push(await app.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: uniqueVin() }));
    const fast = await openLiveEvents(app.url, customer.token);
    const slow = openPausableLiveEvents(app.url, customer.token);
    await fast.until((e) => e.length >= 1);
    await until(() => slow.events.length >= 1);
    slow.pause();

    // Large updates fill the slow reader's socket buffers quickly: the unit id carries 16 KiB.
    const rounds = 200;
    const padding = 'x'.repeat(16 * 1024);
    let mostPending = 0;
    for (let round = 0; round < rounds; round++) {
      for (const trailer of trailers) {
        const event: LiveTrailerEvent = {
          customerId: customer.id,
          fleet: { id: fleet.id, name: 'Busy' },
          trailer: { ...trailer, unitId: `${round}:${padding}`, faultedDevices: round },
          ts: Date.now(),
        };
        await app.trailwire.live.publish(event);
      }
      mostPending = Math.max(mostPending, app.trailwire.live.stats().pendingTrailers);
      await new Promise((resolve) => setImmediate(resolve));
    }
    const hasFinalStates = (updates: () => Array<{ id: string; faultedDevices: number }>) => () => {
      const latest = new Map(updates().map((t) => [t.id, t.faultedDevices]));
      return trailers.every((trailer) => latest.get(trailer.id) === rounds - 1);
    };
    await fast.until(hasFinalStates(fast.updates), 10_000);
    assert.ok(mostPending <= 2 * trailers.length, `at most one pending update per trailer and subscriber, saw ${mostPending}`);
    // The paused reader's socket is full: the hub holds the latest update of each trailer for it, no more.
    await until(() => {
      const stats = app.trailwire.live.stats();
      return stats.congestedSubscribers === 1 && stats.pendingTrailers === trailers.length;
    });
    assert.ok(slow.updates().length < rounds * trailers.length, 'the paused reader has not read everything');

    slow.resume();
    await until(hasFinalStates(slow.updates), 10_000);
    assert.ok(slow.updates().length < rounds * trailers.length, `coalesced, not all ${rounds * trailers.length}: got ${slow.updates().length}`);
    for (const trailer of trailers) {
      const seen = slow.updates().filter((t) => t.id === trailer.id).map((t) => t.faultedDevices);
      assert.deepEqual(seen, [...seen].sort((x, y) => x - y), 'never an older state after a newer one');
    }
    assert.equal(app.trailwire.live.stats().pendingTrailers, 0);
    fast.close();
    slow.close();
  });

  it("sends a snapshot shared by two streams as the same bytes in one write each: the read API's trailer JSON per trailer, then snapshot-end", async () => {
    const customer = await customerWithToken(app, 'Snapshot Co');
    const fleet = await app.trailwire.admin.createFleet({ customerId: customer.id, name: 'Dry vans' });
    const trailers: Trailer[] = [];
    for (let i = 0; i < 40; i++) trailers.push(await app.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: uniqueVin(), unitId: `DV-${i}` }));
    // An update in the window: the position the snapshot covers, so that one read serves both streams.
    await app.trailwire.live.publish({ customerId: customer.id, fleet: { id: fleet.id, name: 'Dry vans' }, trailer: trailers[0]!, ts: Date.now() });
    const position = await app.trailwire.live.newestPosition();
    assert.ok(position !== null);

    const [first, second] = await Promise.all([snapshotChunks(app.url, customer.token), snapshotChunks(app.url, customer.token)]);
    const listed = await app.call('GET', `/api/v1/trailers/${fleet.id}?limit=100`, { token: customer.token });
    assert.equal(listed.status, 200);
    const views = (listed.body as { data: unknown[] }).data;
    assert.equal(views.length, 40);
    const frames = views.map((view) => `event: snapshot\ndata: ${JSON.stringify(view)}\n\n`).join('');
    // One chunk for the 40 states (one write, not 40), the same for both, then the end with its position.
    assert.deepEqual(first, [frames, `id: ${position}\nevent: snapshot-end\ndata: {}\n\n`]);
    assert.deepEqual(second, first);
  });

  it('ends every stream with `event: error` (unavailable) on shutdown, then refuses new ones with 503', async () => {
    const customer = await customerWithToken(app, 'Shutdown Co');
    const stream = await openLiveEvents(app.url, customer.token);
    await stream.until((e) => e.length >= 1);
    live.endAllStreams();
    await stream.done;
    const problem = JSON.parse(stream.events.at(-1)!.data);
    assert.equal(stream.events.at(-1)!.event, 'error');
    assert.equal(problem.status, 503);
    assert.equal(live.openStreams, 0);
    const refused = await fetch(`${app.url}/api/v1/live`, { headers: { authorization: `Bearer ${customer.token}` } });
    assert.equal(refused.status, 503);
  });
});

const livefeed = (
  grpc.loadPackageDefinition(
    protoLoader.loadSync('livefeed/v1/livefeed.proto', { keepCase: true, longs: Number, defaults: true, includeDirs: [PROTO_ROOT] }),
  ) as any
).livefeed.v1;

async function until(condition: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('GET /api/v1/live in the standalone server', () => {
  it('refuses a bad heartbeat or cap setting at start, naming it, and leaves nothing open', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'trailwire-live-'));
    try {
      const logger = pino({ level: 'silent' });
      const base = { db: join(dir, 'trailwire.db'), host: '127.0.0.1', port: 0, grpcPort: 0, logger };
      await assert.rejects(startServer({ ...base, heartbeatIntervalMs: 0 }), /`heartbeatIntervalMs` must be a positive integer/);
      await assert.rejects(startServer({ ...base, maxStreamsPerCustomer: 2.5 }), /`maxStreamsPerCustomer` must be a positive integer/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("takes the LiveFeed's heartbeat and cap settings, writes a stream.open and a stream.close access-log line, and ends open streams on close() without hanging", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'trailwire-live-'));
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const running = await startServer({
      db: join(dir, 'trailwire.db'),
      host: '127.0.0.1',
      port: 0,
      grpcPort: 0,
      logger,
      heartbeatIntervalMs: 100,
      maxStreamsPerCustomer: 1,
    });
    try {
      const { principal, apiKey } = await running.trailwire.auth.createCustomer({ name: 'Standalone Co' });
      const authenticated = await fetch(`${running.url}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'x-api-key': apiKey } });
      const { access_token: token } = (await authenticated.json()) as { access_token: string };
      const stream = await openLiveEvents(running.url, token);
      // --heartbeat-ms reaches this endpoint too: several beats well within a second.
      await stream.until((e) => e.length >= 4, 3_000);
      // --max-streams-per-customer too: 1 here, and the first stream holds it.
      const refused = await fetch(`${running.url}/api/v1/live`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(refused.status, 429);
      const opened = lines.find((line) => line.event === 'stream.open');
      assert.equal(opened?.route, '/api/v1/live');
      assert.equal(opened?.principalId, principal.id);
      assert.equal(opened?.status, 200);

      const closing = running.close();
      const outcome = await Promise.race([closing.then(() => 'closed'), new Promise((resolve) => setTimeout(() => resolve('hung'), 10_000))]);
      assert.equal(outcome, 'closed', 'close() does not wait for an open event stream');
      await stream.done;
      const last = stream.events.at(-1)!;
      assert.equal(last.event, 'error');
      assert.equal(JSON.parse(last.data).status, 503);
      const closed = lines.find((line) => line.event === 'stream.close');
      assert.equal(closed?.endReason, 'unavailable');
      assert.equal(closed?.requestId, opened?.requestId);
      assert.equal(typeof closed?.durationMs, 'number');
      const streamLines = lines.filter((line) => line.access === 'http' && line.route === '/api/v1/live' && line.status === 200);
      assert.deepEqual(streamLines.map((line) => line.event), ['stream.open', 'stream.close'], 'two lines for the stream, no third');
    } finally {
      await running.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('GET /api/v1/live: the connect limits (issue 37)', () => {
  let app: TestApp;
  before(async () => {
    // 12:00:10 on the test clock: the minute's window ends in 50 s.
    app = await startTestApp({
      core: { limits: { liveConnect: { requests: 3, windowSeconds: 60 }, liveConnectPerAddress: { requests: 5, windowSeconds: 60 } } },
      clock: new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 10)),
      app: (trailwire) => ({ liveEvents: createLiveEventsRoute(trailwire, { heartbeatIntervalMs: 60_000 }) }),
    });
  });
  after(async () => {
    await app.close();
  });

  it('counts connects per customer and per address in windows: 429 problem+json with Retry-After past either, RateLimit-* on each stream', async () => {
    const greedy = await customerWithToken(app, 'Reconnecting Co');
    const other = await customerWithToken(app, 'Neighbour Co');
    for (let i = 0; i < 3; i++) {
      const stream = await openLiveEvents(app.url, greedy.token);
      assert.equal(stream.response.status, 200);
      assert.equal(stream.response.headers.get('ratelimit-limit'), '3');
      assert.equal(stream.response.headers.get('ratelimit-remaining'), String(2 - i));
      stream.close();
    }
    const refused = await fetch(`${app.url}/api/v1/live?snapshot=true`, { headers: { authorization: `Bearer ${greedy.token}` } });
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get('content-type'), 'application/problem+json');
    assert.equal(refused.headers.get('retry-after'), '50', 'the seconds until the window ends');
    assert.match(((await refused.json()) as { detail: string }).detail, /live-connect limit of 3 per 60 s/);
    // Every connect counts against its address, refused ones too: the sixth is refused whoever's it is.
    const neighbour = await openLiveEvents(app.url, other.token);
    assert.equal(neighbour.response.status, 200);
    neighbour.close();
    const fromSameAddress = await fetch(`${app.url}/api/v1/live`, { headers: { authorization: `Bearer ${other.token}` } });
    assert.equal(fromSameAddress.status, 429);
    assert.match(((await fromSameAddress.json()) as { detail: string }).detail, /live-connect-address limit of 5 per 60 s/);
    // A new window lets both in again.
    app.clock.advance(50_000);
    const again = await openLiveEvents(app.url, greedy.token);
    assert.equal(again.response.status, 200);
    again.close();
  });
});
