// The dashboard in a real browser (playwright-core driving the machine's Chromium) against a real
// database and a running worker: every view, every action (retry, cancel, delete, pause, resume),
// the database checked after each; the refusals (no CSRF token, read-only, GET never acts).
// Screenshots go to test-artifacts/dashboard/ (docs/dashboard.png is the overview's).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createClient, createWorker, defineJob, type Client, type Db, type Worker } from '../src';
import { registerWorker } from '../src/db/workers';
import { startDashboard, type DashboardServer } from '../src/ops/dashboard/server';
import { createTestDatabase, type TestDatabase } from './helpers/db';
import { silentLogger } from './helpers/silentLogger';
import { waitFor } from './helpers/wait';

const ARTIFACTS = path.join(__dirname, '..', 'test-artifacts', 'dashboard');
const CHROMIUM = process.env.ACTA_TEST_CHROMIUM ?? '/usr/bin/chromium';
// Chromium is a machine package (.ci/run installs it when missing): without it the file's tests are
// skipped with the reason printed, except in CI, where its absence fails the file.
const HAVE_CHROMIUM = fs.existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) {
  const why = `no Chromium at ${CHROMIUM} (apt-get install chromium, or set ACTA_TEST_CHROMIUM)`;
  if (process.env.CI) throw new Error(`test/dashboard.test.ts: ${why}`);
  console.warn(`test/dashboard.test.ts skipped: ${why}`);
}
const browserTest = HAVE_CHROMIUM ? test : test.skip;

let t: TestDatabase;
let db: Db;
let client: Client;
let worker: Worker;
let dashboard: DashboardServer;
let readOnly: DashboardServer;
let browser: Browser;
let page: Page;
const logged: Record<string, unknown>[] = [];
const failedOnce = new Set<string>();
const ids: Record<string, string> = {};

const definitions = [
  defineJob<{ n: number }>({
    name: 'ok',
    handler: async (p, ctx) => {
      ctx.progress({ done: 1, of: 1 });
      await new Promise((r) => setTimeout(r, 400)); // progress is written at most every 250 ms: let it land
      const fetched = await ctx.step('fetch', async () => ({ fetched: p.n }));
      return { ok: true, fetched };
    },
  }),
  // Fails its first attempt, succeeds once retried.
  defineJob({
    name: 'flaky',
    maxAttempts: 1,
    handler: async (_p, ctx) => {
      if (!failedOnce.has(ctx.jobId)) {
        failedOnce.add(ctx.jobId);
        throw new Error('flaky <b>boom</b>');
      }
      return 'second time lucky';
    },
  }),
  // Runs until cancelled.
  defineJob({
    name: 'slow',
    handler: (_p, ctx) => new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(new Error(String(ctx.signal.reason))))),
  }),
];

/** Attempts k minutes ago, k = 1..45. */
const HISTORY = Array.from({ length: 45 }, (_, i) => ({ succeeded: 20 + (((i + 1) * 7) % 15), failed: (i + 1) % 9 === 0 ? 4 : (i + 1) % 4 === 0 ? 1 : 0 }));
const historySum = (k: 'succeeded' | 'failed') => HISTORY.reduce((a, h) => a + h[k], 0);

// acta.all_jobs: a succeeded job (ok's) leaves acta.jobs for acta.succeeded_jobs; 'gone' is deleted from both.
const statusOf = async (id: string) => (await db.query<{ status: string }>('select status from acta.all_jobs where id = $1', [id])).rows[0]?.status ?? 'gone';
const shot = (name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });

