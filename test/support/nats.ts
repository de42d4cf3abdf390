/**
 * JetStream for tests: `TRAILWIRE_TEST_NATS_URL` (suites skip, saying so, without it), a stream name
 * and subject prefix of their own per log, and the cleanup that deletes the stream and its buckets.
 */
import { randomBytes } from 'node:crypto';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';

export const NATS_URL = process.env.TRAILWIRE_TEST_NATS_URL;
export const NATS_SKIP = NATS_URL === undefined ? 'TRAILWIRE_TEST_NATS_URL is not set (nats-server -js at nats://127.0.0.1:4222 in CI)' : false;

/** A stream name and subject prefix no other test uses. */
export function freshStream(): { stream: string; subjectPrefix: string } {
  const tag = randomBytes(5).toString('hex');
  return { stream: `TW_TEST_${tag}`, subjectPrefix: `tw-test.${tag}` };
}

/** Deletes the streams (and their KV buckets' streams) named. */
export async function deleteStreams(streams: readonly string[]): Promise<void> {
  if (streams.length === 0 || NATS_URL === undefined) return;
  const nc = await connect({ servers: NATS_URL });
  try {
    const jsm = await jetstreamManager(nc);
    for (const stream of streams)
      for (const name of [stream, `KV_${stream}_LEASES`, `KV_${stream}_POSITIONS`]) await jsm.streams.delete(name).catch(() => {});
  } finally {
    await nc.close();
  }
}
