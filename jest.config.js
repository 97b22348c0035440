/** Jest: swc transform (no type-check: `npm run typecheck` does that), a throwaway PostgreSQL when no server is given. */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.spec.ts', '**/*.test.ts'],
  transform: { '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022', parser: { syntax: 'typescript' } }, module: { type: 'commonjs', ignoreDynamic: true } }] },
  globalSetup: '<rootDir>/test/helpers/globalSetup.mjs',
  globalTeardown: '<rootDir>/test/helpers/globalTeardown.mjs',
  testTimeout: 60000,
};
