/**
 * Beyond one machine: `trailwire simulate --shard i/n --record FILE` runs one of n simulator
 * processes against one deployment (each its own VINs, at its share of the rate, with its own
 * subscribers) and writes its raw record; `trailwire simulate merge FILE…` joins the records and
 * judges the invariants and thresholds over the whole run — so a subscriber of one shard is held to
 * the updates of every shard's trailers of its customer, and the rate to the whole schedule.
 */
import { ArrivalSchedule, type Stage } from './arrival-schedule.ts';
import type { RunRecord } from './run-record.ts';

/** What `--record` writes: the raw record and what the report of a merge needs besides. */
export interface RecordFile {
  kind: 'trailwire-simulation-record';
  version: 1;
  record: RunRecord;
  /** The whole run's schedule (a shard ran its share of it). */
  stages: Stage[];
  thresholds: string[];
  shard: { index: number; count: number } | null;
}

export function recordFileOf(record: RunRecord, arrivals: ArrivalSchedule, thresholds: readonly string[], shard: RecordFile['shard']): RecordFile {
  return { kind: 'trailwire-simulation-record', version: 1, record, stages: arrivals.toStages(), thresholds: [...thresholds], shard };
}

/**
 * Joins the records of the shards of one run; throws a `TypeError` naming the file when they are
 * not the shards of one run (another kind of file, scenarios or schedules that differ, a shard
 * missing or twice).
 */
export function mergeRecords(files: Array<{ name: string; content: unknown }>): { record: RunRecord; arrivals: ArrivalSchedule; thresholds: string[] } {
  if (files.length === 0) throw new TypeError('simulate merge: give the record files of the shards');
  const records = files.map(({ name, content }) => {
    const file = content as Partial<RecordFile>;
    if (file?.kind !== 'trailwire-simulation-record' || file.version !== 1) throw new TypeError(`simulate merge: ${name} is not a record written by --record`);
    return { name, file: file as RecordFile };
  });
  const [first] = records;
  const count = first!.file.shard?.count ?? 1;
  const seen = new Set<number>();
  for (const { name, file } of records) {
    if ((file.shard?.count ?? 1) !== count) throw new TypeError(`simulate merge: ${name} is a shard of ${file.shard?.count ?? 1}, ${first!.name} of ${count}`);
    if (file.record.scenario !== first!.file.record.scenario || file.record.seed !== first!.file.record.seed) throw new TypeError(`simulate merge: ${name} ran another scenario or seed than ${first!.name}`);
    if (JSON.stringify(file.stages) !== JSON.stringify(first!.file.stages)) throw new TypeError(`simulate merge: ${name} ran another schedule than ${first!.name}`);
    const index = file.shard?.index ?? 1;
    if (seen.has(index)) throw new TypeError(`simulate merge: shard ${index}/${count} is given twice (${name})`);
    seen.add(index);
  }
  if (seen.size !== count) throw new TypeError(`simulate merge: ${count - seen.size} of the ${count} shards are missing`);

  const base = first!.file.record;
  const merged: RunRecord = { ...base, limits: {}, groups: [], sends: [], outcomes: {}, ownership: {}, subscribers: [], rotations: [], webhooks: undefined };
  for (const { file } of records) {
    const { record } = file;
    const offset = merged.groups.length;
    merged.groups.push(...record.groups);
    merged.sends.push(...record.sends.map((send) => ({ ...send, group: send.group === null ? null : send.group + offset })));
    Object.assign(merged.limits, record.limits);
    Object.assign(merged.outcomes, record.outcomes);
    Object.assign(merged.ownership, record.ownership);
    merged.subscribers.push(...record.subscribers.map((subscriber) => ({ ...subscriber, index: merged.subscribers.length + subscriber.index })));
    merged.rotations.push(...record.rotations);
    // Each shard's endpoints are held, like its subscribers, to the updates of every shard's trailers of their customer.
    if (record.webhooks) {
      const webhooks = (merged.webhooks ??= { endpoints: [], stray: 0 });
      webhooks.endpoints.push(...record.webhooks.endpoints.map((endpoint) => ({ ...endpoint, index: webhooks.endpoints.length + endpoint.index })));
      webhooks.stray += record.webhooks.stray;
    }
    merged.processingWaitMs = Math.max(merged.processingWaitMs, record.processingWaitMs);
    // The shards start within a moment of each other; the whole run is timed from the last one's
    // start, so that its rate is not diluted by how far apart they were started.
    merged.startedAt = Math.max(merged.startedAt, record.startedAt);
    merged.trafficEndedAt = Math.max(merged.trafficEndedAt, record.trafficEndedAt);
    merged.endedAt = Math.max(merged.endedAt, record.endedAt);
    merged.aborted ??= record.aborted;
  }
  merged.sends.sort((a, b) => a.plannedAt - b.plannedAt);
  return { record: merged, arrivals: ArrivalSchedule.ramp(first!.file.stages), thresholds: first!.file.thresholds };
}
