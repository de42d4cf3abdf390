/**
 * Dead letters from the command line (contract 4 and 9): `queue failed` lists payloads that failed
 * every retry, with the reason; `queue retry <id>` puts one back in the queue (a running server's
 * worker picks it up within its idle poll). Both work while `serve` runs on the same store.
 */
import type { Argv, CommandModule } from 'yargs';
import { TrailwireError } from '../../core/errors.ts';
import type { IntakeQueue } from '../../core/intake-queue.ts';
import { type StoreArguments, withQueue as withConfiguredQueue } from './open-core.ts';
import { auditOperatorCommand } from './audit.ts';
import { printFailure, printResult } from './output.ts';

type Common = StoreArguments & { json: boolean };

async function withQueue(args: Common, work: (queue: IntakeQueue) => Promise<void>): Promise<void> {
  try {
    await withConfiguredQueue(args, work);
  } catch (error) {
    printFailure(args, error);
  }
}

const failed: CommandModule<Common, Common & { limit: number }> = {
  command: 'failed',
  describe: 'List dead-lettered payloads (oldest first)',
  builder: (yargs: Argv<Common>) => yargs.option('limit', { type: 'number', default: 100, describe: 'At most this many' }),
  handler: (args) =>
    withQueue(args, async (queue) => {
      const records = await queue.listFailed(args.limit);
      const items = records.map((record) => ({
        id: record.id,
        vin: record.vin,
        product: record.product,
        partnerId: record.partnerId,
        attempts: record.attempts,
        error: record.error,
        receivedAt: new Date(record.receivedAt).toISOString(),
        failedAt: record.processedAt === null ? null : new Date(record.processedAt).toISOString(),
      }));
      const human = items.length === 0 ? 'no failed payloads' : items.map((i) => `${i.id}  ${i.vin}  ${i.product}  after ${i.attempts} attempts: ${i.error}`).join('\n');
      printResult(args, { failed: items }, human);
    }),
};

const retry: CommandModule<Common, Common & { id: string }> = {
  command: 'retry <id>',
  describe: 'Re-queue one failed payload',
  builder: (yargs: Argv<Common>) => yargs.positional('id', { type: 'string', demandOption: true, describe: 'Intake id' }),
  handler: (args) =>
    withQueue(args, async (queue) => {
      if (!(await queue.requeue(args.id, Date.now()))) throw new TrailwireError('not_found', `No failed payload ${args.id}.`);
      await auditOperatorCommand('queue retry', { intakeId: args.id });
      printResult(args, { id: args.id, status: 'queued' }, `payload ${args.id} re-queued`);
    }),
};

export const queueCommand: CommandModule<Common, Common> = {
  command: 'queue <action>',
  describe: 'Inspect and retry dead-lettered intake payloads',
  builder: (yargs) => yargs.command([failed, retry] as CommandModule<Common, any>[]).demandCommand(1, 'Choose an action: queue --help'),
  handler: () => {},
};
