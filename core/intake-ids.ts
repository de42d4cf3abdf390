/**
 * Intake ids: UUIDv7 (RFC 9562), time-ordered. An intake id is the key the status endpoint looks
 * up, so the queue indexes it; ids that grow with time are appended to the end of that index
 * instead of landing on a random page of it, which halves the cost of an enqueue at a deep queue.
 * They are still opaque to partners, unguessable (62 random bits) and never all digits (contract 2).
 */
import { randomFillSync } from 'node:crypto';
import type { Clock, IdGenerator } from './clock.ts';

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
const POOL_SIZE = 8 * 512;

/** A UUIDv7 generator on `clock`; ids of one generator increase strictly, even within a millisecond. */
export function timeOrderedIds(clock: Clock): IdGenerator {
  const pool = Buffer.alloc(POOL_SIZE);
  let offset = POOL_SIZE;
  let lastMs = -1;
  let sequence = 0;
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
    const r = pool.subarray(offset, offset + 8);
    offset += 8;
    const time = ms.toString(16).padStart(12, '0');
    return (
      `${time.slice(0, 8)}-${time.slice(8, 12)}-` +
      `${(0x7000 | sequence).toString(16)}-` +
      `${HEX[0x80 | (r[0]! & 0x3f)]}${HEX[r[1]!]}-` +
      `${HEX[r[2]!]}${HEX[r[3]!]}${HEX[r[4]!]}${HEX[r[5]!]}${HEX[r[6]!]}${HEX[r[7]!]}`
    );
  };
}
