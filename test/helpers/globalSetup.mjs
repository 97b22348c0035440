// Jest globalSetup: the tests' PostgreSQL. ACTA_TEST_DATABASE_URL points the suites at a running
// server (.ci/run does this); without it a throwaway server is started here, so a fresh machine
// skips nothing. Each test file then creates its own database on that server.
import { startServer } from './server.mjs';

export default async function globalSetup() {
  if (process.env.ACTA_TEST_DATABASE_URL) return;
  const server = await startServer();
  globalThis.__ACTA_TEST_SERVER__ = server;
  process.env.ACTA_TEST_DATABASE_URL = server.url;
  console.log(`\nacta tests: started a throwaway PostgreSQL at ${server.url} (set ACTA_TEST_DATABASE_URL to use your own)`);
}
