/**
 * How CLI commands answer: with `--json`, exactly one JSON document on stdout (also for errors,
 * as `{"error": {"code", "message"}}`) and nothing else there; otherwise short human text. Errors
 * exit with status 1, and a TrailwireError's message is shown as is (it is written for users).
 */
import { isTrailwireError } from '../../core/errors.ts';

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
