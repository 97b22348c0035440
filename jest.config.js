/** Jest: swc transform (no type-check: `npm run typecheck` does that), a throwaway PostgreSQL when no server is given. */
const os = require('node:os');

module.exports = {
  testEnvironment: 'node',
  // At least two files at once (jest's default is one fewer than the cores): the suites wait on
  // servers, processes and timers more than they compute.
  maxWorkers: Math.max(2, os.cpus().length - 1),
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.spec.ts', '**/*.test.ts'],
  transform: { '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022', parser: { syntax: 'typescript' } }, module: { type: 'commonjs', ignoreDynamic: true } }] },
  globalSetup: '<rootDir>/test/helpers/globalSetup.mjs',
  globalTeardown: '<rootDir>/test/helpers/globalTeardown.mjs',
  testTimeout: 60000,
};