beforeAll(async () => {
  if (!HAVE_CHROMIUM) return;
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  t = await createTestDatabase();
  db = t.open({ max: 6 });
  client = createClient({ db });
  worker = createWorker({ db, definitions, logger: silentLogger, executors: 4, safetyPollMs: 100 });
  await worker.start();
  ids.ok = (await client.enqueue('ok', { n: 1 })).id;
  ids.flaky = (await client.enqueue('flaky', {})).id;
  ids.slow = (await client.enqueue('slow', {})).id;
  const later = new Date(Date.now() + 3_600_000);
  ids.later = (await client.enqueue('ok', { n: 2, note: '<script>window.__xss = 1</script>' }, { runAt: later })).id;
  ids.big = (await client.enqueue('ok', { n: 3, blob: 'x'.repeat(200_000) }, { runAt: later })).id;
  await waitFor(async () => (await statusOf(ids.ok)) === 'succeeded' && (await statusOf(ids.flaky)) === 'failed' && (await statusOf(ids.slow)) === 'executing', 'ok succeeded, flaky failed, slow running');
  await waitFor(async () => (await client.getJob(ids.ok))?.progress, "ok's progress stored");
  // A worker that died (its row as recovery leaves it), for the workers view.
  const dead = randomUUID();
  await registerWorker(db, { workerId: dead, namespace: 'default', hostname: 'gone-host', pid: 4242, definitions: ['ok'], maxAttempts: [null], leaseMs: 60_000, build: 'v0', policies: {} });
  await db.query(`update acta.workers set status = 'dead', last_heartbeat_at = now() - interval '10 minutes' where id = $1`, [dead]);
  ids.dead = dead;
  // A worker that crashed with no live worker's recovery pass since: listed alive, silent past 7 heartbeats.
  const silent = randomUUID();
  await registerWorker(db, { workerId: silent, namespace: 'default', hostname: 'silent-host', pid: 4343, definitions: ['ok'], maxAttempts: [null], leaseMs: 60_000, build: 'v0', policies: {} });
  await db.query(`update acta.workers set last_heartbeat_at = now() - interval '10 minutes' where id = $1`, [silent]);
  ids.silent = silent;
  // An hour of history in the attempt ledger (the dead worker's attempts), for the chart.
  await db.query(
    `insert into acta.executions (job_id, execution, worker_id, claimed_at, finished_at, outcome, charged)
     select 9000000 + k * 100 + i, 1, $1::uuid, now(), date_trunc('minute', now()) - k * interval '1 minute' + interval '10 seconds',
            case when i < ($2::int[])[k] then 'failed' else 'succeeded' end, true
     from generate_series(1, 45) k cross join lateral generate_series(0, ($3::int[])[k] - 1) i`,
    [dead, HISTORY.map((h) => h.failed), HISTORY.map((h) => h.succeeded + h.failed)],
  );

  const logger = pino({ level: 'info' }, { write: (line: string) => void logged.push(JSON.parse(line)) });
  dashboard = await startDashboard({ db, port: 0, basic: 'ops:s3cret-pass', logger });
  readOnly = await startDashboard({ db, port: 0, readOnly: true, logger: silentLogger });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  page = await (await browser.newContext({ httpCredentials: { username: 'ops', password: 's3cret-pass' }, viewport: { width: 1280, height: 900 } })).newPage();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await dashboard?.close();
  await readOnly?.close();
  await worker?.stop();
  await t?.drop();
});

browserTest('the overview: namespaces with counts by status, attempts per minute, pauses, in flight by worker (a silent one shown silent)', async () => {
  await page.goto(`${dashboard.url}/`);
  const row = page.locator('#namespaces tr[data-namespace="default"]');
  // ready: later + big; executing: slow; succeeded: ok; failed: flaky.
  await expect(row.locator('td').allInnerTexts()).resolves.toEqual(['default', '2', '1', '0', '1', '1', '0', '', '', '']);
  // A bar part per minute and outcome: the history's, and this minute's success and failure.
  expect(await page.locator('svg[role="img"] rect').count()).toBe(45 + HISTORY.filter((h) => h.failed > 0).length + 2);
  expect(await page.locator('#totals').innerText()).toContain(`${historySum('succeeded') + 1} succeeded, ${historySum('failed') + 1} failed`);
  expect(await page.locator(`#inflight tr[data-worker="${worker.id}"]`).innerText()).toMatch(/alive\s+1\s/); // the worker holds slow
  expect(await page.locator(`#inflight tr[data-worker="${ids.silent}"]`).innerText()).toMatch(/silent\s+0\s/);
  expect(await page.locator('#worker-counts').innerText()).toMatch(/^1 alive worker, 1 silent past 7 heartbeats \(gone, not yet marked dead\), 1 stopped or dead/);
  await shot('overview');
});

