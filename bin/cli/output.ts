/**
 * How CLI commands answer: with `--json`, exactly one JSON document on stdout (also for errors,
 * as `{"error": {"code", "message"}}`) and nothing else there; otherwise short human text. Errors
 * exit with status 1, and a TrailwireError's message is shown as is (it is written for users).
 */
import { isTrailwireError, TrailwireError } from '../../core/errors.ts';
import { explainUsageError } from './unknown-options.ts';

export interface OutputOptions {
  json: boolean;
}

/** Prints a command's result: the JSON document, or the human line(s). */
export function printResult(options: OutputOptions, document: unknown, human: string): void {
  process.stdout.write(options.json ? `${JSON.stringify(document)}\n` : `${human}\n`);
}

/** Reports a failed command and sets the exit code. */
export function printFailure(options: OutputOptions, error: unknown): void {
  process.exitCode = 1;
  const known = isTrailwireError(error);
  const message = known || error instanceof TypeError ? (error as Error).message : String((error as Error)?.stack ?? error);
  const code = known ? error.code : 'internal';
  if (options.json) process.stdout.write(`${JSON.stringify({ error: { code, message } })}\n`);
  else process.stderr.write(`trailwire: ${message}\n`);
}

/**
 * yargs' failure handler. A usage error (an unknown command or option, a missing or invalid value) is
 * reported like every other failure — with `--json`, one JSON document on stdout — after the help on
 * stderr, and ends the process with status 1 as yargs' own handler does (returning would let yargs run
 * the command anyway).
 */
export function usageFailure(argv: string[]) {
  // yargs passes its usage printer as the third argument, not the Argv its types claim.
  return (message: string | null | undefined, error: unknown, usage: unknown): never => {
    if (!error) process.stderr.write(`${(usage as { help(): string }).help()}\n\n`);
    printFailure({ json: wantsJson(argv) }, error ?? new TrailwireError('validation_failed', message ? explainUsageError(message, argv) : 'Invalid command line; see --help.'));
    process.exit(1);
  };
}

// The arguments did not parse, so the flag is looked for as typed (the last one wins, as in yargs).
function wantsJson(argv: string[]): boolean {
  const flag = argv.filter((arg) => /^--(no-)?json(=.*)?$/.test(arg)).at(-1);
  if (flag === undefined) return /^(true|1)$/i.test(process.env.TRAILWIRE_JSON ?? '');
  return flag === '--json' || flag === '--json=true';
}
