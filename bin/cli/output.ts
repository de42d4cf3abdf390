/**
 * How CLI commands answer: with `--json`, exactly one JSON document on stdout (also for errors,
 * as `{"error": {"code", "message"}}`) and nothing else there; otherwise short human text. Errors
 * exit with status 1, and a TrailwireError's message is shown as is (it is written for users).
 *
 * What the commands print holds text partners and customers chose (a tpms wheel, a name): control
 * characters in it are printed escaped, never raw, so none reaches the operator's terminal as an
 * escape sequence (issue 37: `ESC [2J` clears the screen, OSC 52 writes the clipboard).
 */
import { isTrailwireError, TrailwireError } from '../../core/errors.ts';
import { explainUsageError } from './unknown-options.ts';

export interface OutputOptions {
  json: boolean;
}

// C0 controls, DEL and C1 controls (U+0080–U+009F: U+009B is CSI in terminals that take 8-bit controls).
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/g;
const CONTROL_BUT_LINE_BREAK = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/g;

const escaped = (char: string): string => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * `text` with its control characters shown as `\u001b`-style escapes, line breaks too unless
 * `keepLineBreaks` (for the text a command composed of lines; a table cell keeps none, so a value
 * cannot start a row of its own).
 */
export function escapeControls(text: string, options: { keepLineBreaks?: boolean } = {}): string {
  return text.replace(options.keepLineBreaks ? CONTROL_BUT_LINE_BREAK : CONTROL_CHARACTER, escaped);
}

/**
 * A JSON document on one line, with DEL and the C1 controls escaped too (JSON.stringify escapes only
 * C0). Always, not only on a terminal: the escape is JSON, so a program reads the same value.
 */
export function jsonLine(document: unknown): string {
  return JSON.stringify(document).replace(/[\u007f-\u009f]/g, escaped);
}

/** Prints a command's result: the JSON document, or the human line(s). */
export function printResult(options: OutputOptions, document: unknown, human: string): void {
  process.stdout.write(options.json ? `${jsonLine(document)}\n` : `${escapeControls(human, { keepLineBreaks: true })}\n`);
}

/** Reports a failed command and sets the exit code. */
export function printFailure(options: OutputOptions, error: unknown): void {
  process.exitCode = 1;
  const known = isTrailwireError(error);
  const message = known || error instanceof TypeError ? (error as Error).message : String((error as Error)?.stack ?? error);
  const code = known ? error.code : 'internal';
  if (options.json) process.stdout.write(`${jsonLine({ error: { code, message } })}\n`);
  else process.stderr.write(`trailwire: ${escapeControls(message, { keepLineBreaks: true })}\n`);
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