browserTest('the workers view lists the live worker with what it holds, the silent one (listed alive, gone) and the dead one', async () => {
  await page.goto(`${dashboard.url}/`);
  await page.click('header >> text=Workers');
  await expect(page.locator('#workers tr[data-status="alive"]').innerText()).resolves.toContain(ids.slow);
  await expect(page.locator(`#workers tr[data-worker="${ids.dead}"]`).innerText()).resolves.toMatch(/dead[\s\S]*gone-host:4242[\s\S]*v0/);
  await expect(page.locator(`#workers tr[data-worker="${ids.silent}"]`).innerText()).resolves.toMatch(/silent[\s\S]*silent-host:4343/);
  await shot('workers');
});

browserTest('the job list filters and pages by keyset; a page shows payload (escaped, cut), attempts, steps, progress and why', async () => {
  await page.goto(`${dashboard.url}/`);
  await page.click('header >> text=Jobs');
  expect(await page.locator('#jobs tbody tr').count()).toBe(5);
  await page.selectOption('#filters select[name="status"]', 'ready');
  await page.click('#filters button');
  expect(await page.locator('#jobs tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-job')))).toEqual([ids.big, ids.later]);
  await shot('jobs');
  // The job with markup in its payload: shown as text, never run; its why: not due.
  await page.click(`#jobs a:text-is("${ids.later}")`);
  expect(await page.locator('#payload').innerText()).toContain('<script>window.__xss = 1</script>');
  expect(await page.evaluate(() => (globalThis as { __xss?: number }).__xss)).toBeUndefined();
  expect(await page.locator('#why li').first().getAttribute('data-cause')).toBe('not-due');
  // A 200 KB payload: the database sends 64 KiB and its size.
  await page.goto(`${dashboard.url}/jobs/${ids.big}`);
  expect((await page.locator('#payload').innerText()).length).toBe(65_536);
  expect(await page.locator('main').innerText()).toMatch(/195\.3 KiB, cut: the first 65,536 characters shown/);
  // The succeeded job: result, attempt, step, progress.
  await page.goto(`${dashboard.url}/jobs/${ids.ok}`);
  expect(await page.locator('#result').innerText()).toBe('{"ok": true, "fetched": {"fetched": 1}}');
  expect(await page.locator('#attempts tbody').innerText()).toMatch(/1\s+succeeded\s+yes/);
  expect(await page.locator('#steps tbody').innerText()).toMatch(/fetch\s+1/);
  expect(await page.locator('#progress').innerText()).toBe('{"of": 1, "done": 1}');
  await shot('job');
  // Keyset pages: 50 a page, the next page below the last id.
  await client.enqueueMany(Array.from({ length: 60 }, (_, i) => ({ definition: 'ok', payload: { n: i }, runAt: new Date(Date.now() + 3_600_000) })));
  await page.goto(`${dashboard.url}/jobs?status=ready`);
  expect(await page.locator('#jobs tbody tr').count()).toBe(50);
  await page.click('#next');
  expect(await page.locator('#jobs tbody tr').count()).toBe(12);
  expect(await page.locator('#jobs tbody tr').last().getAttribute('data-job')).toBe(ids.later);
});

