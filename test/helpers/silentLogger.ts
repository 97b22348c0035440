import pino from 'pino';

/** A logger for tests: silent unless ACTA_TEST_LOG_LEVEL is set. */
export const silentLogger = pino({ level: process.env.ACTA_TEST_LOG_LEVEL ?? 'silent' });
