/**
 * Start-up with a dependency that is not there yet (issue 28): PostgreSQL or Redis restarting, or
 * started after Trailwire by an orchestrator. `openWhenReachable` tries to open it, and while the
 * failure says "cannot be reached" (not "wrong password" or "no such database", which waiting does
 * not mend) it logs one clear warning and tries again every second until the deadline; then it fails
 * with the reason, which `trailwire serve` prints and exits non-zero on — no stack trace (any other
 * failure to open it is a `TrailwireError` naming the dependency too, so the command prints its
 * message, not a stack).
 */
import type { Logger } from 'pino';
import { isTrailwireError, TrailwireError } from '../../core/errors.ts';

export interface DependencyWaitOptions {
  /** Names the dependency in messages, e.g. `PostgreSQL at postgres://…`. */
  what: string;
  /** How long to keep trying, from the first try (ms). 0 tries once. */
  timeoutMs: number;
  /** The pause between tries (ms). Default 1000. */
  retryDelayMs?: number;
  logger?: Logger;
}

/** The default of `startupTimeoutMs` (`ServerOptions`) and `serve --startup-timeout`: one minute. */
export const DEFAULT_STARTUP_TIMEOUT_MS = 60_000;

/** Whether a failure to open a dependency may mend by waiting: it could not be reached. */
export function isUnreachable(error: unknown): boolean {
  return isTrailwireError(error) && (error.code === 'store_unavailable' || error.code === 'unavailable');
}

/** Opens the dependency, retrying while it cannot be reached, until `timeoutMs` has passed. */
export async function openWhenReachable<T>(open: () => Promise<T>, options: DependencyWaitOptions): Promise<T> {
  if (!Number.isFinite(options.timeoutMs) || options.timeoutMs < 0)
    throw new TrailwireError('validation_failed', `ServerOptions.startupTimeoutMs must be a number of milliseconds, 0 or more, got ${String(options.timeoutMs)}`);
  const deadline = Date.now() + options.timeoutMs;
  const retryDelayMs = options.retryDelayMs ?? 1000;
  let tries = 0;
  for (;;) {
    try {
      const opened = await open();
      if (tries > 0) options.logger?.info({ dependency: options.what, tries: tries + 1 }, `${options.what} is reachable; starting`);
      return opened;
    } catch (error) {
      tries++;
      const reason = reasonOf(error);
      // Waiting does not mend it (a wrong password, no such database): the reason, at once.
      if (!isUnreachable(error)) {
        if (isTrailwireError(error)) throw error;
        throw new TrailwireError('store_unavailable', `${options.what} cannot be used: ${reason}`, { cause: error });
      }
      if (Date.now() + retryDelayMs > deadline) {
        throw new TrailwireError(
          'store_unavailable',
          `${options.what} could not be reached within ${Math.round(options.timeoutMs / 1000)} s (--startup-timeout): ${reason}`,
          { cause: error },
        );
      }
      if (tries === 1)
        options.logger?.warn(
          { dependency: options.what, reason, timeoutSeconds: Math.round(options.timeoutMs / 1000) },
          `${options.what} cannot be reached (${reason}); retrying every ${retryDelayMs / 1000} s for up to ${Math.round(options.timeoutMs / 1000)} s`,
        );
      else options.logger?.debug({ dependency: options.what, reason, tries }, 'still waiting for a dependency');
      await new Promise((resolve) => setTimeout(resolve, retryDelayMs));
    }
  }
}

/** The message of an error, with its cause's (the driver's words) when it has one. */
function reasonOf(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause.message : undefined;
  return cause && !message.includes(cause) ? `${message} (${cause})` : message;
}
