/**
 * LiveFeed subscribers for the fan-out benchmark, in a process of their own. Reads one JSON line
 * `{port, tokens, perConnection}`, opens one subscription per token (`perConnection` streams share a
 * connection), prints `ready` once every stream had its first heartbeat, then on `report` prints
 * `{received, latencies}` — publish-to-receive latency in ms of every update.
 */
import { createInterface } from 'node:readline';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { PROTO_ROOT } from '../../adapters/grpc/proto.ts';

const { LiveFeed } = (
  grpc.loadPackageDefinition(protoLoader.loadSync('livefeed/v1/livefeed.proto', { keepCase: true, longs: Number, defaults: true, includeDirs: [PROTO_ROOT] })) as any
).livefeed.v1;

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const { port, tokens, perConnection } = JSON.parse((await lines.next()).value as string) as { port: number; tokens: string[]; perConnection: number };
const latencies: number[] = [];
let received = 0;
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
    received++;
    const ts = message.live_update.ts;
    latencies.push(Date.now() - (ts.seconds * 1000 + ts.nanos / 1e6));
  });
  call.on('error', () => {});
  calls.push(call);
});
for (;;) {
  const next = await lines.next();
  if (next.done) break;
  if (next.value === 'report') {
    console.log(JSON.stringify({ received, latencies }));
    for (const call of calls) call.cancel();
    process.exit(0);
  }
}
