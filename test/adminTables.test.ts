// What the operating tables tell an operator, against a real PostgreSQL (docs/operating.md, "Admin
// commands"): `acta namespaces` does not count a paused definition's due jobs as waiting for a
// worker; `acta jobs list` and the dashboard count an Executing job's running attempt. Runs the
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

/** A worker of `namespace` declaring `names` (and sys.alerts with `alerts`), started and stopped: what it declares stays. */
async function declare(namespace: string, names: string[], alerts = false): Promise<void> {
  const w = createWorker({ db, namespace, definitions: names.map((name) => defineJob({ name, handler: () => undefined })), logger: silentLogger, alerts });
  await w.start();
  await w.stop();
}

test('acta namespaces: a paused definition\'s due jobs are not "waiting for a worker": OLDEST DUE leaves them out, OLDEST PAUSED shows their wait; a namespace pause holds them all (before: OLDEST DUE counted them)', async () => {
  const ns = `paused-due-${randomUUID().slice(0, 8)}`;
  const client = createClient({ db, namespace: ns });
  await declare(ns, ['held', 'free']);
  await client.pause({ definition: 'held', reason: 'incident' });
  const { id: held } = await client.enqueue('held', {});
  const { id: free } = await client.enqueue('free', {});
  // Due 40 and 3 minutes ago; no worker runs (they would take `free`).
  await db.query(`update acta.jobs set run_at = now() - interval '40 minutes' where id = $1`, [held]);
  await db.query(`update acta.jobs set run_at = now() - interval '3 minutes' where id = $1`, [free]);

  const info = async () => (await client.namespaces()).find((n) => n.name === ns)!;
  let n = await info();
  expect(n.oldestReadyMs).toBeGreaterThanOrEqual(3 * 60_000);
  expect(n.oldestReadyMs).toBeLessThan(10 * 60_000); // before: 40 minutes, the paused job's
  expect(n.oldestPausedMs).toBeGreaterThanOrEqual(40 * 60_000);
  // What acta why says of that job: the pause, not a missing worker.
  expect(JSON.parse((await acta(['why', held, '--json', '--namespace', ns])).stdout).reasons[0]).toMatchObject({ cause: 'paused' });

  const text = await acta(['namespaces']);
  expect(text).toMatchObject({ code: 0, stderr: '' });
  const table = text.stdout.split('\n');
  expect(table[0]).toMatch(/ OLDEST DUE +OLDEST PAUSED +PAUSED$/);
  const line = table.find((l) => l.startsWith(`${ns} `))!;
  expect(line).toMatch(/ 3 min +40 min +held$/);
  const json = jsonLines((await acta(['namespaces', '--json'])).stdout).find((j) => j.name === ns)!;
  expect(json).toMatchObject({ oldestReadyMs: expect.any(Number), oldestPausedMs: expect.any(Number) });
  expect(json.oldestReadyMs as number).toBeLessThan(10 * 60_000);

  // The whole namespace paused: nothing waits for a worker.
  await client.pause({ reason: 'freeze' });
  n = await info();
  expect(n.oldestReadyMs).toBeNull();
  expect(n.oldestPausedMs).toBeGreaterThanOrEqual(40 * 60_000);
  expect((await acta(['namespaces'])).stdout.split('\n').find((l) => l.startsWith(`${ns} `))).toMatch(/ 0 +40 min +\(all\), held$/);
  // The dashboard's overview shows the two alike.
  const dashboard = await startDashboard({ db, port: 0, logger: silentLogger });
  try {
    const page = await (await fetch(`${dashboard.url}/?ns=${ns}`)).text();
    expect(page).toMatch(/<th>oldest due<\/th><th>oldest paused<\/th><th>paused<\/th>/);
    const row = page.slice(page.indexOf(`<tr data-namespace="${ns}">`));
    expect(row.slice(0, row.indexOf('</tr>'))).toMatch(/<td><\/td><td>40 min<\/td><td>\(all\), held<\/td>$/);
  } finally {
    await dashboard.close();
  }
  await client.resume();
  await client.resume({ definition: 'held' });
  n = await info();
  expect(n.oldestReadyMs).toBeGreaterThanOrEqual(40 * 60_000);
  expect(n.oldestPausedMs).toBeNull();
}, 120_000);

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
