// The command line's --json outputs against a real PostgreSQL, read as an operator would script
// them: each names a thing as the client's own objects do (docs/operating.md, "Admin commands"), and
// carries what the text output says. Runs the built bin (`npm test` builds first).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createClient, type Client, type Db } from '../src';
import { jsonLines, ROOT, runActa } from './helpers/cli';
import { createTestDatabase, type TestDatabase } from './helpers/db';

let tdb: TestDatabase;
let db: Db;
let client: Client;

beforeAll(async () => {
  if (!fs.existsSync(path.join(ROOT, 'dist', 'src', 'ops', 'cli', 'main.js'))) throw new Error('dist/ is missing: run `npm run build` (npm test does)');
  tdb = await createTestDatabase();
  db = tdb.open();
  client = createClient({ db, namespace: 'cli-json', force: true });
});
afterAll(async () => {
  await tdb.drop();
});

/** Runs `acta <args>` on the test's database. */
const acta = (args: string[]) => runActa(args, { ...process.env, DATABASE_URL: tdb.url, ACTA_LOG_LEVEL: 'warn' });
const ns = ['--namespace', 'cli-json'];

test('a pause is named alike in every JSON output: acta pause, namespaces and why --json give the client\'s PauseRecord (pausedBy, pausedAt)', async () => {
  const { id } = await client.enqueue('cli-json-job', {});
  await client.pause({ definition: 'cli-json-job', by: 'carol', reason: 'incident 3' });
  const paused = JSON.parse((await acta(['pause', '--definition', 'cli-json-job', '--force', '--json', ...ns])).stdout) as Record<string, unknown>;
  const { created, ...record } = paused;
  expect(created).toBe(false);
  expect(record).toEqual({ namespace: 'cli-json', definition: 'cli-json-job', pausedBy: 'carol', reason: 'incident 3', pausedAt: expect.any(String) });
  const spaces = jsonLines((await acta(['namespaces', '--json'])).stdout);
  expect(spaces.find((n) => n.name === 'cli-json')?.pauses).toEqual([record]);
  // Before: why's pause was { definition, by, reason, since }.
  const why = JSON.parse((await acta(['why', id, '--json', ...ns])).stdout) as { reasons: { cause: string; pause?: unknown }[] };
  expect(why.reasons.find((r) => r.cause === 'paused')?.pause).toEqual(record);
  // The CLI's JSON is the client's object as JSON.
  expect(JSON.parse(JSON.stringify((await client.why(id))?.reasons[0].pause))).toEqual(record);
  await client.resume({ definition: 'cli-json-job' });
});

test('acta jobs retry|cancel|delete --json: each unchanged id with its status and why, the text lines\' words; ids read as `acta job` reads them (leading zeros, beyond bigint: no job)', async () => {
  const [a, b] = await client.enqueueMany([{ definition: 'cli-json-job', payload: {} }, { definition: 'cli-json-job', payload: {} }]);
  await client.cancel(b.id);
  const huge = '9'.repeat(20);
  // 35 characters, the job itself: before, the client's own id rule (at most 30 digits) refused it as "not a positive integer".
  const padded = `${'0'.repeat(35 - a.id.length)}${a.id}`;
  const text = await acta(['jobs', 'retry', a.id, b.id, huge, ...ns]);
  expect(text).toEqual({
    code: 1,
    stdout: `retried: 1 (${b.id})\n`,
    stderr: `acta: jobs retry: job ${a.id} is ready: only Failed or Cancelled jobs are retried\nacta: jobs retry: no job ${huge} in namespace "cli-json"\n`,
  });
  const json = await acta(['jobs', 'delete', padded, huge, '--json', ...ns]);
  expect(json.code).toBe(1);
  expect(JSON.parse(json.stdout)).toEqual({
    deleted: [],
    unchanged: [padded, huge],
    reasons: [
      { id: padded, status: 'ready', message: `job ${padded} is ready: only finished jobs (Succeeded, Failed, Cancelled) are deleted: cancel it first` },
      { id: huge, status: null, message: `no job ${huge} in namespace "cli-json"` },
    ],
  });
  expect(json.stderr.trim().split('\n')).toEqual((JSON.parse(json.stdout).reasons as { message: string }[]).map((r) => `acta: jobs delete: ${r.message}`));
  expect(JSON.parse((await acta(['jobs', 'cancel', padded, b.id, '--json', ...ns])).stdout)).toEqual({ cancelled: [a.id, b.id].sort((x, y) => Number(y) - Number(x)), requested: [], unchanged: [], reasons: [] });
  // The client reads them alike.
  expect(await client.deleteJobs({ ids: [padded, huge, `0${'9'.repeat(40)}`] })).toEqual([a.id]);
});

test('acta signal says in words why a signal was not delivered, the client\'s reason after it (before: the reason alone, "…: not_found")', async () => {
  const ended = await client.enqueue('cli-json-job', {});
  await client.cancel(ended.id);
  const huge = '9'.repeat(20);
  expect(await acta(['signal', huge, 'go', ...ns])).toEqual({ code: 1, stdout: '', stderr: `acta: signal "go" not delivered to job ${huge}: no job ${huge} in namespace "cli-json" (not_found)\n` });
  expect(await acta(['signal', ended.id, 'go', ...ns])).toEqual({ code: 1, stdout: '', stderr: `acta: signal "go" not delivered to job ${ended.id}: job ${ended.id} has ended: a signal reaches a job until it ends (ended)\n` });
  const waiting = await client.enqueue('cli-json-job', {}, { idempotencyKey: 'cli-json-k' });
  expect(JSON.parse((await acta(['signal', '--key', 'cli-json-k', 'go', '--idempotency-key', 'once', ...ns])).stdout)).toEqual({ delivered: true, jobId: waiting.id, consumed: false });
  expect((await acta(['signal', waiting.id, 'go', '--idempotency-key', 'once', ...ns])).stderr).toBe(
    `acta: signal "go" not delivered to job ${waiting.id}: a signal "go" of idempotency key "once" was delivered to job ${waiting.id} before (duplicate)\n`,
  );
});

