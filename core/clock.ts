/**
 * Time and identity sources, injected wherever time or chance matters so that window maths, expiry
 * and ids are tested without sleeping.
 *
 * Two id sources: random UUIDs for records, and time-ordered UUIDv7s (RFC 9562) for intake payloads
 * and webhook deliveries. An intake id is the key the status endpoint looks up, so the queue indexes
 * it; ids that grow with time are appended to the end of that index instead of landing on a random
 * page of it, which halves the cost of an enqueue at a deep queue. They are still opaque to partners,
 * unguessable (62 random bits) and never all digits (contract 2).
 */
import { randomFillSync, randomUUID } from 'node:crypto';

export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock tests move by hand. */
export class ManualClock implements Clock {
  constructor(private current: number = Date.UTC(2026, 0, 1)) {}
  now(): number {
    return this.current;
  }
  set(ms: number): void {
    this.current = ms;
  }
  advance(ms: number): void {
    this.current += ms;
  }
}

/** Produces opaque record ids (UUIDs: never all digits, see contract 2). */
export type IdGenerator = () => string;

export const randomIds: IdGenerator = () => randomUUID();

/** The two hex digits of every byte, as character codes. */
const HEX_DIGITS = Buffer.from(Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0')).join(''), 'latin1');
const POOL_SIZE = 8 * 512;
const TWO_TO_32 = 2 ** 32;

/** A UUIDv7 generator on `clock`; ids of one generator increase strictly, even within a millisecond. */
export function timeOrderedIds(clock: Clock): IdGenerator {
  const pool = Buffer.alloc(POOL_SIZE);
  let offset = POOL_SIZE;
  let lastMs = -1;
  let sequence = 0;
  // The id's text is written into one buffer and read out once: building it from a dozen small
  // strings cost most of a microsecond per payload.
  const text = Buffer.from('00000000-0000-7000-8000-000000000000', 'latin1');
  const hex = (at: number, byte: number) => {
    text[at] = HEX_DIGITS[byte * 2]!;
    text[at + 1] = HEX_DIGITS[byte * 2 + 1]!;
  };
  return () => {
    if (offset + 8 > POOL_SIZE) {
      randomFillSync(pool);
      offset = 0;
    }
    let ms = clock.now();
    // rand_a (12 bits) is a counter within one millisecond, so ids of one process stay in order;
    // a clock going backwards (or 4096 ids in one ms) borrows the next millisecond.
    if (ms > lastMs) {
      lastMs = ms;
      sequence = pool[offset]! & 0x3f;
    } else {
      ms = lastMs;
      sequence++;
      if (sequence > 0xfff) {
        lastMs = ++ms;
        sequence = 0;
      }
    }
    // unix_ts_ms, 48 bits: the high 16 above 2^32, then the low 32.
    const high = Math.floor(ms / TWO_TO_32);
    const low = ms % TWO_TO_32;
    hex(0, (high >>> 8) & 0xff);
    hex(2, high & 0xff);
    hex(4, low >>> 24);
    hex(6, (low >>> 16) & 0xff);
    hex(9, (low >>> 8) & 0xff);
    hex(11, low & 0xff);
    hex(14, 0x70 | (sequence >>> 8));
    hex(16, sequence & 0xff);
    hex(19, 0x80 | (pool[offset]! & 0x3f));
    hex(21, pool[offset + 1]!);
    for (let i = 2; i < 8; i++) hex(20 + 2 * i, pool[offset + i]!);
    offset += 8;
    return text.toString('latin1');
  };
}