browserTest('retry a failed job, cancel a ready and a running one, delete a finished one: each changes the database and is logged with who', async () => {
  await page.goto(`${dashboard.url}/jobs/${ids.flaky}`);
  expect(await page.locator('#error').innerText()).toContain('flaky <b>boom</b>');
  await page.click('button[data-action="retry"]');
  expect(await page.locator('.flash').innerText()).toContain('Retried');
  await waitFor(async () => (await statusOf(ids.flaky)) === 'succeeded', 'the retried job to succeed');
  expect((await client.getJob(ids.flaky))?.executions.map((e) => e.outcome)).toEqual(['failed_final', 'succeeded']);

  await page.goto(`${dashboard.url}/jobs/${ids.later}`);
  await page.click('button[data-action="cancel"]');
  expect(await statusOf(ids.later)).toBe('cancelled');
  await page.goto(`${dashboard.url}/jobs/${ids.slow}`);
  await page.click('button[data-action="cancel"]');
  await waitFor(async () => (await statusOf(ids.slow)) === 'cancelled', 'the running job to end cancelled');

  await page.goto(`${dashboard.url}/jobs/${ids.ok}`);
  await page.click('button[data-action="delete"]');
  expect(page.url()).toMatch(/\/jobs\?done=delete%3A1$/); // the job list, not the deleted job's page
  expect(await statusOf(ids.ok)).toBe('gone');
  await shot('after-actions');
  const actions = logged.filter((l) => l.component === 'dashboard').map((l) => [l.action, l.who, l.id, l.changed]);
  expect(actions).toEqual([
    ['retry', 'ops', ids.flaky, 1],
    ['cancel', 'ops', ids.later, 1],
    ['cancel', 'ops', ids.slow, 1],
    ['delete', 'ops', ids.ok, 1],
  ]);
});

browserTest('pause and resume the namespace from the overview: stored with who and why, then lifted', async () => {
  await page.goto(`${dashboard.url}/`);
  await page.fill('input[name="reason"]', 'incident 7');
  await page.click('button[data-action="pause"]');
  const { rows } = await db.query<{ definition: string; paused_by: string; reason: string }>('select definition, paused_by, reason from acta.pauses');
  expect(rows).toEqual([{ definition: '', paused_by: 'ops (dashboard)', reason: 'incident 7' }]);
  expect(await page.locator('#pauses').innerText()).toContain('incident 7');
  await shot('paused');
  await page.click('#pauses button[data-action="resume"]');
  expect((await db.query('select 1 from acta.pauses')).rows).toEqual([]);
  expect(await page.locator('.flash').innerText()).toContain('Resumed');
  expect(logged.filter((l) => l.component === 'dashboard').slice(-2).map((l) => [l.action, l.who, l.reason ?? null])).toEqual([
    ['pause', 'ops', 'incident 7'],
    ['resume', 'ops', null],
  ]);
});

browserTest('the Pause form refuses a definition or namespace no worker has declared, as acta pause does: the page says so, nothing paused', async () => {
  // Before, a typo was paused and reported "Paused", holding nothing that runs (src/ops/pauseCheck.ts).
  await page.goto(`${dashboard.url}/`);
  await page.fill('input[name="definition"]', 'okk');
  const [typo] = await Promise.all([page.waitForNavigation(), page.click('button[data-action="pause"]')]);
  expect(typo?.status()).toBe(409);
  const said = await page.locator('#error').innerText();
  expect(said).toContain('no worker has declared a job definition named "okk" in namespace "default" (declared there: ');
  expect(said).toContain('"ok"');
  expect(said).toContain('nothing paused; check the name');
  await page.goto(`${dashboard.url}/?ns=nobody-here`);
  const [ns] = await Promise.all([page.waitForNavigation(), page.click('button[data-action="pause"]')]);
  expect(ns?.status()).toBe(409);
  expect(await page.locator('#error').innerText()).toContain('no worker has declared any job definition in namespace "nobody-here"');
  expect((await db.query('select namespace, definition from acta.pauses')).rows).toEqual([]);
  // A declared definition pauses.
  await page.goto(`${dashboard.url}/`);
  await page.fill('input[name="definition"]', 'slow');
  await page.click('button[data-action="pause"]');
  expect((await db.query('select namespace, definition from acta.pauses')).rows).toEqual([{ namespace: 'default', definition: 'slow' }]);
  await client.resume({ definition: 'slow' });
});

