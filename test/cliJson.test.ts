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
