/**
 * LiveFeed subscribers for the fan-out benchmark, in a process of their own. Reads one JSON line
 * `{port, tokens, perConnection, sampleEvery?}`, opens one subscription per token (`perConnection`
 * streams share a connection), prints `ready` once every stream had its first heartbeat, or
 * `failed <reason JSON>` and exits when one ended before it. Commands:
 * - `report <acks>` (acks: JSON object from a payload's sequence number to the epoch ms its 202
 *   arrived, `{}` when updates did not come through the intake) prints `{received, lastAt,
 *   publishLatencies, ackLatencies}`: for every update, ms from its creation (`ts`) and from its
 *   payload's 202 to its arrival here; then exits.
 * - `mark` prints `{received, p50, p99, max, samples}` for the updates since the last `mark`:
 *   how many arrived, and the publish-to-receive latency of the sampled ones.
 * - `storm <resume>` cancels every stream and subscribes them all again at once (after the last
 *   position each received when `resume` is 1) and prints `{ms, firstMs, replayed}` once every new
 *   stream is live again: it has answered and, when resuming, caught up with the newest position
 *   any stream had seen when the storm began. `failed <reason>` after 60 s.
 * Messages are decoded one in `sampleEvery` (heartbeats and signals always): at saturation the
 * decoding would otherwise be most of what these processes measure.
 */
import { createInterface } from 'node:readline';
import * as grpc from '@grpc/grpc-js';
import { decodeLiveUpdateResponse, liveFeedProtoService } from '../../adapters/grpc/proto.ts';
import { comparePositions } from '../../core/live-replay.ts';

/** A payload's sequence number rides in its fix time: `PAYLOAD_EPOCH_SECONDS + seq`. */
export const PAYLOAD_EPOCH_SECONDS = 1_780_000_000;

// Responses arrive as bytes, decoded here when needed (see `sampleEvery`).
const LiveFeed = grpc.makeGenericClientConstructor({ Subscribe: { ...liveFeedProtoService.Subscribe!, responseDeserialize: (bytes: Buffer) => bytes } }, 'LiveFeed');

/** Heartbeats and signals are a few bytes (a position at most); an update is over a hundred. */
const SHORT_MESSAGE_BYTES = 64;

const now = () => performance.timeOrigin + performance.now();

interface Decoded {
  is_heartbeat: boolean;
  position: string;
  live_update?: { ts: { seconds: number; nanos: number }; trailer: { telemetry?: { timestamp: { seconds: number } } } };
}

interface Stream {
  call: grpc.ClientReadableStream<Buffer>;
  /** The last position decoded on the stream ('' before one). */
  last: string;
  index: number;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const init = JSON.parse((await lines.next()).value as string) as { port: number; tokens: string[]; perConnection: number; sampleEvery?: number };
  const { port, tokens, perConnection } = init;
  const sampleEvery = init.sampleEvery ?? 1;
  // Per decoded update: arrival time, creation time, payload sequence number (flat arrays: up to 10^6 updates).
  const arrivals: number[] = [];
  const created: number[] = [];
  const sequences: number[] = [];
  let received = 0;
  let receivedAtMark = 0;
  let samplesAtMark = 0;
  let ready = 0;
  const clients: grpc.Client[] = [];
  let streams: Stream[] = [];
  /** While a storm runs: what each new stream must reach to be live again. */
  let storm: { target: string | null; live: Set<number>; answered: Set<number>; replayed: number; done: () => void } | undefined;

  const fail = (reason: string) => {
    console.log(`failed ${JSON.stringify(reason)}`);
    process.exit(1);
  };

