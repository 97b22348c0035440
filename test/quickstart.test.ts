// The README's quick start: its code is examples/quickstart.mjs (plain JS; examples/quickstart.ts
// is the same in TypeScript, importing '../src'), and the built TypeScript example, run as the
// README says (`acta migrate`, then the file), prints the job's result and exits on its own: on the embedded default (no DATABASE_URL: PGlite in
// ./.acta/data of a new folder) and on a PostgreSQL server (a database of its own on the tests'
// server). Runs the built files (`npm test` builds first).
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createTestDatabase } from './helpers/db';

const ROOT = path.resolve(__dirname, '..');
const BIN = path.join(ROOT, 'bin', 'acta.js');
const EXAMPLE = path.join(ROOT, 'dist', 'examples', 'quickstart.js');
const PRINTED = "succeeded { greeting: 'hello, Ada' }\n";

beforeAll(() => {
  if (!fs.existsSync(EXAMPLE)) throw new Error('dist/ is missing: run `npm run build` (npm test does)');
});

/** Runs `node <args>` in `cwd` to its end; the process must exit on its own within 60 s. */
function node(args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number | string; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, args, { cwd, env, timeout: 60_000, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
      const code = err ? ((err as { code?: number }).code ?? (err as { signal?: string }).signal ?? -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** The environment of a user's shell: no database chosen unless `databaseUrl`; acta's log at warn, so stdout is the example's own line. */
function userEnv(databaseUrl?: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ACTA_LOG_LEVEL: 'warn' };
  delete env.DATABASE_URL;
  delete env.ACTA_DATA_DIR;
  if (databaseUrl) env.DATABASE_URL = databaseUrl;
  return env;
}

test("the README's quick start is examples/quickstart.mjs (test/pack.test.ts runs it from the packed tarball)", () => {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const section = readme.split(/^## /m).find((s) => s.startsWith('Quick start'));
  expect(section).toBeDefined();
  const block = /```js\n([\s\S]*?)```/.exec(section!);
  expect(block).not.toBeNull();
  expect(block![1]).toBe(fs.readFileSync(path.join(ROOT, 'examples', 'quickstart.mjs'), 'utf8'));
});

test('the quick start on the embedded default: migrate, run, the result printed, exit 0', async () => {
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-quickstart-'));
  try {
    const migrated = await node([BIN, 'migrate'], cwd, userEnv());
    expect(migrated).toMatchObject({ code: 0, stderr: '' });
    expect(migrated.stdout).toContain(`(PGlite at ${fs.realpathSync(cwd)}${path.sep}.acta${path.sep}data)`);
    const run = await node([EXAMPLE], cwd, userEnv());
    expect(run).toEqual({ code: 0, stdout: PRINTED, stderr: '' });
  } finally {
    fs.rmSync(cwd, { recursive: true, force: true });
  }
}, 150_000);

test('the quick start on a PostgreSQL server (DATABASE_URL): migrate, run, the result printed, exit 0', async () => {
  const tdb = await createTestDatabase({ migrate: false });
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-quickstart-'));
  try {
    const migrated = await node([BIN, 'migrate'], cwd, userEnv(tdb.url));
    expect(migrated).toMatchObject({ code: 0, stderr: '' });
    expect(migrated.stdout).toMatch(/^applied \d+: /);
    const run = await node([EXAMPLE], cwd, userEnv(tdb.url));
    expect(run).toEqual({ code: 0, stdout: PRINTED, stderr: '' });
    expect(fs.existsSync(path.join(cwd, '.acta'))).toBe(false); // nothing embedded was opened
  } finally {
    fs.rmSync(cwd, { recursive: true, force: true });
    await tdb.drop();
  }
}, 150_000);
