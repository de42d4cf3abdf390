import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { TrailwireError } from '../../core/errors.ts';
import { CursorCodec, parseActiveOnly, parseTake, parseTimeRange, parseTimestamp, toPage } from '../../core/paging.ts';

function fieldOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof TrailwireError);
    assert.equal(error.code, 'validation_failed');
    return error.errors?.[0]?.path;
  }
  assert.fail('expected a validation error');
}

describe('parseTake', () => {
  it('defaults to 50 and accepts 1..500', () => {
    assert.equal(parseTake(undefined), 50);
    assert.equal(parseTake('1'), 1);
    assert.equal(parseTake('500'), 500);
  });
  it('rejects anything else on /take', () => {
    for (const bad of ['0', '501', '-1', '1.5', 'abc', '', ' 5', '1e2']) assert.equal(fieldOf(() => parseTake(bad)), '/take', bad);
  });
});

describe('parseActiveOnly', () => {
  it('accepts true/false only', () => {
    assert.equal(parseActiveOnly(undefined), false);
    assert.equal(parseActiveOnly('true'), true);
    assert.equal(parseActiveOnly('false'), false);
    assert.equal(fieldOf(() => parseActiveOnly('yes')), '/activeOnly');
  });
});

describe('time ranges', () => {
  const now = Date.UTC(2026, 5, 1, 12);
  it('defaults to the last 24 hours', () => {
    assert.deepEqual(parseTimeRange({}, now), { from: now - 86_400_000, to: now });
  });
  it('defaults from to 24 h before an explicit to', () => {
    const to = Date.UTC(2026, 4, 1);
    assert.deepEqual(parseTimeRange({ to: '2026-05-01T00:00:00Z' }, now), { from: to - 86_400_000, to });
  });
  it('accepts offsets and fractions', () => {
    assert.equal(parseTimestamp('2026-05-01T02:00:00.123+02:00', '/from'), Date.UTC(2026, 4, 1, 0, 0, 0, 123));
  });
  it('rejects from after to, and non-RFC 3339 values', () => {
    assert.equal(fieldOf(() => parseTimeRange({ from: '2026-05-02T00:00:00Z', to: '2026-05-01T00:00:00Z' }, now)), '/from');
    assert.equal(fieldOf(() => parseTimeRange({ from: '2026-05-01' }, now)), '/from');
    assert.equal(fieldOf(() => parseTimeRange({ to: '1714521600' }, now)), '/to');
    assert.equal(fieldOf(() => parseTimeRange({ to: '2026-02-30T00:00:00Z' }, now)), '/to');
  });
});

describe('CursorCodec', () => {
  const codec = new CursorCodec(randomBytes(32));
  it('round-trips id and time positions with the shape of their list (take, activeOnly, range)', () => {
    const id = codec.encode('fleets', { kind: 'id', afterId: 42, take: 7 });
    assert.deepEqual(codec.decode('fleets', id), { kind: 'id', afterId: 42, take: 7 });
    const filtered = { kind: 'id' as const, afterId: 'abc', take: 3, activeOnly: true };
    assert.deepEqual(codec.decode('trailers:1', codec.encode('trailers:1', filtered)), filtered);
    const time = { kind: 'time' as const, after: { timestamp: 5, seq: 9 }, range: { from: 1, to: 10 }, take: 500 };
    assert.deepEqual(codec.decode('gps:t1', codec.encode('gps:t1', time)), time);
  });
  it('rejects a token of another list, a tampered token and garbage', () => {
    const token = codec.encode('trailers:1:false', { kind: 'id', afterId: 'abc', take: 50 });
    assert.equal(fieldOf(() => codec.decode('trailers:2:false', token)), '/next');
    const [body, mac] = token.split('.') as [string, string];
    const forged = Buffer.from(JSON.stringify({ i: 'zzz' })).toString('base64url');
    assert.equal(fieldOf(() => codec.decode('trailers:1:false', `${forged}.${mac}`)), '/next');
    assert.equal(fieldOf(() => codec.decode('trailers:1:false', `${body}.${mac.slice(0, -1)}A`)), '/next');
    for (const garbage of ['', '.', 'abc', 'a.b.c', '%%%']) assert.equal(fieldOf(() => codec.decode('x', garbage)), '/next');
  });
  it('does not accept a token signed with another secret', () => {
    const other = new CursorCodec(randomBytes(32));
    assert.equal(fieldOf(() => codec.decode('fleets', other.encode('fleets', { kind: 'id', afterId: 1, take: 50 }))), '/next');
  });
  it('refuses a short secret', () => {
    assert.throws(() => new CursorCodec(randomBytes(16)), /32 bytes/);
  });
});

describe('toPage', () => {
  it('uses the extra row only to say more exist', () => {
    const page = toPage([1, 2, 3], 2, (n) => n * 10, (last) => `after-${last}`);
    assert.deepEqual(page, { data: [10, 20], next: 'after-2' });
    assert.deepEqual(toPage([1, 2], 2, (n) => n, String), { data: [1, 2] });
  });
});
