// What the operating tables tell an operator, against a real PostgreSQL (docs/operating.md, "Admin
// commands"): `acta alerts` lists sys.alerts' alerts as client.alerts and the dashboard read them;
// `acta namespaces` does not count a paused definition's due jobs as waiting for a worker; `acta jobs
// list` and the dashboard count an Executing job's running attempt. Runs the built bin (`npm test` builds first).
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createClient, createWorker, type Db, defineJob } from '../src';
import { sqlLedger } from '../src/ledger';
import { alertThresholds, runAlertsPass } from '../src/recurring/alerts';
import { alertsNotes } from '../src/ops/alertsNotes';
import { startDashboard } from '../src/ops/dashboard/server';
import { jsonLines, ROOT, runActa } from './helpers/cli';
import { createTestDatabase, type TestDatabase } from './helpers/db';
import { silentLogger } from './helpers/silentLogger';
import { waitFor } from './helpers/wait';

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

/** Runs `acta <args>` on the test's database. */
const acta = (args: string[]) => runActa(args, { ...process.env, DATABASE_URL: tdb.url, ACTA_LOG_LEVEL: 'warn' });
/** The table's rows as cells (split on runs of 2+ spaces), header first. */
const rowsOf = (stdout: string) => stdout.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('note:')).map((l) => l.trim().split(/\s{2,}/));

/** A worker of `namespace` declaring `names`, started and stopped: what it declares stays. */
async function declare(namespace: string, names: string[]): Promise<void> {
  const w = createWorker({ db, namespace, definitions: names.map((name) => defineJob({ name, handler: () => undefined })), logger: silentLogger });
  await w.start();
  await w.stop();
}

