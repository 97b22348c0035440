// The demo (examples/demo.ts) on a small real directory, on the embedded default: every file
// hashed correctly, a second run redoes nothing, and a touched file (new mtime) is redone alone;
// run as `npm start` is, with stdout piped, it prints plain progress lines (the built demo in dist/).
import { execFile, execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { actaCommand, listFiles, packageRoot, progressIntervalMs, progressLine, runDemo, sqlCommandPrefix } from '../examples/demo';
import { createPgliteDb } from '../src';

let root: string;
let dataDir: string;
const files: Record<string, Buffer> = {
  'empty.txt': Buffer.alloc(0),
  'hello.txt': Buffer.from('hello, acta\n'),
  'nested/deeper/data.bin': Buffer.from(Array.from({ length: 200_000 }, (_, i) => (i * 31) % 256)),
  'nested/notes.md': Buffer.from('# notes\n\u00e9t\u00e9 \u2603\n'),
  'nested/zeros.bin': Buffer.alloc(70_000),
};

beforeAll(() => {
  delete process.env.DATABASE_URL; // the demo's embedded default, whatever the shell says
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-demo-'));
  root = path.join(base, 'tree');
  dataDir = path.join(base, 'data');
  for (const [name, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    fs.writeFileSync(path.join(root, name), content);
  }
});
afterAll(() => fs.rmSync(path.dirname(root), { recursive: true, force: true }));

/** Reads the demo's data folder (closed again before the next run takes its lock). */
async function stored(): Promise<{ jobs: { path: string; status: string; sha256: string; bytes: number; id: string }[]; executions: number }> {
  const db = await createPgliteDb({ dataDir });
  try {
    const { rows: jobs } = await db.query<{ path: string; status: string; sha256: string; bytes: number; id: string }>(
      `select id, payload->>'path' as path, status, result->>'sha256' as sha256, (result->>'bytes')::int as bytes
         from acta.all_jobs where definition = 'hash-file' order by id`,
    );
    const { rows } = await db.query<{ n: string }>('select count(*) as n from acta.all_executions');
    return { jobs, executions: Number(rows[0].n) };
  } finally {
    await db.close();
  }
}

const shellQuoted = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
const sha256 = (buf: Buffer) => createHash('sha256').update(buf).digest('hex');

test('the demo hashes every file; a second run redoes nothing; a touched file is redone alone', async () => {
  const paths = Object.keys(files).map((f) => path.join(root, f));
  expect((await listFiles(root)).map((f) => f.path).sort()).toEqual([...paths].sort());

  const first = await runDemo(root, { quiet: true, dataDir });
  expect(first).toMatchObject({ files: paths.length, enqueued: paths.length, alreadyKnown: 0, succeeded: paths.length, failed: 0 });
  expect(first.target).toContain(path.resolve(dataDir));
  const afterFirst = await stored();
  expect(afterFirst.jobs).toHaveLength(paths.length);
  for (const [name, content] of Object.entries(files)) {
    const job = afterFirst.jobs.find((j) => j.path === path.join(root, name));
    expect({ name, status: job?.status, sha256: job?.sha256, bytes: job?.bytes }).toEqual({ name, status: 'succeeded', sha256: sha256(content), bytes: content.length });
  }
  expect(afterFirst.executions).toBe(paths.length);

  const second = await runDemo(root, { quiet: true, dataDir });
  expect(second).toMatchObject({ files: paths.length, enqueued: 0, alreadyKnown: paths.length, succeeded: paths.length, failed: 0 });
  const afterSecond = await stored();
  expect(afterSecond.executions).toBe(afterFirst.executions);
  expect(afterSecond.jobs).toEqual(afterFirst.jobs);

  // A new mtime is a new idempotency key: exactly that file runs again (with its new content).
  const touched = path.join(root, 'hello.txt');
  fs.writeFileSync(touched, 'hello again, acta\n');
  const later = new Date(Date.now() + 5_000);
  fs.utimesSync(touched, later, later);
  const third = await runDemo(root, { quiet: true, dataDir });
  expect(third).toMatchObject({ files: paths.length, enqueued: 1, alreadyKnown: paths.length - 1, failed: 0 });
  const afterThird = await stored();
  expect(afterThird.executions).toBe(afterFirst.executions + 1);
  const redone = afterThird.jobs.filter((j) => !afterFirst.jobs.some((old) => old.id === j.id));
  expect(redone).toEqual([
    { id: expect.any(String), path: touched, status: 'succeeded', sha256: sha256(Buffer.from('hello again, acta\n')), bytes: 18 },
  ]);
}, 60_000);

test('the printed `acta sql` command opens the database the demo used', () => {
  // The case it guards: after `ACTA_DATA_DIR=/tmp/x npm start`, the hint opened ./.acta/data instead.
  expect(sqlCommandPrefix(undefined, {})).toBe('');
  expect(sqlCommandPrefix(undefined, { ACTA_DATA_DIR: "/tmp/my data/it's $HOME" })).toBe(`ACTA_DATA_DIR='/tmp/my data/it'\\''s $HOME' `);
  expect(sqlCommandPrefix('/tmp/given', { ACTA_DATA_DIR: '/tmp/other' })).toBe(`ACTA_DATA_DIR='/tmp/given' `);
  // The server: DATABASE_URL wins over ACTA_DATA_DIR. Printed only when it holds no password.
  expect(sqlCommandPrefix(undefined, { DATABASE_URL: 'postgres://app@db:5432/app', ACTA_DATA_DIR: '/tmp/other' })).toBe(`DATABASE_URL='postgres://app@db:5432/app' `);
  for (const secret of ['postgres://app:secret@db/app', 'postgres://:secret@db/app', 'postgres://app@db/app?password=secret', 'postgres://app@db/app?sslpassword=key', 'postgres://u:a/b@h/db', 'host=db password=secret']) {
    expect(sqlCommandPrefix(undefined, { DATABASE_URL: secret })).toBe('DATABASE_URL=<your server URL> ');
  }
  // A folder given to the demo wins over DATABASE_URL, which the printed command must then empty.
  expect(sqlCommandPrefix('/tmp/given', { DATABASE_URL: 'postgres://x/y' })).toBe(`DATABASE_URL= ACTA_DATA_DIR='/tmp/given' `);
});

test('the printed acta command works where the demo runs: npx acta inside a project that installed acta, else the path of its bin/acta.js from there', () => {
  expect(packageRoot()).toBe(path.resolve(__dirname, '..'));
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-command-'));
  try {
    const clone = path.join(base, 'acta');
    const app = path.join(base, 'app');
    const installed = path.join(app, 'node_modules', 'acta');
    for (const dir of [clone, installed]) fs.mkdirSync(path.join(dir, 'bin'), { recursive: true });
    fs.mkdirSync(path.join(app, 'node_modules', '.bin'), { recursive: true });
    fs.mkdirSync(path.join(app, 'src'));
    fs.writeFileSync(path.join(app, 'node_modules', '.bin', 'acta'), '');
    // In the clone, as the hint always said; elsewhere the way to it (the hint said ./bin/acta.js there too).
    expect(actaCommand(clone, clone)).toBe('./bin/acta.js');
    expect(actaCommand(base, clone)).toBe('./acta/bin/acta.js');
    expect(actaCommand(app, clone)).toBe('../acta/bin/acta.js');
    expect(actaCommand('/', clone)).toBe(path.join(clone, 'bin', 'acta.js'));
    // Installed: npx finds it from the project and below; outside it npx would fetch npm's unrelated acta.
    expect(actaCommand(app, installed)).toBe('npx acta');
    expect(actaCommand(path.join(app, 'src'), installed)).toBe('npx acta');
    expect(actaCommand(base, installed)).toBe('./app/node_modules/acta/bin/acta.js');
    expect(actaCommand(base, path.join(base, 'my app'))).toBe("'./my app/bin/acta.js'"); // quoted for the shell
  } finally {
    fs.rmSync(base, { recursive: true, force: true });
  }
});

test('with stdout piped (not a terminal) the demo prints plain progress lines (every ACTA_DEMO_PROGRESS_MS, and a last one at 100%), and no bar; run from another folder, its printed command works there', async () => {
  const built = path.resolve(__dirname, '..', 'dist', 'examples', 'demo.js');
  if (!fs.existsSync(built)) throw new Error('dist/ is missing: run `npm run build` (npm test does)');
  const run = (env: Record<string, string>, cwd?: string) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const childEnv = { ...process.env, DATABASE_URL: '', ACTA_DATA_DIR: path.join(path.dirname(root), 'piped-data'), ...env };
      execFile(process.execPath, [built, root], { env: childEnv, timeout: 60_000, cwd }, (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
      });
    });
  const total = Object.keys(files).length;
  const piped = await run({ ACTA_DEMO_PROGRESS_MS: '1' });
  expect(piped).toMatchObject({ code: 0, stderr: '' });
  const lines = piped.stdout.split('\n').filter((l) => l.startsWith('demo: '));
  expect(lines.length).toBeGreaterThanOrEqual(1); // a run of 5 files may end before a second line is due
  for (const line of lines) expect(line).toMatch(new RegExp(`^demo: \\d+ / ${total} jobs done \\(\\d+%\\), [\\d,]+ jobs/s$`));
  expect(lines.at(-1)).toMatch(new RegExp(`^demo: ${total} / ${total} jobs done \\(100%\\), `));
  expect(lines.filter((l) => l.startsWith(`demo: ${total} / `))).toHaveLength(1); // the last not repeated
  expect(piped.stdout).not.toMatch(/\r|\x1b/); // no bar, no cursor codes
  expect(piped.stdout).toMatch(/^done: /m);
  // Run from another folder, its printed `acta sql` command works there (it named ./bin/acta.js, which is not there).
  const elsewhere = path.dirname(root);
  const away = await run({ ACTA_DEMO_PROGRESS_MS: '1' }, elsewhere);
  expect(away).toMatchObject({ code: 0, stderr: '' });
  const hint = away.stdout.split('\n').find((l) => l.includes(' sql "select'))!.trim();
  expect(actaCommand(elsewhere)).not.toBe('./bin/acta.js');
  expect(hint).toBe(`ACTA_DATA_DIR=${shellQuoted(path.join(elsewhere, 'piped-data'))} ${actaCommand(elsewhere)} sql "select payload->>'path' as path, result->>'sha256' as sha256 from acta.all_jobs where definition = 'hash-file' limit 5"`);
  const answer = execFileSync('sh', ['-c', hint], { cwd: elsewhere, env: { ...process.env, DATABASE_URL: '' }, encoding: 'utf8' });
  expect(answer).toContain(path.join(root, 'hello.txt'));

  const bad = await run({ ACTA_DEMO_PROGRESS_MS: 'soon' });
  expect(bad).toMatchObject({ code: 1, stdout: '' });
  expect(bad.stderr).toBe('acta demo: ACTA_DEMO_PROGRESS_MS must be a positive integer (ms), got "soon"\n');
}, 60_000);

