/**
 * The conformance suite every `IntakeLog` passes (SQLite, PostgreSQL, NATS JetStream): appends answer
 * positions and read back with every field, in order; a VIN keeps one partition; reads start after a
 * position and stop at a limit; groups appended at once keep their order; a commit moves forward
 * only, and
 * what is pending follows the commits; and, for a log that processes share, a partition leased to one instance at a time and
 * taken over once its holder lets go or closes. A test file calls `runIntakeLogConformance(...)`
 * once per implementation, naming a reason for any skipped case.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isTrailwireError } from '../../core/errors.ts';
import type { IntakeLog, LogPosition } from '../../core/intake-log.ts';
import type { NewIntake } from '../../core/intake-queue.ts';

export type IntakeLogCase =
  | 'appends answer positions and read back'
  | 'a VIN keeps one partition'
  | 'reads from a position up to a limit'
  | 'groups appended at once keep their order'
  | 'commits move forward only'
  | 'instances share the log and lease partitions one at a time';

export interface IntakeLogConformanceOptions {
  /** Names the implementation in the test titles. */
  name: string;
  /** A fresh, empty log per case, and how to close it (and whatever it was opened on). */
  openLog(): Promise<{ log: IntakeLog; close(): Promise<void> }>;
  /** Two instances on one fresh, empty log, as two processes open it. Without it the sharing case is skipped, saying so. */
  openSharedLogs?(): Promise<{ logs: readonly [IntakeLog, IntakeLog]; close(): Promise<void> }>;
  /** Cases this implementation skips, each with the reason. */
  skip?: Partial<Record<IntakeLogCase, string>>;
}

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);
const VINS = ['1HGCM82633A004352', '1M8GDM9AXKP042788', '2T1BURHE0JC014709', '5YJSA1E26HF000337', 'WDBRF61J43F123456', '3VWFE21C04M000001'];

