/**
 * HTTP/1.1 framing against `trailwire serve` as it runs (issue 37, item 1, and STYLE's "speed
 * without a second path"): connection-level code (deadlines, caps, lanes) meets pipelined requests,
 * keep-alive reuse after a refusal, request-smuggling shapes, half-closed sockets and
 * `Connection: close` mid-pipeline here before it lands. Each case writes raw bytes on one socket
 * and reads the answers back in order; after each, the server must still be alive and serving. The
 * send-deadline rewrite of an earlier session crashed the process on two pipelined `GET /healthz`
 * (an answer queued behind an unfinished one has no socket yet); no test had sent two requests on
 * one connection before reading.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runTrailwire, startServe } from '../../support/cli.ts';

const VIN = '1HGCM82633A004352';

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * What the server sent on one connection: the answers parsed in order (by Content-Length or chunked
 * framing), and whether the server closed the connection.
 */
interface ConnectionTranscript {
  answers: RawAnswer[];
  closed: boolean;
}

/** Parses as many complete HTTP/1.1 answers as `bytes` holds; `rest` is what is left unparsed. */
function parseAnswers(bytes: Buffer): { answers: RawAnswer[]; rest: Buffer } {
  const answers: RawAnswer[] = [];
  let at = 0;
  for (;;) {
    const headEnd = bytes.indexOf('\r\n\r\n', at);
    if (headEnd < 0) break;
    const [statusLine, ...lines] = bytes.subarray(at, headEnd).toString('latin1').split('\r\n');
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine!)?.[1]);
    assert.ok(Number.isInteger(status), `a status line, got ${JSON.stringify(statusLine)}`);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    let next = headEnd + 4;
    let body: Buffer;
    if (headers['transfer-encoding'] === 'chunked') {
      const chunks: Buffer[] = [];
      let complete = false;
      for (;;) {
        const sizeEnd = bytes.indexOf('\r\n', next);
        if (sizeEnd < 0) break;
        const size = parseInt(bytes.subarray(next, sizeEnd).toString('latin1'), 16);
        if (bytes.length < sizeEnd + 2 + size + 2) break;
        chunks.push(bytes.subarray(sizeEnd + 2, sizeEnd + 2 + size));
        next = sizeEnd + 2 + size + 2;
        if (size === 0) {
          complete = true;
          break;
        }
      }
      if (!complete) break;
      body = Buffer.concat(chunks);
    } else {
      const length = Number(headers['content-length'] ?? 0);
      if (bytes.length < next + length) break;
      body = bytes.subarray(next, next + length);
      next += length;
    }
    answers.push({ status, headers, body: body.toString('utf8') });
    at = next;
  }
  return { answers, rest: bytes.subarray(at) };
}

/**
 * Writes `parts` on one new connection (a pause of `gapMs` between parts), then reads until `count`
 * answers arrived or the server closed the connection (or `waitMs` passed). `halfClose` ends the
 * client's side after the last part, as a client that has nothing more to send does.
 */
async function exchange(
  url: URL,
  parts: Array<string | Buffer>,
  options: { count: number; waitMs?: number; gapMs?: number; halfClose?: boolean },
): Promise<ConnectionTranscript> {
  const socket: Socket = connect({ host: url.hostname, port: Number(url.port), allowHalfOpen: true });
  socket.on('error', () => {});
  let received = Buffer.alloc(0);
  let closed = false;
  const done = new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, options.waitMs ?? 5_000);
    const finish = () => {
      clearTimeout(timer);
      resolve();
    };
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (parseAnswers(received).answers.length >= options.count) finish();
    });
    // 'end': the server has sent all it will (the client's own side may still be open, allowHalfOpen).
    for (const event of ['end', 'close'])
      socket.on(event, () => {
        closed = true;
        finish();
      });
  });
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  for (const [index, part] of parts.entries()) {
    if (index > 0 && options.gapMs) await new Promise((resolve) => setTimeout(resolve, options.gapMs));
    socket.write(part);
  }
  if (options.halfClose) socket.end();
  await done;
  // A close that follows the last answer at once is part of what the server did.
  if (!closed) await new Promise((resolve) => setTimeout(resolve, 50));
  socket.destroy();
  return { answers: parseAnswers(received).answers, closed };
}

