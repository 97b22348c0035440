// The demo (examples/demo.ts) on a small real directory, on the embedded default: every file
// hashed correctly, a second run redoes nothing, and a touched file (new mtime) is redone alone.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { listFiles, runDemo, sqlCommandPrefix } from '../examples/demo';
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
         from acta.jobs where definition = 'hash-file' order by id`,
    );
    const { rows } = await db.query<{ n: string }>('select count(*) as n from acta.executions');
    return { jobs, executions: Number(rows[0].n) };
  } finally {
    await db.close();
  }
}

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
  // New-user trial: after `ACTA_DATA_DIR=/tmp/x npm start`, the hint opened ./.acta/data instead.
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
