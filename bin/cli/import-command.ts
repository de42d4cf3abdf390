/**
 * `trailwire trailers import --fleet F --file FILE|-` (contract 9, issue 40): registers a fleet's
 * trailers from a CSV (`vin,unitId[,active]`) or NDJSON file, or stdin, in one transaction —
 * all or nothing unless `--skip-invalid`, every bad line named by its number, and a second run of the
 * same file changes nothing and says so. The file is read here; the checks and the plan are the
 * core's (`AdminService.importTrailers`, `readTrailerImportFile`), the same as `trailers create`'s.
 */
import { readFile } from 'node:fs/promises';
import type { Argv, CommandModule } from 'yargs';
import type { TrailerImportReport } from '../../core/admin-service.ts';
import { invalidField } from '../../core/errors.ts';
import { readTrailerImportFile } from '../../core/trailer-import-file.ts';
import { auditOperatorCommand } from './audit.ts';
import { runWithCore, type StoreArguments } from './open-core.ts';
import { escapeControls, printResult } from './output.ts';
import { withRegistrationOptions } from './registration-options.ts';

type Arguments = StoreArguments & {
  json: boolean;
  fleet: number;
  file: string;
  'skip-invalid': boolean;
  'adopt-unassigned-data': boolean;
  'require-grants': boolean;
};

export const trailersImport: CommandModule<StoreArguments & { json: boolean }, Arguments> = {
  command: 'import',
  describe: 'Register a fleet\'s trailers from a CSV (vin,unitId[,active]) or NDJSON file in one transaction: all or nothing, each bad line named',
  builder: (yargs: Argv<StoreArguments & { json: boolean }>) =>
    withRegistrationOptions(
      yargs
        .option('fleet', { type: 'number', demandOption: true, describe: 'Fleet id' })
        .option('file', {
          type: 'string',
          demandOption: true,
          // One value always: without it yargs leaves a lone `-` (stdin) as a positional argument.
          nargs: 1,
          describe: 'The file, or - for stdin: CSV with a header row naming vin and unitId (and optionally active), or NDJSON lines {"vin","unitId","active"}',
        })
        .option('skip-invalid', { type: 'boolean', default: false, describe: 'Import the valid lines and report the invalid ones, instead of importing nothing' }),
    ),
  handler: (args) =>
    runWithCore(
      args,
      async (trailwire) => {
        if (!Number.isInteger(args.fleet) || args.fleet < 1) throw invalidField('/fleet', 'must be a positive integer');
        const file = readTrailerImportFile(await readInput(args.file));
        const report = await trailwire.admin.importTrailers({
          fleetId: args.fleet,
          file,
          skipInvalid: args['skip-invalid'],
          adoptUnassignedData: args['adopt-unassigned-data'],
        });
        if (report.outcome !== 'refused') {
          const { invalid, ...counts } = report;
          await auditOperatorCommand('trailers import', { ...counts, format: file.format, skipped: invalid.length });
        } else process.exitCode = 1;
        if (report.outcome === 'refused' && !args.json) process.stderr.write(`trailwire: ${escapeControls(describeReport(report), { keepLineBreaks: true })}\n`);
        else printResult(args, report, describeReport(report));
      },
      { partnerIntake: { requireGrants: args['require-grants'] } },
    ),
};

/** The file's text; `-` reads stdin to its end. */
async function readInput(path: string): Promise<string> {
  try {
    if (path !== '-') return await readFile(path, 'utf8');
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  } catch (error) {
    throw invalidField('/file', `cannot be read: ${(error as Error).message}`);
  }
}

/** The report for a person: what happened, then every line not taken. */
function describeReport(report: TrailerImportReport): string {
  const invalid = report.invalid.map((problem) => `  line ${problem.line}: ${problem.message}`);
  const lines = `${report.lines} line${report.lines === 1 ? '' : 's'}`;
  if (report.outcome === 'refused')
    return [`nothing imported into fleet ${report.fleetId}: ${report.invalid.length} of ${lines} invalid (fix them, or import the others with --skip-invalid):`, ...invalid].join('\n');
  const done =
    report.outcome === 'unchanged'
      ? `fleet ${report.fleetId}: nothing changed, every trailer of the file is already as it says (${report.unchanged} unchanged)`
      : `fleet ${report.fleetId}: ${report.created} created, ${report.assigned} assigned, ${report.updated} updated, ${report.unchanged} unchanged`;
  return invalid.length === 0 ? done : [`${done}; skipped ${invalid.length} invalid line${invalid.length === 1 ? '' : 's'}:`, ...invalid].join('\n');
}
