/**
 * Operator provisioning commands (contract 9): `partners create`, `customers create`,
 * `fleets create`, `trailers create` (and `trailers import`, `import-command.ts`), and switching trailers and devices on and off, grouped with the
 * list commands of `list-commands.ts`. API keys are printed once here and stored only as hashes.
 */
import type { Argv, CommandModule } from 'yargs';
import { describeAdopted } from '../../core/admin-service.ts';
import { invalidField, TrailwireError } from '../../core/errors.ts';
import { BUILT_IN_PRODUCT_NAMES } from '../../products/built-in-names.ts';
import { auditOperatorCommand } from './audit.ts';
import { partnersSetLimit } from './grant-commands.ts';
import { trailersImport } from './import-command.ts';
import { customersList, devicesList, fleetsList, partnersList, trailersHistory, trailersList } from './list-commands.ts';
import { runWithCore, type StoreArguments } from './open-core.ts';
import { printResult } from './output.ts';
import { withRegistrationOptions } from './registration-options.ts';
import { isoTime } from './table.ts';

type Common = StoreArguments & { json: boolean };

function group(name: string, describe: string, actions: CommandModule<Common, any>[]): CommandModule<Common, Common> {
  return {
    command: `${name} <action>`,
    describe,
    builder: (yargs) => yargs.command(actions).demandCommand(1, `Choose an action: ${name} --help`),
    handler: () => {},
  };
}

/** `trailers|devices activate|deactivate <id>`: the operator's switch; inactive records leave `activeOnly` lists. */
function switchCommand(kind: 'trailer' | 'device', active: boolean): CommandModule<Common, Common & { id: string }> {
  return {
    command: `${active ? 'activate' : 'deactivate'} <id>`,
    describe: `${active ? 'Activate' : 'Deactivate'} a ${kind}`,
    builder: (yargs: Argv<Common>) => yargs.positional('id', { type: 'string', demandOption: true, describe: `${kind} id` }),
    handler: (args) =>
      runWithCore(args, async (trailwire) => {
        if (kind === 'trailer') await trailwire.admin.setTrailerActive(args.id, active);
        else await trailwire.admin.setDeviceActive(args.id, active);
        await auditOperatorCommand(`${kind}s ${active ? 'activate' : 'deactivate'}`, { [`${kind}Id`]: args.id });
        printResult(args, { id: args.id, active }, `${kind} ${args.id} ${active ? 'activated' : 'deactivated'}`);
      }),
  };
}

const partnersCreate: CommandModule<Common, Common & { name: string; product: string }> = {
  command: 'create',
  describe: 'Issue a partner API key for one product integration',
  builder: (yargs: Argv<Common>) =>
    yargs
      .option('name', { type: 'string', demandOption: true, describe: 'Partner name' })
      .option('product', {
        type: 'string',
        demandOption: true,
        describe: `The product the key is scoped to: ${BUILT_IN_PRODUCT_NAMES.join(', ')}, or one of --product-module`,
      }),
  handler: (args) =>
    runWithCore(args, async (trailwire) => {
      const installed = trailwire.products.list().map((product) => product.name).sort();
      if (!installed.includes(args.product))
        throw new TrailwireError('validation_failed', `No product "${args.product}" is installed; choose one of ${installed.join(', ')} (or add its module with --product-module).`, {
          errors: [{ path: '/product', message: `must be one of ${installed.join(', ')}` }],
        });
      const { principal, apiKey } = await trailwire.auth.createPartner({ name: nonEmpty(args.name, '/name'), product: args.product });
      await auditOperatorCommand('partners create', { partnerId: principal.id, product: args.product });
      printResult(args, { id: principal.id, apiKey }, `partner ${principal.id} (${args.product})\napi key (shown once): ${apiKey}`);
    }),
};

