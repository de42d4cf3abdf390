/**
 * A LiveFeed client in a few lines: authenticates with a customer API key (or takes a token),
 * subscribes to `livefeed.v1.LiveFeed`, and prints one line per heartbeat and per trailer update.
 *
 *   node --import tsx examples/live-client/index.ts --api-key twc_... [--auth-url http://localhost:8080] [--target localhost:50051]
 *   node --import tsx examples/live-client/index.ts --token <customer JWT> [--target localhost:50051]
 */
import { parseArgs } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const { values } = parseArgs({
  options: {
    target: { type: 'string', default: 'localhost:50051' },
    token: { type: 'string' },
    'api-key': { type: 'string' },
    'auth-url': { type: 'string', default: 'http://localhost:8080' },
    count: { type: 'string', description: 'stop after this many messages' },
  },
});

async function customerToken(): Promise<string> {
  if (values.token) return values.token;
  if (!values['api-key']) throw new Error('pass --api-key twc_... (or --token <jwt>)');
  const response = await fetch(`${values['auth-url']}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'x-api-key': values['api-key'] } });
  const body = (await response.json()) as { access_token?: string; detail?: string };
  if (!response.ok || !body.access_token) throw new Error(`authenticate failed: ${response.status} ${body.detail ?? ''}`);
  return body.access_token;
}

const definition = protoLoader.loadSync('livefeed/v1/livefeed.proto', {
  keepCase: true,
  longs: Number,
  defaults: true,
  includeDirs: [new URL('../../proto/', import.meta.url).pathname],
});
const { LiveFeed } = (grpc.loadPackageDefinition(definition) as any).livefeed.v1;

const time = (ts?: { seconds: number; nanos: number }) => (ts ? new Date(ts.seconds * 1000 + ts.nanos / 1e6).toISOString() : '-');

const metadata = new grpc.Metadata();
metadata.set('authorization', `Bearer ${await customerToken()}`);
const client = new LiveFeed(values.target, grpc.credentials.createInsecure());
const call = client.Subscribe({}, metadata);
let received = 0;
const limit = values.count === undefined ? Infinity : Number(values.count);

call.on('data', (message: any) => {
  received++;
  if (message.is_heartbeat) console.log(`${new Date().toISOString()} heartbeat`);
  else {
    const { fleet_id, fleet_name, ts, trailer } = message.live_update;
    const fix = trailer.telemetry;
    const where = fix ? `${fix.lat.toFixed(5)},${fix.long.toFixed(5)} ${fix.speed} mph ${fix.heading}` : 'no fix yet';
    console.log(
      `${time(ts)} fleet ${fleet_id} (${fleet_name ?? '?'}) trailer ${trailer.unit_id ?? trailer.id} ${trailer.vin ?? ''} ` +
        `${trailer.status?.name ?? '?'} faulted=${trailer.faulted_devices} warning=${trailer.warning_devices} ${where}`,
    );
  }
  if (received >= limit) {
    call.cancel();
    client.close();
  }
});
call.on('error', (error: grpc.ServiceError) => {
  if (error.code === grpc.status.CANCELLED) return;
  console.error(`stream ended: ${grpc.status[error.code]} ${error.details}`);
  process.exitCode = 1;
});
