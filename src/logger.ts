import pino, { type Logger } from 'pino';

export type { Logger };

/**
 * The root logger: pino JSON on stdout at `ACTA_LOG_LEVEL` (default `info`). Components take a
 * child (`logger.child({ component: 'finalizer' })`).
 */
export function createLogger(options: { level?: string; pretty?: boolean } = {}): Logger {
  const level = options.level ?? process.env.ACTA_LOG_LEVEL ?? 'info';
  if (options.pretty) {
    return pino({ level, transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l' } } });
  }
  return pino({ level });
}
