// createLogger (src/logger.ts; docs/reference.md, "Worker", `logger`): the level given wins over
// ACTA_LOG_LEVEL, 'silent' logs nothing, and a level pino does not know is a ConfigError.
import { ConfigError, createLogger } from '../src';

const saved = process.env.ACTA_LOG_LEVEL;
afterEach(() => {
  if (saved === undefined) delete process.env.ACTA_LOG_LEVEL;
  else process.env.ACTA_LOG_LEVEL = saved;
});

test('the level option wins over ACTA_LOG_LEVEL, which wins over the default info', () => {
  delete process.env.ACTA_LOG_LEVEL;
  expect(createLogger().level).toBe('info');
  process.env.ACTA_LOG_LEVEL = 'warn';
  expect(createLogger().level).toBe('warn');
  expect(createLogger({ level: 'debug' }).level).toBe('debug');
  expect(createLogger({ level: 'silent' }).isLevelEnabled('fatal')).toBe(false);
});

test('a level pino does not know is a ConfigError naming the known ones, from the option or the environment', () => {
  expect(() => createLogger({ level: 'INFO' })).toThrow(ConfigError);
  expect(() => createLogger({ level: 'INFO' })).toThrow('must be one of trace, debug, info, warn, error, fatal, silent, got "INFO"');
  process.env.ACTA_LOG_LEVEL = 'verbose';
  expect(() => createLogger()).toThrow(ConfigError);
});
