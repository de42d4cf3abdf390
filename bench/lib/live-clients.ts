/**
 * LiveFeed subscribers for the fan-out benchmark, in a process of their own. Reads one JSON line
 * `{port, tokens, perConnection}`, opens one subscription per token (`perConnection` streams share a
 * connection), prints `ready` once every stream had its first heartbeat, or `failed <reason JSON>`
 * and exits when one ended before it. On `report <acks>` (acks:
 * JSON object from a payload's sequence number to the epoch ms its 202 arrived, `{}` when updates
 * did not come through the intake) it prints `{received, lastAt, publishLatencies, ackLatencies}`:
 * for every update, ms from its creation (`ts`) and from its payload's 202 to its arrival here.
 */
import { createInterface } from 'node:readline';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { PROTO_ROOT } from '../../adapters/grpc/proto.ts';

/** A payload's sequence number rides in its fix time: `PAYLOAD_EPOCH_SECONDS + seq`. */
export const PAYLOAD_EPOCH_SECONDS = 1_780_000_000;

const { LiveFeed } = (
  grpc.loadPackageDefinition(protoLoader.loadSync('livefeed/v1/livefeed.proto', { keepCase: true, longs: Number, defaults: true, includeDirs: [PROTO_ROOT] })) as any
).livefeed.v1;

const now = () => performance.timeOrigin + performance.now();

if (import.meta.url === `file://${process.argv[1]}`) {
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const { port, tokens, perConnection } = JSON.parse((await lines.next()).value as string) as { port: number; tokens: string[]; perConnection: number };
  // Per update: arrival time, creation time, payload sequence number (flat arrays: up to 10^6 updates).
  const arrivals: number[] = [];
  const created: number[] = [];
  const sequences: number[] = [];
  let ready = 0;
  const calls: grpc.ClientReadableStream<unknown>[] = [];
  let client: any;
  tokens.forEach((token, i) => {
    if (i % perConnection === 0) client = new LiveFeed(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    const call = client.Subscribe({}, metadata);
    let first = true;
    call.on('data', (message: any) => {
      if (message.is_heartbeat) {
        if (first) {
          first = false;
          if (++ready === tokens.length) console.log('ready');
        }
        return;
      }
      const { ts, trailer } = message.live_update;
      arrivals.push(now());
      created.push(ts.seconds * 1000 + ts.nanos / 1e6);
      sequences.push(trailer.telemetry.timestamp.seconds - PAYLOAD_EPOCH_SECONDS);
    });
    call.on('error', (error: grpc.ServiceError) => {
      // A stream refused or ended before its first heartbeat would leave the bench waiting for
      // `ready` forever: say why instead, and let the bench fail with it.
      if (first) {
        console.log(`failed ${JSON.stringify(`subscriber ${i} ended before its first heartbeat: ${grpc.status[error.code]} ${error.details}`)}`);
        process.exit(1);
      }
    });
    calls.push(call);
  });
  for (;;) {
    const next = await lines.next();
    if (next.done) break;
    if (next.value.startsWith('report')) {
      const acks = JSON.parse(next.value.slice('report'.length) || '{}') as Record<string, number>;
      const publishLatencies: number[] = [];
      const ackLatencies: number[] = [];
      for (let i = 0; i < arrivals.length; i++) {
        publishLatencies.push(Math.round((arrivals[i]! - created[i]!) * 100) / 100);
        const ack = acks[sequences[i]!];
        if (ack !== undefined) ackLatencies.push(Math.round((arrivals[i]! - ack) * 100) / 100);
      }
      for (const call of calls) call.cancel();
      // A report runs to megabytes: exit only once the pipe has taken all of it.
      process.stdout.write(`${JSON.stringify({ received: arrivals.length, lastAt: arrivals.at(-1) ?? 0, publishLatencies, ackLatencies })}\n`, () => process.exit(0));
      break;
    }
  }
}