/** Registers the suite's cases with `node:test`. */
export function runIntakeLogConformance(options: IntakeLogConformanceOptions): void {
  let next = 0;
  const item = (overrides: Partial<NewIntake> = {}): NewIntake => ({
    id: `intake-${String(++next).padStart(6, '0')}`,
    partnerId: 'partner-1',
    product: 'gps-basic',
    vin: VINS[0]!,
    payload: JSON.stringify({ n: next }),
    receivedAt: T0 + next,
    idempotencyKey: null,
    ...overrides,
  });
  const positionsOf = async (log: IntakeLog, group: NewIntake[]): Promise<LogPosition[]> => {
    const answers = await log.append(group);
    assert.equal(answers.length, group.length, 'one answer per payload');
    return answers.map((answer) => {
      assert.ok(!isTrailwireError(answer), `appended, not refused: ${isTrailwireError(answer) ? answer.message : ''}`);
      return answer as LogPosition;
    });
  };
  const caseOf = (name: IntakeLogCase, body: (log: IntakeLog) => Promise<void>) => {
    it(name, { skip: options.skip?.[name] ?? false }, async () => {
      const { log, close } = await options.openLog();
      try {
        await body(log);
      } finally {
        await close();
      }
    });
  };

  describe(`IntakeLog conformance: ${options.name}`, () => {
    caseOf('appends answer positions and read back', async (log) => {
      const given = [item({ idempotencyKey: 'key-1', payload: '{"text":"é ✓ \\u0000"}' }), item(), item()];
      const positions = await positionsOf(log, given);
      const partition = log.partitionOf(VINS[0]!);
      assert.ok(positions.every((position) => position.partition === partition), "the VIN's partition");
      assert.ok(positions[0]!.seq < positions[1]!.seq && positions[1]!.seq < positions[2]!.seq, 'positions grow in append order');
      assert.equal(await log.committed(partition), 0, 'nothing committed yet');
      const read = await log.read(partition, 0, 10);
      assert.deepEqual(
        read,
        given.map((intake, i) => ({ ...intake, ...positions[i]! })),
        'every field, at its position, in order',
      );
      assert.deepEqual(await log.at(positions[1]!), read[1], 'read at its position');
      assert.equal(await log.at({ partition, seq: positions[2]!.seq + 1000 }), null, 'nothing where nothing was appended');
      assert.equal((await log.pending())[partition], 3, 'three pending in the partition');
    });

    caseOf('a VIN keeps one partition', async (log) => {
      assert.ok(Number.isSafeInteger(log.partitions) && log.partitions >= 1);
      const given = Array.from({ length: 36 }, (_, i) => item({ vin: VINS[i % VINS.length]! }));
      const positions = await positionsOf(log, given);
      for (const [i, intake] of given.entries()) {
        const partition = log.partitionOf(intake.vin);
        assert.ok(partition >= 0 && partition < log.partitions, 'a partition of the log');
        assert.equal(positions[i]!.partition, partition, `${intake.vin} in its partition`);
        assert.equal(log.partitionOf(intake.vin), partition, 'the same every time');
      }
      const byPartition = new Map<number, string[]>();
      for (const intake of given) byPartition.set(log.partitionOf(intake.vin), [...(byPartition.get(log.partitionOf(intake.vin)) ?? []), intake.id]);
      for (const [partition, ids] of byPartition) {
        assert.deepEqual((await log.read(partition, 0, 100)).map((logged) => logged.id), ids, `partition ${partition}: its payloads, in append order`);
      }
    });

    caseOf('reads from a position up to a limit', async (log) => {
      const given = [item(), item(), item(), item()];
      const positions = await positionsOf(log, given);
      const partition = positions[0]!.partition;
      assert.deepEqual((await log.read(partition, positions[0]!.seq, 2)).map((logged) => logged.id), [given[1]!.id, given[2]!.id]);
      assert.deepEqual((await log.read(partition, positions[2]!.seq, 10)).map((logged) => logged.id), [given[3]!.id]);
      assert.deepEqual(await log.read(partition, positions[3]!.seq, 10), [], 'nothing after the last');
      const later = item();
      const [position] = await positionsOf(log, [later]);
      assert.deepEqual((await log.read(partition, positions[3]!.seq, 10)).map((logged) => logged.id), [later.id], 'a later append follows');
      assert.ok(position!.seq > positions[3]!.seq);
    });

    caseOf('groups appended at once keep their order', async (log) => {
      // Groups started in one turn, as concurrent requests start them: each keeps its own order
      // (groups in flight together have none between them), and a group appended once another was
      // answered follows it.
      const groups = Array.from({ length: 8 }, (_, g) => Array.from({ length: 25 }, (_, i) => item({ vin: VINS[(g + i) % 3]! })));
      await Promise.all(groups.map((group) => positionsOf(log, group)));
      const after = Array.from({ length: 10 }, (_, i) => item({ vin: VINS[i % 3]! }));
      await positionsOf(log, after);
      for (const vin of VINS.slice(0, 3)) {
        const read = (await log.read(log.partitionOf(vin), 0, 1000)).filter((logged) => logged.vin === vin).map((logged) => logged.id);
        for (const [g, group] of [...groups, after].entries()) {
          const ids = group.filter((intake) => intake.vin === vin).map((intake) => intake.id);
          assert.deepEqual(read.filter((id) => ids.includes(id)), ids, `${vin}: group ${g} in its order`);
        }
        const later = after.filter((intake) => intake.vin === vin).map((intake) => intake.id);
        assert.deepEqual(read.slice(-later.length), later, `${vin}: the group appended after the others' answers comes last`);
      }
    });

    caseOf('commits move forward only', async (log) => {
      const given = [item(), item(), item()];
      const positions = await positionsOf(log, given);
      const partition = positions[0]!.partition;
      await log.commit(partition, positions[1]!.seq, T0);
      assert.equal(await log.committed(partition), positions[1]!.seq);
      await log.commit(partition, positions[0]!.seq, T0);
      assert.equal(await log.committed(partition), positions[1]!.seq, 'an older commit does not move it back');
      assert.deepEqual((await log.read(partition, positions[1]!.seq, 10)).map((logged) => logged.id), [given[2]!.id], 'what follows the commit is still there');
      const other = Array.from({ length: log.partitions }, (_, p) => p).find((p) => p !== partition);
      if (other !== undefined) assert.equal(await log.committed(other), 0, 'other partitions keep theirs');
      assert.equal((await log.pending())[partition], 1, 'one pending after the commit');
      await log.commit(partition, positions[2]!.seq, T0);
      assert.deepEqual(await log.pending(), new Array(log.partitions).fill(0), 'none once all is committed');
    });

    const sharing: IntakeLogCase = 'instances share the log and lease partitions one at a time';
    const sharingSkip = options.skip?.[sharing] ?? (options.openSharedLogs ? false : 'this runner gives no openSharedLogs (a second instance on the same log)');
    it(sharing, { skip: sharingSkip }, async () => {
      const { logs, close } = await options.openSharedLogs!();
      const [a, b] = logs;
      try {
        const given = [item(), item({ vin: VINS[1]! })];
        await positionsOf(a, [given[0]!]);
        await positionsOf(b, [given[1]!]);
        const partition = a.partitionOf(VINS[0]!);
        assert.deepEqual((await b.read(partition, 0, 10)).map((logged) => logged.id).filter((id) => id === given[0]!.id), [given[0]!.id], 'one reads what the other appended');
        const first = await a.lease(partition);
        assert.ok(first?.held, 'the first instance takes the partition');
        assert.equal(await b.lease(partition), null, 'the other cannot while it is held');
        assert.equal(await a.lease(partition), null, 'nor can the holder take it twice');
        const other = Array.from({ length: a.partitions }, (_, p) => p).find((p) => p !== partition);
        if (other !== undefined) {
          const beside = await b.lease(other);
          assert.ok(beside?.held, 'another partition is free meanwhile');
          await beside!.release();
        }
        await first!.release();
        assert.equal(first!.held, false, 'released');
        const second = await b.lease(partition);
        assert.ok(second?.held, 'a released partition is taken by the other');
        await a.commit(partition, 1, T0);
        assert.ok((await b.committed(partition)) >= 1, "a commit is seen by every instance");
        // A holder that closes (a process that ends) lets its partitions go.
        await b.close();
        const third = await a.lease(partition);
        assert.ok(third?.held, 'taken over once its holder closed');
        await third!.release();
      } finally {
        await close();
      }
    });
  });
}
