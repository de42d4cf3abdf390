/**
 * Says a fault once, then once per interval with how often it recurred, instead of once per request
 * or per retry: a full disk under load is thousands of failures a second, and a log that grows with
 * them buries the one line an operator needs (and, on a full disk, has nowhere to go). When the fault
 * ends, one line says so, with the count of the failures since the last line.
 */
import { type Clock, systemClock } from './clock.ts';

export interface FaultLogEntry {
  level: 'warn' | 'error';
  message: string;
  [field: string]: unknown;
}

export interface RepeatingFaultLogOptions {
  /** Where lines go. */
  write: (entry: FaultLogEntry) => void;
  /** Default: the system clock. */
  clock?: Clock;
  /** At most one line per fault per this interval while it lasts. Default 10,000 ms. */
  intervalMs?: number;
}

interface FaultState {
  lastLineAt: number;
  /** Failures since the last line. */
  unsaid: number;
  /** Failures since the fault began. */
  total: number;
  /** The latest failure's entry: what `failure` answers. */
  latest: FaultLogEntry;
}

export class RepeatingFaultLog {
  private readonly faults = new Map<string, FaultState>();
  private readonly intervalMs: number;
  private readonly clock: Clock;

  constructor(private readonly options: RepeatingFaultLogOptions) {
    this.intervalMs = options.intervalMs ?? 10_000;
    this.clock = options.clock ?? systemClock;
  }

  /** One more failure of the fault `key`: logged when it is the first, or the interval has passed. */
  failed(key: string, entry: FaultLogEntry): void {
    const now = this.clock.now();
    const state = this.faults.get(key);
    if (!state) {
      this.faults.set(key, { lastLineAt: now, unsaid: 0, total: 1, latest: entry });
      this.options.write(entry);
      return;
    }
    state.total++;
    state.unsaid++;
    state.latest = entry;
    if (now - state.lastLineAt < this.intervalMs) return;
    this.options.write({ ...entry, message: `${entry.message} (${state.unsaid} more times in ${Math.round((now - state.lastLineAt) / 1000)} s)`, repeated: state.unsaid });
    state.lastLineAt = now;
    state.unsaid = 0;
  }

  /** The fault `key` is over: one line, if it had been said. */
  recovered(key: string, message: string): void {
    const state = this.faults.get(key);
    if (!state) return;
    this.faults.delete(key);
    this.options.write({ level: 'warn', message: `${message} (after ${state.total} failures)`, failures: state.total });
  }

  /** The latest failure of the fault `key` while it goes on (what a readiness check says), else undefined. */
  failure(key: string): FaultLogEntry | undefined {
    return this.faults.get(key)?.latest;
  }
}
