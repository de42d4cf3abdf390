/**
 * Waiting, as a partner would, for acknowledged payloads to be processed: each one's status read
 * through `GET /api/v1/telemetry/intake/status/{id}` until every one says `processed`. Fails when a
 * status read is not 200 (the payload is unknown), when one says `failed`, or when the time runs out
 * with some still pending (listed).
 */
import assert from 'node:assert/strict';
import { until } from './until.ts';

export async function assertAllProcessed(baseUrl: string, token: string, ids: readonly string[], timeoutMs = 30_000): Promise<void> {
  let pending = [...ids];
  const allProcessed = async () => {
    const states = await Promise.all(
      pending.map(async (id) => {
        const response = await fetch(`${baseUrl}/api/v1/telemetry/intake/status/${id}`, { headers: { authorization: `Bearer ${token}` } });
        assert.equal(response.status, 200, `payload ${id} is known`);
        return { id, status: ((await response.json()) as { status: string }).status };
      }),
    );
    assert.deepEqual(states.filter((state) => state.status === 'failed'), [], 'no acknowledged payload failed');
    pending = states.filter((state) => state.status !== 'processed').map((state) => state.id);
    return pending.length === 0;
  };
  await until(allProcessed, 'every acknowledged payload to be processed', timeoutMs).catch((error: unknown) => {
    // A refusal seen on the way says more than the time running out; then the ones still pending are listed.
    if (error instanceof assert.AssertionError) throw error;
  });
  assert.deepEqual(pending, [], 'every acknowledged payload was processed');
}
