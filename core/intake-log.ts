/**
 * The intake log: what a log engine does for intake, and nothing an index does (issue 30). The
 * intake queue of `intake-queue.ts` is two parts: this log — append a group durably, read a
 * partition in order from a position, commit a position, lease a partition to one process — and an
 * index (idempotency keys, retries and dead letters, status lookups). SQLite and PostgreSQL keep
 * both parts in one database, and their queues commit a batch's outcomes with the log's position in
 * one transaction; a log engine (NATS JetStream, `adapters/nats`) provides the log alone, for a
 * deployment that outgrows one database's log table.
 *
 * Words. A *partition* is a slice of the log that keeps its order: a VIN's payloads all go to the
 * partition `partitionOf(vin)`, so reading a partition in order keeps every VIN's order. A
 * *position* (`seq`) grows strictly within a partition (it may skip numbers); the *committed*
 * position of a partition says that every payload at or below it has been processed, and what is
 * at or below it is the log's to let go (its retention). A *lease* gives one process a partition
 * to process; a process that dies loses its leases, never payloads: what it had not committed is
 * read again by the next holder.
 *
 * Every implementation passes the conformance suite `test/conformance/intake-log.ts`.
 */
import type { TrailwireError } from './errors.ts';
import type { NewIntake } from './intake-queue.ts';

/** Where a payload sits in the log. */
export interface LogPosition {
  readonly partition: number;
  /** Grows strictly within the partition, in append order; no two payloads of the log share one. */
  readonly seq: number;
}

/** A payload as the log hands it back: what was appended, and where. */
export interface LoggedIntake extends NewIntake, LogPosition {}

/** One process's hold on a partition, until it is released or lost. */
export interface PartitionLease {
  readonly partition: number;
  /** False once the lease is gone (released, or lost: the holder stalled past its time, or its connection ended). */
  readonly held: boolean;
  /** Lets the partition go, for another process to take. */
  release(): Promise<void>;
}

export interface IntakeLog {
  /** How many partitions the log has; a VIN's is `partitionOf(vin)`, in `0 .. partitions - 1`. */
  readonly partitions: number;
  partitionOf(vin: string): number;
  /**
   * Appends a group durably, in the group's order, and answers each payload's position once it
   * survives a crash of this process (a 202 may follow), or the error its client gets (a
   * `store_unavailable` with Retry-After when the log is full or cannot be reached: nothing of that
   * payload is stored). Rejects only for a bug.
   */
  append(group: readonly NewIntake[]): Promise<Array<LogPosition | TrailwireError>>;
  /**
   * Up to `limit` payloads of `partition` after position `after`, in append order. Never skips:
   * once a payload is handed out, no payload of the partition appended before it appears later.
   */
  read(partition: number, after: number, limit: number): Promise<LoggedIntake[]>;
  /** The payload at a position, or null (never appended there, or let go after a commit). */
  at(position: LogPosition): Promise<LoggedIntake | null>;
  /** Payloads after each partition's committed position, by partition (more while a commit's release is under way). */
  pending(): Promise<number[]>;
  /**
   * Moves the partition's committed position to `seq` (never back); the log may let go of what is at
   * or below it. `at` is the committing batch's time (the worker's clock), for a log that records when
   * what it let go was processed.
   */
  commit(partition: number, seq: number, at: number): Promise<void>;
  /** The partition's committed position (0 before any commit). */
  committed(partition: number): Promise<number>;
  /** Takes the partition for this process, or null while another holder has it. */
  lease(partition: number): Promise<PartitionLease | null>;
  /** Releases this instance's leases and connections (not the store it may share). */
  close(): Promise<void>;
}
