import pino, { type Logger } from 'pino';
import { ConfigError } from './errors';
import { errorText } from './json';

export type { Logger };

/**
 * The root logger: pino JSON on stdout at `ACTA_LOG_LEVEL` (default `info`). Components take a
 * child (`logger.child({ component: 'finalizer' })`). Throws ConfigError for a level pino does not know.
 */
export function createLogger(options: { level?: string; pretty?: boolean } = {}): Logger {
  const level = options.level ?? process.env.ACTA_LOG_LEVEL ?? 'info';
  if (!(level in pino.levels.values) && level !== 'silent') {
    throw new ConfigError(`log level (ACTA_LOG_LEVEL or level) must be one of ${[...Object.keys(pino.levels.values), 'silent'].join(', ')}, got "${level}"`);
  }
  if (options.pretty) {
    return pino({ level, transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l' } } });
  }
  return pino({ level });
}

/**
 * The error fields of a log line that repeats while a call is retried: the error with its stack
 * on the first retry, its message alone on later ones.
 */
export function retryErrorFields(err: unknown, retry: number): Record<string, unknown> {
  return retry === 1 ? { err } : { error: errorText(err) };
}
