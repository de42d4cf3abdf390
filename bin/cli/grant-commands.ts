/**
 * What partners may send (contract 4 and 9, issue 29): `grants add|remove|list --customer C
 * --partner P` — a customer that has granted any partner takes intake for its registered trailers
 * only from its granted partners — and `partners set-limit --partner P [--intake-limit N/S]
 * [--new-vins-per-day N]`, a partner's own intake budget and new-VIN cap (`--default` to go back to
 * the server's). Both are kept in the store: a running `serve` applies a change within seconds.
 */
import type { Argv, CommandModule } from 'yargs';
import { TrailwireError } from '../../core/errors.ts';
import type { PartnerGrant, PartnerIntakeLimits } from '../../core/store.ts';
import { auditOperatorCommand } from './audit.ts';
import { runWithCore, type StoreArguments } from './open-core.ts';
import { printResult } from './output.ts';
import { limitOf } from './serve-settings.ts';
import { formatTable, isoTime, shortTime } from './table.ts';

type Common = StoreArguments & { json: boolean };
type GrantArguments = Common & { customer: string; partner: string };

const grantOptions = (yargs: Argv<Common>) =>
  yargs
    .option('customer', { type: 'string', demandOption: true, describe: 'Customer id' })
    .option('partner', { type: 'string', demandOption: true, describe: 'Partner id' });

const grantsAdd: CommandModule<Common, GrantArguments> = {
  command: 'add',
  describe: "Grant a partner intake for the customer's trailers; from the first grant on, only granted partners may send to them",
  builder: grantOptions,
  handler: (args) =>
    runWithCore(args, async (trailwire) => {
      const { grant, added } = await trailwire.admin.addGrant({ customerId: args.customer, partnerId: args.partner });
      if (added) await auditOperatorCommand('grants add', { customerId: grant.customerId, partnerId: grant.partnerId });
      printResult(args, grantItem(grant), `customer ${grant.customerId} grants partner ${grant.partnerId}${added ? '' : ' (already)'}`);
    }),
};

const grantsRemove: CommandModule<Common, GrantArguments> = {
  command: 'remove',
  describe: 'Withdraw a grant; a customer left with none takes intake from any partner again (unless serve --require-grants)',
  builder: grantOptions,
  handler: (args) =>
    runWithCore(args, async (trailwire) => {
      await trailwire.admin.removeGrant({ customerId: args.customer, partnerId: args.partner });
      await auditOperatorCommand('grants remove', { customerId: args.customer, partnerId: args.partner });
      printResult(args, { customerId: args.customer, partnerId: args.partner, removed: true }, `customer ${args.customer} no longer grants partner ${args.partner}`);
    }),
};

const grantsList: CommandModule<Common, Common & { customer?: string; partner?: string }> = {
  command: 'list',
  describe: "List the grants, every one or a customer's or a partner's",
  builder: (yargs: Argv<Common>) =>
    yargs
      .option('customer', { type: 'string', describe: 'Only this customer' })
      .option('partner', { type: 'string', describe: 'Only this partner' }),
  handler: (args) =>
    runWithCore(args, async (trailwire) => {
      const grants = (await trailwire.admin.listGrants({ customerId: args.customer, partnerId: args.partner })).map(grantItem);
      printResult(
        args,
        { data: grants },
        formatTable(
          grants,
          [
            { header: 'CUSTOMER', cell: (g) => g.customerId },
            { header: 'PARTNER', cell: (g) => g.partnerId },
            { header: 'GRANTED', cell: (g) => shortTime(g.createdAt) },
          ],
          'no grants: every customer takes intake from any partner of the product (unless serve --require-grants)',
        ),
      );
    }),
};

export const grantsCommand: CommandModule<Common, Common> = {
  command: 'grants <action>',
  describe: 'Manage which partners may send intake for a customer\'s trailers',
  builder: (yargs) => yargs.command([grantsAdd, grantsRemove, grantsList] as CommandModule<Common, any>[]).demandCommand(1, 'Choose an action: grants --help'),
  handler: () => {},
};

export const partnersSetLimit: CommandModule<Common, Common & { partner: string; intakeLimit?: string; newVinsPerDay?: number; default: boolean }> = {
  command: 'set-limit',
  describe: "Set a partner's own intake budget and new-VIN cap (running servers apply it within seconds)",
  builder: (yargs: Argv<Common>) =>
    yargs
      .option('partner', { type: 'string', demandOption: true, describe: 'Partner id' })
      .option('intake-limit', { type: 'string', describe: 'Intake requests per window, refusals included, as REQUESTS/WINDOW_SECONDS (e.g. 120000/60)' })
      .option('new-vins-per-day', { type: 'number', describe: 'New VINs (unknown to the store) per UTC day; 0 for none' })
      .option('default', { type: 'boolean', default: false, describe: "Go back to the server's defaults for both" })
      .check((args) => {
        if (args.default && (args['intake-limit'] !== undefined || args['new-vins-per-day'] !== undefined))
          throw new TrailwireError('validation_failed', '--default takes neither --intake-limit nor --new-vins-per-day');
        if (!args.default && args['intake-limit'] === undefined && args['new-vins-per-day'] === undefined)
          throw new TrailwireError('validation_failed', 'Give --intake-limit, --new-vins-per-day or --default');
        return true;
      }),
  handler: (args) =>
    runWithCore(args, async (trailwire) => {
      // A setting not given keeps the partner's current one.
      const current = args.default ? null : await trailwire.admin.partnerLimits(args.partner);
      const newVinsPerDay = args.newVinsPerDay;
      if (newVinsPerDay !== undefined && !Number.isSafeInteger(newVinsPerDay))
        throw new TrailwireError('validation_failed', `--new-vins-per-day must be a whole number ≥ 0, got ${String(newVinsPerDay)}`);
      const limits = await trailwire.admin.setPartnerLimits({
        partnerId: args.partner,
        intake: args.intakeLimit !== undefined ? limitOf('--intake-limit', args.intakeLimit) : (current?.intake ?? null),
        newVinsPerDay: newVinsPerDay ?? current?.newVinsPerDay ?? null,
      });
      await auditOperatorCommand('partners set-limit', { partnerId: args.partner, intake: limits.intake, newVinsPerDay: limits.newVinsPerDay });
      printResult(args, limitsItem(limits), describeLimits(limits));
    }),
};

function grantItem(grant: PartnerGrant) {
  return { customerId: grant.customerId, partnerId: grant.partnerId, createdAt: isoTime(grant.createdAt) };
}

function limitsItem(limits: PartnerIntakeLimits) {
  return {
    partnerId: limits.partnerId,
    intakeLimit: limits.intake === null ? null : `${limits.intake.requests}/${limits.intake.windowSeconds}`,
    newVinsPerDay: limits.newVinsPerDay,
  };
}

function describeLimits(limits: PartnerIntakeLimits): string {
  const intake = limits.intake === null ? "the server's intake limit" : `${limits.intake.requests} intake requests per ${limits.intake.windowSeconds} s`;
  const newVins = limits.newVinsPerDay === null ? "the server's new-VIN cap" : `${limits.newVinsPerDay} new VINs per day`;
  return `partner ${limits.partnerId}: ${intake}, ${newVins}`;
}