const get = (path: string, headers = '') => `GET ${path} HTTP/1.1\r\nHost: x\r\n${headers}\r\n`;
const post = (path: string, body: string, headers = '') =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${headers}\r\n${body}`;

describe('HTTP/1.1 framing on `trailwire serve`', () => {
  const directory = mkdtempSync(join(tmpdir(), 'trailwire-framing-'));
  const db = join(directory, 'trailwire.db');
  let child: ChildProcess | undefined;
  let url: URL;
  let metricsUrl: URL;
  let apiKey: string;
  let token: string;
  let timestamp = Math.floor(Date.now() / 1000) - 3_600;
  const fix = () => JSON.stringify({ timestamp: timestamp++, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 88.5, bearingDeg: 271 });

  before(async () => {
    const created = await runTrailwire(['partners', 'create', '--name', 'Pipeliner', '--product', 'gps-basic', '--db', db, '--json']);
    assert.equal(created.code, 0, created.stderr);
    apiKey = (JSON.parse(created.stdout) as { apiKey: string }).apiKey;
    const started = await startServe<{ url: string; metrics: string }>(
      ['--port', '0', '--grpc-port', '0', '--metrics-port', '0', '--host', '127.0.0.1', '--json', '--log-level', 'silent', '--db', db],
      process.env,
      (spawned) => (child = spawned),
    );
    url = new URL(started.document.url);
    metricsUrl = new URL(started.document.metrics);
    const response = await fetch(new URL('/api/v1/partners/authenticate', url), { method: 'POST', headers: { 'x-api-key': apiKey } });
    token = ((await response.json()) as { access_token: string }).access_token;
  });

  after(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child!.on('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(directory, { recursive: true, force: true });
  });

  /** The process is alive and a fresh connection is served. */
  async function assertStillServing(): Promise<void> {
    assert.equal(child?.exitCode, null, 'the server process is alive');
    const response = await fetch(new URL('/healthz', url));
    assert.equal(response.status, 200);
  }

  it('answers two pipelined requests written at once, in order', async () => {
    const { answers } = await exchange(url, [get('/healthz') + get('/healthz')], { count: 2 });
    assert.deepEqual(answers.map((answer) => answer.status), [200, 200]);
    await assertStillServing();
  });

  it('answers fifty pipelined requests in order (different routes, so the order shows)', async () => {
    const paths = Array.from({ length: 50 }, (_, index) => (index % 2 === 0 ? '/healthz' : '/no-such-route'));
    const { answers, closed } = await exchange(url, [paths.map((path) => get(path)).join('')], { count: 50 });
    assert.deepEqual(
      answers.map((answer) => answer.status),
      paths.map((path) => (path === '/healthz' ? 200 : 404)),
    );
    assert.equal(closed, false, 'the connection stays open for more');
    assert.match(answers[1]!.headers['content-type']!, /^application\/problem\+json/);
    await assertStillServing();
  });

  it('queues an answer behind a slow first one: authenticate (a key hash) then /healthz', async () => {
    const { answers } = await exchange(url, [`POST /api/v1/partners/authenticate HTTP/1.1\r\nHost: x\r\nX-API-Key: ${apiKey}\r\nContent-Length: 0\r\n\r\n` + get('/healthz')], { count: 2 });
    assert.deepEqual(answers.map((answer) => answer.status), [200, 200]);
    assert.ok((JSON.parse(answers[0]!.body) as { access_token?: string }).access_token, 'the first answer is the token');
    await assertStillServing();
  });

  it('takes a pipelined intake POST after a GET, and a second one after it', async () => {
    const auth = `Authorization: Bearer ${token}\r\n`;
    const { answers } = await exchange(url, [get('/healthz') + post(`/api/v1/telemetry/intake/${VIN}`, fix(), auth) + post(`/api/v1/telemetry/intake/${VIN}`, fix(), auth)], { count: 3 });
    assert.deepEqual(answers.map((answer) => answer.status), [200, 202, 202]);
    const ids = answers.slice(1).map((answer) => (JSON.parse(answer.body) as { id: string }).id);
    assert.notEqual(ids[0], ids[1], 'two payloads accepted, each its own');
    assert.equal(answers[1]!.headers['cache-control'], 'no-store');
    await assertStillServing();
  });

  it('reuses a keep-alive connection after refusals (401, 400 bad JSON, 404)', async () => {
    const auth = `Authorization: Bearer ${token}\r\n`;
    const { answers, closed } = await exchange(
      url,
      [
        post(`/api/v1/telemetry/intake/${VIN}`, fix()), // no token
        post(`/api/v1/telemetry/intake/${VIN}`, '{"timestamp":', auth),
        get('/api/v1/nothing-here'),
        post(`/api/v1/telemetry/intake/${VIN}`, fix(), auth),
      ],
      { count: 4, gapMs: 20 },
    );
    assert.deepEqual(answers.map((answer) => answer.status), [401, 400, 404, 202]);
    for (const refusal of answers.slice(0, 3)) assert.match(refusal.headers['content-type']!, /^application\/problem\+json/);
    assert.equal(closed, false);
    await assertStillServing();
  });

  it('refuses request-smuggling shapes with 400 and closes, never answering the smuggled request', async () => {
    const smuggled = get('/healthz');
    const shapes = [
      // Content-Length and Transfer-Encoding together (CL.TE / TE.CL).
      `POST /api/v1/partners/authenticate HTTP/1.1\r\nHost: x\r\nContent-Length: ${4 + smuggled.length}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${smuggled}`,
      // Two different Content-Lengths.
      `POST /api/v1/partners/authenticate HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: ${smuggled.length}\r\n\r\n${smuggled}`,
      // An obfuscated Transfer-Encoding.
      `POST /api/v1/partners/authenticate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n${smuggled}`,
      // A bare LF inside a chunk size line.
      `POST /api/v1/partners/authenticate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\n\r\n${smuggled}`,
    ];
    for (const shape of shapes) {
      const { answers, closed } = await exchange(url, [shape], { count: 2, waitMs: 2_000 });
      assert.ok(answers.length <= 1, `one answer at most, got ${answers.map((answer) => answer.status).join(', ')} for ${JSON.stringify(shape.slice(0, 90))}`);
      if (answers.length === 1) assert.ok(answers[0]!.status === 400 || answers[0]!.status === 501, `refused: ${answers[0]!.status}`);
      assert.equal(closed, true, 'the connection is closed');
    }
    await assertStillServing();
  });

  it('answers a client that half-closes after its requests, then closes', async () => {
    const { answers, closed } = await exchange(url, [get('/healthz') + get('/healthz')], { count: 2, halfClose: true });
    assert.deepEqual(answers.map((answer) => answer.status), [200, 200]);
    assert.equal(closed, true, 'closed once the answers went out');
    await assertStillServing();
  });

  it('stops at `Connection: close` mid-pipeline: what came before and that request answered, nothing after', async () => {
    // In separate writes: node's parser refuses a single read holding data after `Connection: close` as a whole (400).
    const { answers, closed } = await exchange(url, [get('/healthz'), get('/healthz', 'Connection: close\r\n'), get('/no-such-route')], { count: 3, waitMs: 2_000, gapMs: 30 });
    assert.deepEqual(answers.map((answer) => answer.status), [200, 200]);
    assert.equal(answers[1]!.headers.connection, 'close');
    assert.equal(closed, true);
    await assertStillServing();
  });

  it('answers pipelined requests on the metrics listener too', async () => {
    const { answers } = await exchange(metricsUrl, [get('/metrics') + get('/metrics') + get('/elsewhere')], { count: 3 });
    assert.deepEqual(answers.map((answer) => answer.status), [200, 200, 404]);
    assert.equal(child?.exitCode, null, 'the server process is alive');
  });
});
