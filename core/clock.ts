/**
 * Time and identity sources, injected wherever time or chance matters so that window maths, expiry
 * and ids are tested without sleeping.
 */
import { randomUUID } from 'node:crypto';

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
