/**
 * The audit line of an operator command (issue 17): what an operator changed, from which command,
 * as one pino JSON line on stderr marked `audit: true` — stdout stays the command's answer. Written
 * after the change succeeded, with ids only: an API key shown to the operator never enters a log.
 */
import { userInfo } from 'node:os';

/** Logs that `command` (e.g. `keys rotate`) changed what `fields` name. */
export async function auditOperatorCommand(command: string, fields: Record<string, unknown>): Promise<void> {
  // Loaded on use: commands that change nothing, and --help, do not load pino.
  const { pino } = await import('pino');
  const logger = pino({ level: 'info' }, pino.destination({ fd: 2, sync: true }));
  logger.info({ audit: true, event: 'operator.command', command, operator: operatorName(), ...fields }, `operator: ${command}`);
}

function operatorName(): string {
  try {
    return userInfo().username;
  } catch {
    // No passwd entry (some containers): the uid still says who.
    return String(process.getuid?.() ?? 'unknown');
  }
}
