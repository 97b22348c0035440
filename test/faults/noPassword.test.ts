// A connection string without the password a SCRAM server asks for, on a server of the test's own
// (certify/pgServer.mjs, its pg_hba.conf switched to scram-sha-256). Runs the built bin.
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from 'pg';

const ROOT = path.resolve(__dirname, '..', '..');
const BIN = path.join(ROOT, 'bin', 'acta.js');

interface ServerHandle {
  url: string;
  dataDir: string;
  destroy(): Promise<void>;
}
let server: ServerHandle | undefined;
afterAll(() => server?.destroy());

function acta(args: string[], url: string): Promise<{ code: number; stderr: string; ms: number }> {
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: url, HOME: ROOT, ACTA_LOG_LEVEL: 'silent' };
  delete env.PGPASSWORD;
  delete env.PGPASSFILE;
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { cwd: ROOT, env, timeout: 120_000 }, (err, _stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stderr, ms: Date.now() - started });
    });
  });
}

test('`acta migrate` and `acta worker` without the password a SCRAM server asks for exit 1 at once, not after the server gives up on the login (authentication_timeout, 60 s)', async () => {
  // pg left the socket of a login it failed itself (no password for SCRAM) open, and the process
  // waited for the server to close it: the error printed, then a minute of nothing.
  const specifier = '../helpers/server.mjs'; // a variable: swc leaves this import() native (ESM)
  const { startServer } = (await import(specifier)) as { startServer: () => Promise<ServerHandle> };
  server = await startServer();
  const hba = path.join(server.dataDir, 'data', 'pg_hba.conf');
  fs.writeFileSync(hba, fs.readFileSync(hba, 'utf8').replace(/\bpassword\s*$/gm, 'scram-sha-256'));
  const admin = new Client({ connectionString: server.url });
  await admin.connect();
  try {
    await admin.query(`set password_encryption = 'scram-sha-256'; alter role postgres password 'postgres'; select pg_reload_conf()`);
  } finally {
    await admin.end();
  }
  const url = new URL(server.url);
  url.password = '';
  for (const args of [['migrate'], ['worker', 'test/fixtures/cli-jobs.js', '--start-timeout', '5000']]) {
    const run = await acta(args, url.toString());
    // Said plainly (was pg's "SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string").
    expect(run).toMatchObject({ code: 1, stderr: expect.stringMatching(/^acta: the server asks user postgres for a password, and none was given \(in the connection string, PGPASSWORD or ~\/\.pgpass\)/) });
    expect(run.ms).toBeLessThan(15_000);
  }
}, 300_000);
