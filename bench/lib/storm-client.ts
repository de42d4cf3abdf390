/**
 * The reconnecting customer of the live storm bench, in its own process: opens
 * `GET /api/v1/live?snapshot=true` `rate` times a second for `seconds`, reads each stream to its
 * `snapshot-end` (or takes its refusal) and closes it. Arguments: `<url> <token> <rate> <seconds>`.
 * Prints `{served, refused, failed, firstFailure, bytes}` when done.
 */
const [url, token, rateArg, secondsArg] = process.argv.slice(2);
const rate = Number(rateArg);
const seconds = Number(secondsArg);
const counts = { served: 0, refused: 0, failed: 0, bytes: 0, firstFailure: '' };

async function connect(): Promise<void> {
  const controller = new AbortController();
  try {
    const response = await fetch(`${url}/api/v1/live?snapshot=true`, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
    if (response.status === 429) {
      counts.refused++;
      await response.text();
      return;
    }
    if (!response.ok || !response.body) throw new Error(`status ${response.status}`);
    let tail = '';
    for await (const chunk of response.body) {
      const text = Buffer.from(chunk as Uint8Array).toString();
      counts.bytes += chunk.length;
      if ((tail + text).includes('event: snapshot-end')) break;
      tail = text.slice(-32);
    }
    counts.served++;
  } catch (error) {
    counts.failed++;
    counts.firstFailure ||= String((error as Error).cause ?? error);
  } finally {
    controller.abort();
  }
}

const started = performance.now();
const pending: Promise<void>[] = [];
for (let i = 0; i < rate * seconds; i++) {
  const due = started + (i * 1000) / rate;
  const wait = due - performance.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  pending.push(connect());
}
await Promise.all(pending);
console.log(JSON.stringify(counts));