browserTest('refused: a POST without the CSRF token, any request without auth, GET on an action; read-only shows no action and refuses it', async () => {
  const [{ id }] = await client.enqueueMany([{ definition: 'ok', payload: { n: 9 }, runAt: new Date(Date.now() + 3_600_000) }]);
  const auth = { authorization: `Basic ${Buffer.from('ops:s3cret-pass').toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' };
  const post = (url: string, body: string, headers: Record<string, string> = auth) => fetch(url, { method: 'POST', headers, body, redirect: 'manual' });
  expect((await post(`${dashboard.url}/actions/cancel`, `ns=default&id=${id}`)).status).toBe(403);
  expect((await post(`${dashboard.url}/actions/cancel`, `ns=default&id=${id}&csrf=forged`)).status).toBe(403);
  expect((await post(`${dashboard.url}/actions/cancel`, `ns=default&id=${id}`, { 'content-type': 'application/x-www-form-urlencoded' })).status).toBe(401);
  expect((await fetch(`${dashboard.url}/`)).status).toBe(401);
  expect((await fetch(`${dashboard.url}/actions/cancel?ns=default&id=${id}`, { headers: auth })).status).toBe(404);
  expect(await statusOf(id)).toBe('ready');

  const ro = await browser.newPage();
  await ro.goto(`${readOnly.url}/jobs/${id}`);
  expect(await ro.locator('button[data-action]').count()).toBe(0);
  await ro.goto(`${readOnly.url}/`);
  expect(await ro.locator('button[data-action]').count()).toBe(0);
  expect((await post(`${readOnly.url}/actions/cancel`, `ns=default&id=${id}`, { 'content-type': 'application/x-www-form-urlencoded' })).status).toBe(403);
  expect(await statusOf(id)).toBe('ready');
  await ro.close();
});

browserTest('a job page reads its id as `acta job <id>` does: beyond bigint (20 digits) is no such job (404), as a missing one is; leading zeros are the job; 0 is a bad id (400)', async () => {
  const headers = { authorization: `Basic ${Buffer.from('ops:s3cret-pass').toString('base64')}` };
  const get = async (id: string) => {
    const res = await fetch(`${dashboard.url}/jobs/${id}`, { headers });
    return { status: res.status, text: await res.text() };
  };
  for (const id of ['9223372036854775807', '99999999999999999999', '1'.repeat(400)]) {
    const res = await get(id);
    expect({ id, status: res.status }).toEqual({ id, status: 404 });
    expect(res.text).toContain(`no job ${id} in namespace &quot;default&quot;`);
  }
  expect(await get(`0000000000000000000${ids.later}`)).toMatchObject({ status: 200, text: expect.stringContaining('&lt;script&gt;window.__xss = 1&lt;/script&gt;') });
  expect(await get('0')).toMatchObject({ status: 400, text: expect.stringContaining('a job id is a positive integer, got 0') });
});

browserTest('an action reads its job id as `acta jobs retry|cancel|delete` does and answers in its words: 20 digits is no job, a job left as it was is named with its status and the rule', async () => {
  const huge = '9'.repeat(20);
  const cancelForm = page.locator('form:has(button[data-action="cancel"]) input[name="id"]');
  // The page's own Cancel form, its id changed as a crafted POST would: before, "400 the action needs a job id".
  await page.goto(`${dashboard.url}/jobs/${ids.big}`);
  await cancelForm.evaluate((el, v) => void ((el as unknown as { value: string }).value = v), huge);
  const [answer] = await Promise.all([page.waitForNavigation(), page.click('button[data-action="cancel"]')]);
  expect(answer?.status()).toBe(200);
  expect(await page.locator('.flash').innerText()).toBe(`Not cancelled: no job ${huge} in namespace "default".`);
  expect(await statusOf(ids.big)).toBe('ready');
  // Leading zeros are the job, as for `acta jobs cancel 00<id>`.
  await page.goto(`${dashboard.url}/jobs/${ids.big}`);
  await cancelForm.evaluate((el, v) => void ((el as unknown as { value: string }).value = v), `00${ids.big}`);
  await page.click('button[data-action="cancel"]');
  expect(await statusOf(ids.big)).toBe('cancelled');
  // A stale page: the job ended meanwhile. Before: "Not cancelled: it had finished." whatever it was.
  const [{ id }] = await client.enqueueMany([{ definition: 'ok', payload: { n: 10 }, runAt: new Date(Date.now() + 3_600_000) }]);
  await page.goto(`${dashboard.url}/jobs/${id}`);
  await client.cancel(id);
  await page.click('button[data-action="cancel"]');
  expect(await page.locator('.flash').innerText()).toBe(`Not cancelled: job ${id} is cancelled: only Ready, Waiting or Executing jobs are cancelled.`);
  // A delete that deleted nothing stays on the job's page.
  await page.goto(`${dashboard.url}/jobs/${ids.big}`);
  await page.locator('form:has(button[data-action="delete"]) input[name="id"]').evaluate((el, v) => void ((el as unknown as { value: string }).value = v), huge);
  await page.click('button[data-action="delete"]');
  expect(new URL(page.url()).pathname).toBe(`/jobs/${ids.big}`);
  expect(await page.locator('.flash').innerText()).toBe(`Not deleted: no job ${huge} in namespace "default".`);
  // No positive integer: the client's ConfigError, a 400 naming it, nothing changed.
  await page.goto(`${dashboard.url}/jobs/${ids.big}`);
  await page.locator('form:has(button[data-action="retry"]) input[name="id"]').evaluate((el) => void ((el as unknown as { value: string }).value = '12x'));
  const [bad] = await Promise.all([page.waitForNavigation(), page.click('button[data-action="retry"]')]);
  expect(bad?.status()).toBe(400);
  expect(await page.locator('#error').innerText()).toContain('a job id is a positive integer');
  expect(logged.filter((l) => l.component === 'dashboard' && l.id === huge).map((l) => [l.action, l.changed, l.status])).toEqual([
    ['cancel', 0, null],
    ['delete', 0, null],
  ]);
});

browserTest('the schedules view shows each schedule with its cron and fires; the alerts view the open alerts first, then the resolved', async () => {
  await client.schedules.add('ok', { name: 'nightly-ok', cron: '0 3 * * *', timeZone: 'Europe/Berlin', payload: { n: 4 } }, { force: true });
  // Alerts as sys.alerts leaves them in acta.alerts (docs/alerts.md): one open, one resolved.
  await db.query(
    `insert into acta.alerts (namespace, rule, subject, raised_at, resolved_at, detail) values
       ('default', 'worker_dead', $1, now() - interval '9 minutes', now() - interval '2 minutes', null),
       ('default', 'oldest_ready', 'ok', now() - interval '1 minute', null, '{"ageMs": 360000}')`,
    [ids.dead],
  );
  await page.goto(`${dashboard.url}/`);
  await page.click('header >> text=Schedules');
  await expect(page.locator('#schedules tr[data-schedule="nightly-ok"]').innerText()).resolves.toMatch(/nightly-ok[\s\S]*ok[\s\S]*0 3 \* \* \* Europe\/Berlin[\s\S]*latest[\s\S]*runtime/);
  await shot('schedules');
  await page.click('header >> text=Alerts');
  const rows = page.locator('#alerts tbody tr');
  expect(await rows.count()).toBe(2);
  await expect(rows.nth(0).innerText()).resolves.toMatch(/oldest_ready[\s\S]*ok[\s\S]*open[\s\S]*ageMs/);
  await expect(rows.nth(1).innerText()).resolves.toMatch(new RegExp(`worker_dead[\\s\\S]*${ids.dead}[\\s\\S]*resolved`));
  await expect(page.locator('main > p').first().innerText()).resolves.toBe('1 open.');
  // No worker here runs sys.alerts: the page says so under the count, as acta alerts does (test/dashboard/alertsPage.test.ts).
  await expect(page.locator('[data-note]').allInnerTexts()).resolves.toEqual([
    'sys.alerts is not scheduled in namespace "default": no worker has run it there (acta worker --alerts), so no rule is evaluated',
  ]);
  await shot('alerts');
});