const customersCreate: CommandModule<Common, Common & { name: string }> = {
  command: 'create',
  describe: 'Issue a customer API key',
  builder: (yargs: Argv<Common>) => yargs.option('name', { type: 'string', demandOption: true, describe: 'Customer name' }),
  handler: (args) =>
    runWithCore(args, async (trailwire) => {
      const { principal, apiKey } = await trailwire.auth.createCustomer({ name: nonEmpty(args.name, '/name') });
      await auditOperatorCommand('customers create', { customerId: principal.id });
      printResult(args, { id: principal.id, apiKey }, `customer ${principal.id}\napi key (shown once): ${apiKey}`);
    }),
};

const fleetsCreate: CommandModule<Common, Common & { customer: string; name: string }> = {
  command: 'create',
  describe: 'Create a fleet for a customer',
  builder: (yargs: Argv<Common>) =>
    yargs
      .option('customer', { type: 'string', demandOption: true, describe: 'Customer id' })
      .option('name', { type: 'string', demandOption: true, describe: 'Fleet name' }),
  handler: (args) =>
    runWithCore(args, async (trailwire) => {
      const fleet = await trailwire.admin.createFleet({ customerId: args.customer, name: args.name });
      await auditOperatorCommand('fleets create', { fleetId: fleet.id, customerId: args.customer });
      printResult(args, { id: fleet.id }, `fleet ${fleet.id} (${fleet.name})`);
    }),
};

const trailersCreate: CommandModule<
  Common,
  Common & { fleet: number; vin: string; unitId?: string; 'adopt-unassigned-data': boolean; 'require-grants': boolean }
> = {
  command: 'create',
  describe: 'Register a trailer (VIN) in a fleet; a VIN intake already knows is assigned to the fleet, with what intake stored for it',
  builder: (yargs: Argv<Common>) =>
    withRegistrationOptions(
      yargs
        .option('fleet', { type: 'number', demandOption: true, describe: 'Fleet id' })
        .option('vin', { type: 'string', demandOption: true, describe: 'VIN (17 characters, check digit verified)' })
        .option('unit-id', { type: 'string', describe: 'Unit or asset tag' }),
    ),
  handler: (args) =>
    runWithCore(
      args,
      async (trailwire) => {
        if (!Number.isInteger(args.fleet) || args.fleet < 1) throw invalidField('/fleet', 'must be a positive integer');
        const trailer = await trailwire.admin.registerTrailer({
          fleetId: args.fleet,
          vin: args.vin,
          unitId: args.unitId ?? null,
          adoptUnassignedData: args['adopt-unassigned-data'],
        });
        const { adopted } = trailer;
        // "create" also assigns a VIN intake already met (contract 9): the audit line says which trailer, and what it adopted.
        await auditOperatorCommand('trailers create', { trailerId: trailer.id, fleetId: trailer.fleetId, adopted });
        const adoption =
          adopted.lastSeenAt === null
            ? 'adopted nothing: intake stored no data for it'
            : `adopted what intake stored before registration: ${describeAdopted(adopted)} (from partners the store does not record)`;
        printResult(
          args,
          { id: trailer.id, adopted: { gpsFixes: adopted.gpsFixes, devices: adopted.devices, lastSeenAt: isoTime(adopted.lastSeenAt) } },
          `trailer ${trailer.id} (${trailer.vin}) in fleet ${trailer.fleetId}; ${adoption}`,
        );
      },
      { partnerIntake: { requireGrants: args['require-grants'] } },
    ),
};

export const provisionCommands = [
  group('partners', 'Manage partners (telemetry senders)', [partnersCreate, partnersList, partnersSetLimit]),
  group('customers', 'Manage customers (data readers)', [customersCreate, customersList]),
  group('fleets', 'Manage fleets', [fleetsCreate, fleetsList]),
  group('trailers', 'Manage trailers', [trailersCreate, trailersImport, trailersList, trailersHistory, switchCommand('trailer', true), switchCommand('trailer', false)]),
  group('devices', 'Manage devices', [devicesList, switchCommand('device', true), switchCommand('device', false)]),
];

function nonEmpty(value: string, path: string): string {
  const trimmed = value.trim();
  if (!trimmed) throw invalidField(path, 'must not be empty');
  if (trimmed.length > 200) throw new TrailwireError('validation_failed', `${path.slice(1)} is longer than 200 characters`);
  return trimmed;
}
