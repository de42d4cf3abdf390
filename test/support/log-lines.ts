/**
 * Test support: a stream to hand pino, and the JSON lines written to it, one object per line, so a
 * test can assert what the service logged.
 */
import { Writable } from 'node:stream';

export function logLines(): { lines: Array<Record<string, unknown>>; stream: Writable } {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  return { lines, stream };
}
