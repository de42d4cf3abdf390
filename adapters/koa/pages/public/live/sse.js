// @ts-check
// Server-Sent Events read from a fetch response body (EventSource cannot send an Authorization
// header). Parsing follows the WHATWG event-stream rules the page needs: `event:`, `data:` and `id:` fields
// (several data lines join with "\n"), comments (`:`) ignored, an event dispatched at a blank line,
// CR, LF or CRLF line ends.

/**
 * Yields `{ event, data, id }` for each event of the stream until it ends (`id`: the last event id so far, as EventSource keeps it).
 * @param {ReadableStream<Uint8Array>} body
 * @returns {AsyncGenerator<{ event: string, data: string, id: string }>}
 */
export async function* readEventStream(body) {
  // The cast: TypeScript's DOM types say a TextDecoderStream takes any BufferSource, and pipeThrough
  // wants one that takes exactly the body's Uint8Array; the two fit at run time.
  const reader = body.pipeThrough(/** @type {ReadableWritablePair<string, Uint8Array>} */ (/** @type {unknown} */ (new TextDecoderStream()))).getReader();
  let buffer = '';
  let event = '';
  /** @type {string[]} */
  let data = [];
  let id = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let end;
      while ((end = buffer.search(/\r\n|\r|\n/)) >= 0) {
        // A lone CR at the end of the buffer may be the first half of a CRLF: wait for more.
        if (buffer[end] === '\r' && end === buffer.length - 1) break;
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + (buffer.startsWith('\r\n', end) ? 2 : 1));
        if (line === '') {
          if (data.length > 0) yield { event: event || 'message', data: data.join('\n'), id };
          event = '';
          data = [];
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') event = value;
        else if (field === 'data') data.push(value);
        else if (field === 'id' && !value.includes('\0')) id = value;
      }
    }
  } finally {
    reader.releaseLock();
  }
}
