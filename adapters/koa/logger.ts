/**
 * The logger the HTTP adapter writes with: any pino-compatible logger — pino's own, a child of it,
 * or a host's (`fastify.log`) — taken as the few methods Trailwire calls, so that a host passes its
 * own without a cast. Without one, Trailwire logs as `trailwire serve` does: pino at `info` on stderr,
 * so that its lines never mix into a host's stdout.
 */
import { type Logger, levels, pino } from 'pino';
import type { AccessLogLevel } from '../../core/audit.ts';

/** A pino-compatible logger: the level methods Trailwire writes with, and its current `level`. */
export type TrailwireLogger = Pick<Logger, 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace'> & {
  /** `info`, `debug`, ... or `silent`. */
  level: string;
};

/** The logger when none is given: pino at `info`, on stderr. */
export function defaultLogger(): Logger {
  return pino({ level: 'info' }, pino.destination(2));
}

/**
 * Whether `logger` writes lines at `level`, so that a line is built only when it is written: pino's
 * `isLevelEnabled` when the logger has it (custom levels included); fastify's logger type has none,
 * so there the level names are compared by pino's values (`silent` writes nothing).
 */
export function writesAt(logger: TrailwireLogger, level: AccessLogLevel): boolean {
  const { isLevelEnabled } = logger as Partial<Logger>;
  if (typeof isLevelEnabled === 'function') return isLevelEnabled.call(logger, level);
  const threshold = levels.values[logger.level];
  return threshold !== undefined && levels.values[level]! >= threshold;
}
