/**
 * Waiting, as a partner would, for acknowledged payloads to be processed: each one's status read
 * through `GET /api/v1/telemetry/intake/status/{id}` until every one says `processed`. Fails when a
 * status read is not 200 (the payload is unknown), when one says `failed`, or when the time runs out
 * with some still pending (listed).
 */
import assert from 'node:assert/strict';

export async function assertAllProcessed(baseUrl: string, token: string, ids: readonly string[], timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let pending = [...ids];
  while (pending.length > 0 && Date.now() < deadline) {
    const states = await Promise.all(
      pending.map(async (id) => {
        const response = await fetch(`${baseUrl}/api/v1/telemetry/intake/status/${id}`, { headers: { authorization: `Bearer ${token}` } });
        assert.equal(response.status, 200, `payload ${id} is known`);
        return { id, status: ((await response.json()) as { status: string }).status };
      }),
    );
    assert.deepEqual(states.filter((state) => state.status === 'failed'), [], 'no acknowledged payload failed');
    pending = states.filter((state) => state.status !== 'processed').map((state) => state.id);
    if (pending.length > 0) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.deepEqual(pending, [], 'every acknowledged payload was processed');
}