  const open = (index: number, resumeAfter: string): Stream => {
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${tokens[index]}`);
    const client = clients[Math.floor(index / perConnection)]!;
    const call = client.makeServerStreamRequest('/livefeed.v1.LiveFeed/Subscribe', (value: object) => liveFeedProtoService.Subscribe!.requestSerialize(value), (bytes: Buffer) => bytes, resumeAfter === '' ? {} : { resume_after: resumeAfter }, metadata) as grpc.ClientReadableStream<Buffer>;
    const stream: Stream = { call, last: resumeAfter, index };
    let first = true;
    let updates = 0;
    call.on('data', (bytes: Buffer) => {
      const short = bytes.length < SHORT_MESSAGE_BYTES;
      if (!short) received++;
      if (!short && ++updates % sampleEvery !== 0) {
        if (storm) storm.replayed++;
        return;
      }
      const message = decodeLiveUpdateResponse(bytes) as Decoded;
      if (message.position) stream.last = message.position;
      if (first) {
        first = false;
        if (!storm && ++ready === tokens.length) console.log('ready');
        storm?.answered.add(index);
      }
      if (message.live_update) {
        const { ts, trailer } = message.live_update;
        arrivals.push(now());
        created.push(ts.seconds * 1000 + ts.nanos / 1e6);
        sequences.push((trailer.telemetry?.timestamp.seconds ?? PAYLOAD_EPOCH_SECONDS) - PAYLOAD_EPOCH_SECONDS);
        if (storm) storm.replayed++;
      }
      if (storm && storm.answered.has(index) && !storm.live.has(index)) {
        if (storm.target === null || (stream.last !== '' && comparePositions(stream.last, storm.target) >= 0)) {
          storm.live.add(index);
          if (storm.live.size === tokens.length) storm.done();
        }
      }
    });
    call.on('error', (error: grpc.ServiceError) => {
      // A stream refused or ended before its first message would leave the bench waiting for
      // `ready` forever: say why instead, and let the bench fail with it.
      if (first && error.code !== grpc.status.CANCELLED) fail(`subscriber ${index} ended before its first message: ${grpc.status[error.code]} ${error.details}`);
    });
    return stream;
  };

  for (let i = 0; i < tokens.length; i += perConnection) clients.push(new LiveFeed(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }));
  streams = tokens.map((_, i) => open(i, ''));

  for (;;) {
    const next = await lines.next();
    if (next.done) break;
    const [command, rest = ''] = [next.value.split(' ')[0], next.value.slice(next.value.indexOf(' ') + 1)];
    if (command === 'mark') {
      const latencies = arrivals.slice(samplesAtMark).map((arrival, i) => arrival - created[samplesAtMark + i]!).sort((a, b) => a - b);
      const at = (p: number) => (latencies.length === 0 ? null : Math.round(latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)]! * 10) / 10);
      console.log(JSON.stringify({ received: received - receivedAtMark, p50: at(50), p99: at(99), max: at(100), samples: latencies.length }));
      receivedAtMark = received;
      samplesAtMark = arrivals.length;
    }
    if (command === 'storm') {
      const resume = rest === '1';
      const positions = streams.map((stream) => stream.last).filter((position) => position !== '');
      const target = resume && positions.length > 0 ? positions.reduce((a, b) => (comparePositions(a, b) >= 0 ? a : b)) : null;
      const started = now();
      let firstMs = 0;
      const finished = new Promise<void>((resolve) => {
        storm = { target, live: new Set(), answered: new Set(), replayed: 0, done: resolve };
      });
      const answered = setInterval(() => {
        if (firstMs === 0 && storm!.answered.size === tokens.length) firstMs = now() - started;
      }, 1);
      for (const stream of streams) stream.call.cancel();
      streams = streams.map((stream) => open(stream.index, resume ? stream.last : ''));
      const timeout = setTimeout(() => fail(`storm: ${storm!.live.size} of ${tokens.length} streams live again after 60 s (${storm!.answered.size} answered)`), 60_000);
      await finished;
      clearTimeout(timeout);
      clearInterval(answered);
      const ms = now() - started;
      console.log(JSON.stringify({ ms: Math.round(ms), firstMs: Math.round(firstMs || ms), replayed: storm!.replayed }));
      storm = undefined;
    }
    if (command === 'report') {
      const acks = JSON.parse(rest === 'report' ? '{}' : rest || '{}') as Record<string, number>;
      const publishLatencies: number[] = [];
      const ackLatencies: number[] = [];
      for (let i = 0; i < arrivals.length; i++) {
        publishLatencies.push(Math.round((arrivals[i]! - created[i]!) * 100) / 100);
        const ack = acks[sequences[i]!];
        if (ack !== undefined) ackLatencies.push(Math.round((arrivals[i]! - ack) * 100) / 100);
      }
      for (const stream of streams) stream.call.cancel();
      // A report runs to megabytes: exit only once the pipe has taken all of it.
      process.stdout.write(`${JSON.stringify({ received, lastAt: arrivals.at(-1) ?? 0, publishLatencies, ackLatencies })}\n`, () => process.exit(0));
      break;
    }
  }
}
