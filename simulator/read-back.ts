/**
 * The simulator's read-back: after the traffic, the status of every accepted payload, polled until
 * each is processed or failed, or the wait is over. It asks the server's bulk status read, up to
 * `MAX_INTAKE_STATUS_IDS` ids of one partner a request, each counted as one read against that
 * partner's read limit (600 a minute by default): 10,000 payloads are 100 reads a pass, where one
 * read a payload waited minutes on the limit (issue 39: 20 s of traffic at 200/s took 186 s).
 */
import PQueue from 'p-queue';
import { type IntakeStatus, MAX_INTAKE_STATUS_IDS, type TrailwireClient } from './client/http-client.ts';
import type { IntakeOutcome, SendRecord } from './run-record.ts';

/** How long a pass waits before reading the payloads still pending again. */
const POLL_INTERVAL_MS = 250;

/** Status reads in flight at once, across the partners. */
const READS_IN_FLIGHT = 16;

/**
 * Polls the status of every accepted payload (a 202 with an id) through the partner client of its
 * product until each is processed or failed, or `waitMs` passes; counts them, and the settled ones,
 * in `progress`. A payload the server does not know (or not for its partner) is `unknown`, and read
 * again at the next pass, as one whose read failed.
 */
export async function readBackOutcomes(
  sends: readonly SendRecord[],
  partners: ReadonlyMap<string, Pick<TrailwireClient, 'intakeStatuses'>>,
  waitMs: number,
  progress: { settled: number; accepted: number },
): Promise<Record<string, IntakeOutcome>> {
  const outcomes: Record<string, IntakeOutcome> = {};
  let pending = [...new Map(sends.filter((send) => send.status === 202 && send.id).map((send) => [send.id!, send])).values()];
  progress.accepted = pending.length;
  const deadline = Date.now() + waitMs;
  while (pending.length > 0) {
    const stillPending: SendRecord[] = [];
    await new PQueue({ concurrency: READS_IN_FLIGHT }).addAll(
      statusReads(pending).map(({ product, sends: group }) => async () => {
        try {
          const { body } = await partners.get(product)!.intakeStatuses(group.map((send) => send.id!));
          for (const status of body.data) outcomes[status.id] = outcomeOf(status);
          for (const id of body.notFound) outcomes[id] ??= { status: 'unknown', error: 'the status read does not know this intake id' };
        } catch (error) {
          for (const send of group) outcomes[send.id!] ??= { status: 'unknown', error: (error as Error).message };
        }
        for (const send of group) {
          const state = outcomes[send.id!]!.status;
          if (state !== 'processed' && state !== 'failed') stillPending.push(send);
          else progress.settled++;
        }
      }),
    );
    pending = stillPending;
    if (pending.length === 0 || Date.now() >= deadline) break;
    await new Promise((resolve) => setTimeout(resolve, Math.min(POLL_INTERVAL_MS, deadline - Date.now())));
  }
  return outcomes;
}

/** The sends grouped by product (each product has its own partner), up to `MAX_INTAKE_STATUS_IDS` a group. */
function statusReads(sends: readonly SendRecord[]): Array<{ product: string; sends: SendRecord[] }> {
  const byProduct = new Map<string, SendRecord[]>();
  for (const send of sends) {
    const ofProduct = byProduct.get(send.product);
    if (ofProduct) ofProduct.push(send);
    else byProduct.set(send.product, [send]);
  }
  return [...byProduct].flatMap(([product, ofProduct]) =>
    Array.from({ length: Math.ceil(ofProduct.length / MAX_INTAKE_STATUS_IDS) }, (_, i) => ({
      product,
      sends: ofProduct.slice(i * MAX_INTAKE_STATUS_IDS, (i + 1) * MAX_INTAKE_STATUS_IDS),
    })),
  );
}

function outcomeOf(status: IntakeStatus): IntakeOutcome {
  return {
    status: status.status,
    receivedAt: Date.parse(status.receivedAt),
    processedAt: status.processedAt === null ? undefined : Date.parse(status.processedAt),
    error: status.error,
  };
}