test('acta schedule names the namespace it did not find a schedule in, as "no job … in namespace …" does (before: "in the namespace")', async () => {
  for (const verb of ['pause', 'resume', 'trigger', 'remove', 'list']) {
    expect({ verb, ...(await acta(['schedule', verb, 'nope', ...ns])) }).toEqual({ verb, code: 1, stdout: '', stderr: 'acta: no schedule "nope" in namespace "cli-json"\n' });
  }
});

test("acta job <id> --children | --signals: a page at a time (--limit, --cursor from the page before), as the dashboard's job page lists them; a table, or --json one object per line", async () => {
  const later = { runAt: new Date(Date.now() + 3_600_000) }; // no worker takes them
  const parent = await client.enqueue('cli-json-parent', {}, later);
  const kids = await client.enqueueMany([1, 2, 3].map((i) => ({ definition: 'cli-json-child', payload: { i }, ...later })));
  await db.query('update acta.jobs set parent_id = $1 where id = any ($2::bigint[])', [parent.id, kids.map((k) => k.id)]);
  await client.cancel(kids[1].id);
  const sent = [];
  for (const [name, payload] of [['a', { n: 1 }], ['b', null], ['c', 'x'.repeat(3_000)]] as const) sent.push(await client.signal(parent.id, name, payload, { idempotencyKey: `k-${name}` }));
  const { rows: signalIds } = await db.query<{ id: string }>('select id::text as id from acta.signals where job_id = $1 order by id', [parent.id]);
  await db.query(`update acta.signals set consumed_at = now(), consumed_step = 'acta:signal:0' where id = $1`, [signalIds[0].id]);

  const first = await acta(['job', parent.id, '--children', '--limit', '2', '--json', ...ns]);
  expect(first).toMatchObject({ code: 0, stderr: '' });
  const lines = jsonLines(first.stdout);
  expect(lines).toEqual([
    { id: kids[0].id, definition: 'cli-json-child', status: 'ready', failParent: false, createdAt: expect.any(String), finishedAt: null, errorMessage: null },
    { id: kids[1].id, definition: 'cli-json-child', status: 'cancelled', failParent: false, createdAt: expect.any(String), finishedAt: expect.any(String), errorMessage: null },
    { nextCursor: kids[1].id },
  ]);
  expect(jsonLines((await acta(['job', parent.id, '--children', '--cursor', kids[1].id, '--json', ...ns])).stdout).map((c) => c.id)).toEqual([kids[2].id]);
  const table = await acta(['job', parent.id, '--children', '--limit', '2', ...ns]);
  expect(table).toMatchObject({ code: 0, stderr: '' });
  expect(table.stdout.split('\n')[0]).toMatch(/^ID +DEFINITION +STATUS +CREATED +FINISHED +ERROR$/);
  expect(table.stdout).toMatch(new RegExp(`\\n${kids[1].id} +cli-json-child +cancelled `));
  expect(table.stdout).toMatch(new RegExp(`\\n3 child jobs, in the order spawned \\(a deleted child is not listed\\)\\nnext page: --cursor ${kids[1].id}\\n$`));

  const signals = jsonLines((await acta(['job', parent.id, '--signals', '--json', ...ns])).stdout);
  expect(signals).toEqual([
    { id: signalIds[0].id, name: 'a', sentAt: expect.any(String), consumedAt: expect.any(String), consumedStep: 'acta:signal:0', idempotencyKey: 'k-a', payload: { text: '{"n": 1}', bytes: 8, truncated: false } },
    { id: signalIds[1].id, name: 'b', sentAt: expect.any(String), consumedAt: null, consumedStep: null, idempotencyKey: 'k-b', payload: { text: 'null', bytes: 4, truncated: false } },
    { id: signalIds[2].id, name: 'c', sentAt: expect.any(String), consumedAt: null, consumedStep: null, idempotencyKey: 'k-c', payload: { text: `"${'x'.repeat(2_047)}`, bytes: 3_002, truncated: true } },
  ]);
  const signalTable = await acta(['job', parent.id, '--signals', '--limit', '2', ...ns]);
  expect(signalTable.stdout.split('\n')[0]).toMatch(/^ID +SIGNAL +SENT +CONSUMED +IDEMPOTENCY KEY +PAYLOAD$/);
  expect(signalTable.stdout).toMatch(new RegExp(`\\n${signalIds[1].id} +b +\\S+ +pending +k-b +null\\n`));
  expect(signalTable.stdout).toMatch(new RegExp(`\\n3 signals, 2 pending, in the order sent\\nnext page: --cursor ${signalIds[1].id}\\n$`));

  // Refused: no such job in the namespace; both lists at once; a page's options without a list; a cursor that is no id.
  expect(await acta(['job', parent.id, '--children'])).toEqual({ code: 1, stdout: '', stderr: `acta: no job ${parent.id} in namespace "default"\n` });
  expect((await acta(['job', parent.id, '--children', '--signals', ...ns])).stderr).toMatch(/^error: option '--children' cannot be used with option '--signals'/);
  expect(await acta(['job', parent.id, '--limit', '2', ...ns])).toEqual({ code: 1, stdout: '', stderr: 'acta: job: --limit and --cursor page --children or --signals: give one of them\n' });
  expect((await acta(['job', parent.id, '--signals', '--cursor', 'abc', ...ns])).stderr).toMatch(/^error: option '--cursor <id>' argument 'abc' is invalid/);
});