test('the plain progress line: thousands separated, the percentage floored (100% only when all are done), the default interval 2 s', () => {
  expect(progressLine(1_234, 10_000, 1_000.4)).toBe('demo: 1,234 / 10,000 jobs done (12%), 1,000 jobs/s');
  expect(progressLine(9_999, 10_000, 0)).toBe('demo: 9,999 / 10,000 jobs done (99%), 0 jobs/s');
  expect(progressLine(0, 0, 0)).toBe('demo: 0 / 0 jobs done (100%), 0 jobs/s');
  expect(progressIntervalMs({})).toBe(2_000);
  expect(progressIntervalMs({ ACTA_DEMO_PROGRESS_MS: '500' })).toBe(500);
  expect(() => progressIntervalMs({ ACTA_DEMO_PROGRESS_MS: '0' })).toThrow(/positive integer/);
});

test('the demo beside a process holding its folder rides out a kill -9 of that holder: it takes the folder and finishes, each file hashed by one attempt', async () => {
  // Once `npm start` beside an `acta dashboard` that was then killed exited 1 with the
  // EmbeddedShareClosedError of its progress count, its worker still running (docs/operating.md,
  // "Which database": a client outlives whichever process held the folder).
  const built = path.resolve(__dirname, '..', 'dist', 'examples', 'demo.js');
  if (!fs.existsSync(built)) throw new Error('dist/ is missing: run `npm run build` (npm test does)');
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-demo-holder-'));
  try {
    const tree = path.join(base, 'tree');
    const total = 3_000; // several seconds through the socket: the kill lands mid-run
    for (let i = 0; i < total; i++) {
      const dir = path.join(tree, String(i % 30));
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, `${i}.txt`), `file ${i}\n`);
    }
    const data = path.join(base, 'data');
    const env = { ...process.env, DATABASE_URL: '', ACTA_DATA_DIR: data, ACTA_DEMO_PROGRESS_MS: '50', ACTA_LOG_LEVEL: 'silent' };
    const holder = spawn(process.execPath, [path.resolve(__dirname, 'fixtures', 'embedded-holder.js'), data], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      holder.stdout.on('data', (chunk: Buffer) => (chunk.toString().includes('open') ? resolve() : undefined));
      holder.once('exit', (code) => reject(new Error(`the holder exited ${code}`)));
    });
    const demo = spawn(process.execPath, [built, tree], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    demo.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => demo.once('exit', (code) => resolve(code)));
    await new Promise<void>((resolve) => {
      demo.stdout.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
        if (/^demo: [1-9][\d,]* \//m.test(stdout)) resolve(); // jobs are being done through the holder
      });
      void exited.then(() => resolve());
    });
    expect(stdout).not.toMatch(new RegExp(`^demo: ${total.toLocaleString('en-US')} /`, 'm'));
    // Stopped first, so that the demo's next progress count (every 250 ms) is in flight at the kill.
    holder.kill('SIGSTOP');
    await new Promise((r) => setTimeout(r, 1_000));
    holder.kill('SIGKILL');
    expect(await exited).toBe(0);
    expect(stderr).toBe('');
    expect(stdout).toMatch(new RegExp(`^done: ${total} files hashed, 0 failed`, 'm'));
    const db = await createPgliteDb({ dataDir: data });
    try {
      const { rows } = await db.query<{ jobs: string; succeeded: string; runs: string; twice: string }>(
        `select count(*) as jobs, count(*) filter (where status = 'succeeded') as succeeded,
                (select count(*) from acta.all_executions where outcome = 'succeeded') as runs,
                (select count(*) from (select job_id from acta.all_executions where outcome = 'succeeded' group by job_id having count(*) > 1) t) as twice
           from acta.all_jobs where definition = 'hash-file'`,
      );
      expect(rows[0]).toEqual({ jobs: String(total), succeeded: String(total), runs: String(total), twice: '0' });
      // A claim in flight at the kill may have been taken with its answer lost: its rows came back after
      // their lease (uncharged: their handlers never started), then ran once.
      const { rows: others } = await db.query<{ outcome: string; charged: boolean }>(`select outcome, charged from acta.all_executions where outcome <> 'succeeded'`);
      for (const other of others) expect(other.charged).toBe(false);
    } finally {
      await db.close();
    }
  } finally {
    fs.rmSync(base, { recursive: true, force: true });
  }
}, 120_000);
