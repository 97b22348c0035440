// What the operating tables tell an operator, against a real PostgreSQL (docs/operating.md, "Admin
// commands"): `acta jobs list` and the dashboard count an Executing job's running attempt. Runs the
// built bin (`npm test` builds first).
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createClient, createWorker, type Db, defineJob } from '../src';
import { startDashboard } from '../src/ops/dashboard/server';
import { createTestDatabase, type TestDatabase } from './helpers/db';
import { silentLogger } from './helpers/silentLogger';
import { waitFor } from './helpers/wait';

const ROOT = path.resolve(__dirname, '..');
const BIN = path.join(ROOT, 'bin', 'acta.js');

let tdb: TestDatabase;
let db: Db;

beforeAll(async () => {
  if (!fs.existsSync(path.join(ROOT, 'dist', 'src', 'ops', 'cli', 'main.js'))) throw new Error('dist/ is missing: run `npm run build` (npm test does)');
  tdb = await createTestDatabase();
  db = tdb.open();
});
afterAll(async () => {
  await tdb.drop();
});

/** Runs `acta <args>` to completion. */
function acta(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { cwd: ROOT, env: { ...process.env, DATABASE_URL: tdb.url, ACTA_LOG_LEVEL: 'warn' }, timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}
const jsonLines = (stdout: string) => stdout.trim().split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>);

test('ATTEMPTS counts the running attempt: a job on its first attempt is 1/25 in acta jobs list and on the dashboard (before: 0/25), its attempts field still 0 (charged attempts)', async () => {
  const ns = `attempts-${randomUUID().slice(0, 8)}`;
  const client = createClient({ db, namespace: ns });
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const worker = createWorker({ db, namespace: ns, definitions: [defineJob({ name: 'long', handler: () => released })], logger: silentLogger });
  await worker.start();
  const dashboard = await startDashboard({ db, port: 0, logger: silentLogger });
  try {
    const { id } = await client.enqueue('long', {});
    const { id: waiting } = await client.enqueue('long', {}, { runAt: new Date(Date.now() + 3_600_000) });
    await waitFor(async () => (await client.getJob(id))?.status === 'executing', 'the job running');

    const text = await acta(['jobs', 'list', '--namespace', ns]);
    expect(text).toMatchObject({ code: 0, stderr: '' });
    const line = (job: string) => text.stdout.split('\n').find((l) => l.startsWith(`${job} `));
    expect(line(id)).toMatch(/ executing +1\/25 /);
    expect(line(waiting)).toMatch(/ ready +0\/25 /);
    // The JSON keeps the stored meaning: charged attempts (docs/reference.md, getJob).
    expect(jsonLines((await acta(['jobs', 'list', '--json', '--namespace', ns])).stdout).find((j) => j.id === id)).toMatchObject({ status: 'executing', attempts: 0, effectiveMaxAttempts: 25 });

    const list = await (await fetch(`${dashboard.url}/jobs?ns=${ns}`)).text();
    const row = list.slice(list.indexOf(`<tr data-job="${id}"`));
    expect(row.slice(0, row.indexOf('</tr>'))).toContain('<td class="n">1/25</td>');
    const page = await (await fetch(`${dashboard.url}/jobs/${id}?ns=${ns}`)).text();
    expect(page).toContain('<dt>attempts</dt><dd>1 of 25, the one running counted (the default; execution 1)</dd>');
  } finally {
    release();
    await dashboard.close();
    await worker.stop();
  }
}, 120_000);