test('acta alerts: the open alerts (rule, subject, state, raised, detail), --all the resolved ones after them, --json client.alerts\' objects; a namespace where sys.alerts does not run, is paused, or has no live worker running it any more is named so', async () => {
  const ns = `alerts-cli-${randomUUID().slice(0, 8)}`;
  const client = createClient({ db, namespace: ns });
  // Alerts raised and resolved as sys.alerts does (test/db/alerts.test.ts): a dead worker, then a
  // due job of a definition no live worker declares, waiting past oldest_ready's 5 minutes.
  const dead = randomUUID();
  await db.query(`insert into acta.workers (id, namespace, hostname, pid, definitions, status, last_heartbeat_at) values ($1, $2, 'gone-host', 7, '{slow}', 'dead', now() - interval '1 minute')`, [dead, ns]);
  const evaluate = () => runAlertsPass(sqlLedger(db), ns, alertThresholds({}));
  await evaluate();
  await db.query(`update acta.workers set last_heartbeat_at = now() - interval '1 hour' where id = $1`, [dead]);
  await db.query('insert into acta.definitions (namespace, name) values ($1, $2)', [ns, 'slow']);
  await db.query(`insert into acta.jobs (namespace, definition, payload, run_at) values ($1, 'slow', '{}', now() - interval '6 minutes')`, [ns]);
  await evaluate();

  const open = await acta(['alerts', '--namespace', ns]);
  expect(open).toMatchObject({ code: 0, stderr: '' });
  const rows = rowsOf(open.stdout);
  expect(rows[0]).toEqual(['RULE', 'SUBJECT', 'STATE', 'RAISED', 'RESOLVED', 'DETAIL']);
  expect(rows.slice(1).map((r) => [r[0], r[1], r[2]])).toEqual([
    ['no_live_worker', 'slow', 'open'],
    ['oldest_ready', 'slow', 'open'],
  ]);
  // The values the rule had when it was raised, the keys of its JSON (the dashboard shows that JSON), whole.
  expect(rows[2][4]).toMatch(/^ageMs=\d+ oldestDueAt=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  expect(Number(/ageMs=(\d+)/.exec(rows[2][4])![1])).toBeGreaterThanOrEqual(6 * 60_000);
  // No worker runs sys.alerts in the namespace: an empty list would not mean "all is well".
  expect(open.stdout).toContain(`note: sys.alerts is not scheduled in namespace "${ns}": no worker has run it there (acta worker --alerts), so no rule is evaluated\n`);

  const all = rowsOf((await acta(['alerts', '--all', '--namespace', ns])).stdout);
  expect(all.slice(1).map((r) => [r[0], r[1], r[2]])).toEqual([
    ['no_live_worker', 'slow', 'open'],
    ['oldest_ready', 'slow', 'open'],
    ['worker_dead', dead, 'resolved'],
  ]);
  expect(all[3][5]).toMatch(/^pid=7 hostname=gone-host lastHeartbeatAt=\S+Z$/); // in jsonb's order of keys

  // --json: the client's own objects, one a line (docs/operating.md, "Admin commands").
  const json = jsonLines((await acta(['alerts', '--all', '--json', '--namespace', ns])).stdout);
  expect(json).toEqual(JSON.parse(JSON.stringify(await client.alerts({ all: true }))));
  expect(json.map((a) => [a.namespace, a.rule, a.resolvedAt === null])).toEqual([
    [ns, 'no_live_worker', true],
    [ns, 'oldest_ready', true],
    [ns, 'worker_dead', false],
  ]);
  expect(jsonLines((await acta(['alerts', '--json', '--namespace', ns])).stdout).map((a) => a.rule)).toEqual(['no_live_worker', 'oldest_ready']);
  await expect(client.alerts({ limit: 0 })).rejects.toThrow(/limit must be an integer from 1 to 1000/);
  await expect(client.alerts({ all: 'yes' as never })).rejects.toThrow(/all must be a boolean/);

  // While a worker with --alerts runs sys.alerts: no note; paused, the note says so.
  const evaluator = createWorker({ db, namespace: ns, definitions: [defineJob({ name: 'alerts-cli-noop', handler: () => undefined })], logger: silentLogger, alerts: true });
  await evaluator.start();
  expect((await acta(['alerts', '--namespace', ns])).stdout).not.toContain('note:');
  await client.schedules.pause('sys.alerts');
  const paused = (await acta(['alerts', '--namespace', ns])).stdout;
  expect(paused).toContain(`note: sys.alerts is paused in namespace "${ns}" (acta schedule resume sys.alerts): no rule is evaluated\n`);
  expect(paused).not.toContain('no live worker');
  // The notes are alertsNotes' texts, as the dashboard's Alerts page shows them (test/dashboard/alertsPage.test.ts).
  expect(paused.split('\n').filter((l) => l.startsWith('note: '))).toEqual((await alertsNotes(db, ns)).map((n) => `note: ${n}`));
  await client.schedules.resume('sys.alerts');
  // Its fires held by an acta pause (of sys.alerts, here): said too.
  await client.pause({ definition: 'sys.alerts' });
  expect((await acta(['alerts', '--namespace', ns])).stdout).toContain(
    `note: the jobs of sys.alerts are paused in namespace "${ns}" (acta resume --definition sys.alerts): no rule is evaluated, and these alerts are as its last evaluation left them\n`,
  );
  await client.resume({ definition: 'sys.alerts' });
  // Its last worker stopped: the open alerts are still listed, and said to be no longer evaluated
  // (before, they were listed as if current), since the worker's stop.
  await evaluator.stop();
  const { rows: [stopped] } = await db.query<{ stopped_at: Date }>('select stopped_at from acta.workers where id = $1', [evaluator.id]);
  const left = await acta(['alerts', '--namespace', ns]);
  expect(rowsOf(left.stdout).slice(1).map((r) => [r[0], r[2]])).toEqual([['no_live_worker', 'open'], ['oldest_ready', 'open']]);
  const noLive = (since: Date) =>
    `note: no live worker has run sys.alerts in namespace "${ns}" since ${since.toISOString()} (acta worker --alerts starts one): no rule is evaluated, and these alerts are as its last evaluation left them\n`;
  expect(left.stdout).toContain(noLive(stopped.stopped_at));
  // One that died (its process killed: listed alive, silent past 7 heartbeats): the same, since its last beat.
  await db.query(`update acta.workers set status = 'alive', stopped_at = null, last_heartbeat_at = now() - interval '1 hour' where id = $1`, [evaluator.id]);
  const { rows: [silent] } = await db.query<{ last_heartbeat_at: Date }>('select last_heartbeat_at from acta.workers where id = $1', [evaluator.id]);
  expect((await acta(['alerts', '--namespace', ns])).stdout).toContain(noLive(silent.last_heartbeat_at));
  // A live one again (beating now): no note.
  await db.query(`update acta.workers set last_heartbeat_at = now() where id = $1`, [evaluator.id]);
  expect((await acta(['alerts', '--namespace', ns])).stdout).not.toContain('note:');
  // The dashboard reads the same (client.alerts, resolved ones too).
  const dashboard = await startDashboard({ db, port: 0, logger: silentLogger });
  try {
    const page = await (await fetch(`${dashboard.url}/alerts?ns=${ns}`)).text();
    expect([...page.matchAll(/<tr data-rule="([^"]+)" data-subject="([^"]+)" data-open="(true|false)"/g)].map((m) => [m[1], m[2], m[3]])).toEqual([
      ['no_live_worker', 'slow', 'true'],
      ['oldest_ready', 'slow', 'true'],
      ['worker_dead', dead, 'false'],
    ]);
  } finally {
    await dashboard.close();
  }
}, 120_000);

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

test('namespaces: read without JIT (its estimates priced it past jit_above_cost, and a server with JIT on compiled it for ~0.4 s)', async () => {
  // What the server's session says of JIT when the summary's statement runs, read in the same transaction.
  const seen: string[] = [];
  const watching: Db = {
    ...db,
    transaction: (fn, options) =>
      db.transaction(
        (tx) =>
          fn({
            query: async (text: string, params?: unknown[]) => {
              if (text.includes('with recursive listed')) seen.push((await tx.query<{ jit: string }>('show jit')).rows[0].jit);
              return tx.query(text, params as never);
            },
          } as never),
        options,
      ),
  };
  const summary = await createClient({ db: watching }).namespaces();
  expect(Array.isArray(summary)).toBe(true);
  expect(seen).toEqual(['off']);
});
