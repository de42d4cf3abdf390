/**
 * The live page's Server-Sent Events reader (`adapters/koa/pages/public/live/sse.js`, browser
 * JavaScript that Node 20 runs as it is): however the bytes are split into chunks, with LF, CRLF or
 * CR line ends, it yields the same events — `event:` and joined `data:` lines, comments skipped, a
 * blank line dispatching, an event cut off by the end of the stream never half-delivered, and the
 * last event id kept from event to event as EventSource keeps it (what a reconnect resumes after).
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';

// A computed specifier: the module is plain JavaScript without declarations.
const module = new URL('../../../adapters/koa/pages/public/live/sse.js', import.meta.url).href;
const { readEventStream } = (await import(module)) as { readEventStream: (body: ReadableStream<Uint8Array>) => AsyncIterable<{ event: string; data: string; id: string }> };

const STREAM = [
  ': a comment, as proxies send to keep a connection open',
  'event: heartbeat',
  'data: {"timestamp":"2026-11-25T10:00:00.000Z"}',
  '',
  'id: 1-abc',
  'event: update',
  'data: {"id":"abc",',
  'data:  "note":"ünïcødé ✓"}',
  '',
  'data: no event name',
  '',
  'event: nothing to dispatch',
  '',
  'event: error',
  'data: {"status":401}',
  '',
  'event: update',
  'data: cut off before its blank line',
].join('\n');

const EXPECTED = [
  { event: 'heartbeat', data: '{"timestamp":"2026-11-25T10:00:00.000Z"}', id: '' },
  { event: 'update', data: '{"id":"abc",\n "note":"ünïcødé ✓"}', id: '1-abc' },
  { event: 'message', data: 'no event name', id: '1-abc' },
  { event: 'error', data: '{"status":401}', id: '1-abc' },
];

/** A body delivering `bytes` in chunks of `size` bytes (splitting UTF-8 sequences and CRLFs too). */
function body(bytes: Uint8Array, size: number): ReadableStream<Uint8Array> {
  let offset = 0;
  return new ReadableStream({
    pull(controller) {
      if (offset >= bytes.length) return controller.close();
      controller.enqueue(bytes.slice(offset, offset + size));
      offset += size;
    },
  });
}

async function read(bytes: Uint8Array, size: number) {
  const events = [];
  for await (const event of readEventStream(body(bytes, size))) events.push(event);
  return events;
}

it('yields the same events whatever the chunking and the line ends', async () => {
  for (const [name, lineEnd] of [['LF', '\n'], ['CRLF', '\r\n'], ['CR', '\r']] as const) {
    const bytes = new TextEncoder().encode(STREAM.replaceAll('\n', lineEnd));
    for (const size of [1, 2, 3, 7, 64, bytes.length]) assert.deepEqual(await read(bytes, size), EXPECTED, `${name}, chunks of ${size} bytes`);
  }
});
