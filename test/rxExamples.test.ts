// The Rx examples of docs/rx.md (examples/throttle.ts, tracing.ts, sampledLog.ts) import acta's
// public API only ('../src', which is 'acta' to a user, as in examples/quickstart.ts), and each,
// built, runs to its end on the embedded default (PGlite in ./.acta/data of a new folder: no
// DATABASE_URL) and prints what it shows. Runs the built files (`npm test` builds first).
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..');
const EXAMPLES = ['throttle', 'tracing', 'sampledLog'];

let cwd: string;
beforeAll(() => {
  for (const name of EXAMPLES) {
    if (!fs.existsSync(path.join(ROOT, 'dist', 'examples', `${name}.js`))) throw new Error('dist/ is missing: run `npm run build` (npm test does)');
  }
  cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-rx-examples-'));
});
afterAll(() => fs.rmSync(cwd, { recursive: true, force: true }));

/** Runs a built example in `cwd` (one folder: each opens it after the last closed it) to its end; it must exit on its own within 120 s. */
function runExample(name: string): Promise<{ code: number | string; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, ACTA_LOG_LEVEL: 'silent' };
  delete env.DATABASE_URL;
  delete env.ACTA_DATA_DIR;
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(ROOT, 'dist', 'examples', `${name}.js`)], { cwd, env, timeout: 120_000, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
      const code = err ? ((err as { code?: number }).code ?? (err as { signal?: string }).signal ?? -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

test.each(EXAMPLES)('examples/%s.ts imports acta only from its public API', (name) => {
  const text = fs.readFileSync(path.join(ROOT, 'examples', `${name}.ts`), 'utf8');
  const sources = [...text.matchAll(/from '([^']+)'/g)].map((m) => m[1]);
  expect(sources).toContain('../src');
  for (const source of sources) expect(source === '../src' || source === 'rxjs' || source.startsWith('node:')).toBe(true);
});

test('the throttle example: one tenant\'s attempts are spaced, the other tenant\'s is not held up', async () => {
  const run = await runExample('throttle');
  expect(run).toEqual({ code: 0, stderr: '', stdout: 'tenant a: 3 started, spaced by the throttle: true\ntenant b: 1 started, before tenant a\'s second: true\n' });
}, 150_000);

test('the tracing example: one span per attempt, each ended, with its outcome', async () => {
  const run = await runExample('tracing');
  expect(run).toEqual({
    code: 0,
    stderr: '',
    stdout: [
      'job example-tracing-flaky attempt 1: error: failed first try fails, ended: true',
      'job example-tracing-flaky attempt 1: ok, ended: true',
      'job example-tracing-flaky attempt 1: ok, ended: true',
      'job example-tracing-flaky attempt 2: ok, ended: true',
      '',
    ].join('\n'),
  });
}, 150_000);

test('the sampling logger example: every failure and one success in ten of 25 completions', async () => {
  const run = await runExample('sampledLog');
  expect(run).toMatchObject({ code: 0, stderr: '' });
  const lines = run.stdout.trimEnd().split('\n');
  expect(lines.filter((l) => l === 'succeeded: job <id> (example-sampled-work, attempt 1)')).toHaveLength(3);
  expect(lines.filter((l) => l === 'failed_final: job <id> (example-sampled-work, attempt 1): Error: thirteen')).toHaveLength(1);
  expect(lines.at(-1)).toBe('logged 4 of 25 completions');
  expect(lines).toHaveLength(5);
}, 150_000);
