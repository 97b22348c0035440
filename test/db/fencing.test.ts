// The SQL functions through their TS wrappers (src/db/jobs.ts, executions.ts, workers.ts), on real PostgreSQL: the
// (job_id, execution) fence on every write, the heartbeat's three answers, recovery, and the
// claim's order. No worker runs here: each step is one call, so every state is exact.
import { randomUUID } from 'node:crypto';
import { createClient } from '../../src';
import { completeExecutions } from '../../src/db/executions';
import { claimJobs, recoverJobs } from '../../src/db/jobs';
import type { CompletionRow } from '../../src/db/types';
import { heartbeat } from '../../src/db/workers';
import { useTestDatabase } from '../helpers/db';

const { db } = useTestDatabase();
beforeEach(() => db.query('truncate acta.jobs, acta.succeeded_jobs, acta.executions'));

const LEASE_MS = 60_000;
const worker = randomUUID();

/** The whole job row, to prove a write changed nothing (a success's row is in acta.succeeded_jobs: acta.all_jobs shows both). */
const jobRow = async (id: string) => (await db.query('select * from acta.all_jobs where id = $1', [id])).rows[0];
const executions = async (id: string) =>
  (await db.query<{ execution: number; outcome: string; charged: boolean; worker_id: string | null }>(
    'select execution, outcome, charged, worker_id from acta.all_executions where job_id = $1 order by execution',
    [id],
  )).rows;

async function enqueueAndClaim(payload: unknown = {}): Promise<{ id: string; execution: number }> {
  const { id } = await createClient({ force: true, db }).enqueue('fenced', payload);
  const { rows } = await claimJobs(db, { namespace: 'default', workerId: worker, definitions: ['fenced'], limit: 1, leaseMs: LEASE_MS });
  expect(rows.map((r) => r.id)).toEqual([id]);
  return { id, execution: rows[0].execution };
}

const success = (id: string, execution: number): CompletionRow => ({ id, execution, outcome: 'succeeded', result: '{"ok":true}', error: null, retryDelayMs: 0 });

test('the claim moves the row straight to Executing: execution + 1, lease on the database clock, holder set', async () => {
  const { id, execution } = await enqueueAndClaim({ a: 1 });
  expect(execution).toBe(1);
  const { rows } = await db.query<{ status: string; lease_holder: string; lease_s: number; claimed_now: boolean }>(
    `select status, lease_holder, extract(epoch from lease_expires_at - claimed_at)::float8 as lease_s,
            claimed_at <= now() as claimed_now
       from acta.jobs where id = $1`,
    [id],
  );
  expect(rows[0]).toEqual({ status: 'executing', lease_holder: worker, lease_s: LEASE_MS / 1000, claimed_now: true });
  // A claimed row is not claimed again.
  const again = await claimJobs(db, { namespace: 'default', workerId: randomUUID(), definitions: ['fenced'], limit: 5, leaseMs: LEASE_MS });
  expect(again.rows).toEqual([]);
  expect(again.nextDueInMs).toBeNull();
});

test('a completion with the right execution from another worker changes nothing: the fence is (job, execution, holder)', async () => {
  // The case it guards: a claim the server lost in a crash after answering it. The row's next
  // claim reuses the execution number, never the holder.
  const { id, execution } = await enqueueAndClaim();
  const before = await jobRow(id);
  const acks = await completeExecutions(db, randomUUID(), [success(id, execution)]);
  expect(acks).toEqual([{ id, execution, status: 'stale' }]);
  expect(await jobRow(id)).toEqual(before);
  expect(await executions(id)).toEqual([]);
  expect(await completeExecutions(db, worker, [success(id, execution)])).toEqual([{ id, execution, status: 'succeeded' }]);
});

test('a completion carrying a wrong execution number changes nothing and is reported stale', async () => {
  const { id, execution } = await enqueueAndClaim();
  const before = await jobRow(id);
  const acks = await completeExecutions(db, worker, [success(id, execution + 1), { ...success(id, execution - 1), outcome: 'failed', result: null, error: '{"message":"x"}' }]);
  expect(acks).toEqual([
    { id, execution: execution + 1, status: 'stale' },
    { id, execution: execution - 1, status: 'stale' },
  ]);
  expect(await jobRow(id)).toEqual(before);
  expect(await executions(id)).toEqual([]);
  // The right execution still lands.
  expect(await completeExecutions(db, worker, [success(id, execution)])).toEqual([{ id, execution, status: 'succeeded' }]);
  // And a second completion of the same attempt is stale: the row has moved on.
  const after = await jobRow(id);
  expect(await completeExecutions(db, worker, [success(id, execution)])).toEqual([{ id, execution, status: 'stale' }]);
  expect(await jobRow(id)).toEqual(after);
  expect(await executions(id)).toEqual([{ execution: 1, outcome: 'succeeded', charged: true, worker_id: worker }]);
});

test('a heartbeat for a wrong execution renews nothing and reports the pair lost; a locked row is reported locked', async () => {
  const { id, execution } = await enqueueAndClaim();
  const before = await jobRow(id);
  const wrong = await heartbeat(db, { workerId: worker, namespace: 'default', held: [{ id, execution: execution + 1, started: true }], leaseMs: 5 * LEASE_MS });
  expect(wrong).toMatchObject({ renewed: [], locked: [], lost: [{ id, execution: execution + 1, started: true }] });
  expect(await jobRow(id)).toEqual(before);

  // Another transaction holds the row (e.g. this worker's own completion write): 'locked', nothing changes.
  await db.transaction(async (tx) => {
    await tx.query('select 1 from acta.jobs where id = $1 for update', [id]);
    const locked = await heartbeat(db, { workerId: worker, namespace: 'default', held: [{ id, execution, started: true }], leaseMs: 5 * LEASE_MS });
    expect(locked).toMatchObject({ renewed: [], locked: [{ id, execution }], lost: [] });
  });
  expect(await jobRow(id)).toEqual(before);

  // The right pair is renewed: the lease moves to now() + lease on the database clock, started is recorded.
  const ok = await heartbeat(db, { workerId: worker, namespace: 'default', held: [{ id, execution, started: true }], leaseMs: 5 * LEASE_MS });
  expect(ok).toMatchObject({ renewed: [{ id, execution }], locked: [], lost: [] });
  const { rows } = await db.query<{ started: boolean; lease_s: number }>(
    'select started, extract(epoch from lease_expires_at - now())::float8 as lease_s from acta.jobs where id = $1',
    [id],
  );
  expect(rows[0].started).toBe(true);
  expect(rows[0].lease_s).toBeGreaterThan(4 * (LEASE_MS / 1000));
});

test('a completion for an attempt that recovery took back is stale: the row and the ledger stay as recovery left them', async () => {
  const { id, execution } = await enqueueAndClaim();
  await heartbeat(db, { workerId: worker, namespace: 'default', held: [{ id, execution, started: true }], leaseMs: LEASE_MS });
  await db.query(`update acta.jobs set lease_expires_at = now() - interval '1 second' where id = $1`, [id]);

  const recovered = await recoverJobs(db, { namespace: 'default', deadAfterMs: 10 * LEASE_MS });
  expect(recovered).toEqual([{ id, execution, status: 'ready', charged: true }]);
  const afterRecovery = await jobRow(id);
  expect(afterRecovery).toMatchObject({ status: 'ready', attempts: 1, execution: 1, lease_holder: null, lease_expires_at: null });
  expect(afterRecovery.error).toMatchObject({ name: 'WorkerLost', workerId: worker });
  expect(await executions(id)).toEqual([{ execution: 1, outcome: 'lost', charged: true, worker_id: worker }]);

  // The old attempt's late completion, of any shape: stale, nothing changes, no ledger row.
  const late = await completeExecutions(db, worker, [
    success(id, execution),
    { id, execution, outcome: 'handed_back', result: null, error: null, retryDelayMs: 0 },
  ]);
  expect(late.map((a) => a.status)).toEqual(['stale', 'stale']);
  expect(await jobRow(id)).toEqual(afterRecovery);
  expect(await executions(id)).toHaveLength(1);
  // Its heartbeat says lost (the worker cancels the attempt).
  const hb = await heartbeat(db, { workerId: worker, namespace: 'default', held: [{ id, execution, started: true }], leaseMs: LEASE_MS });
  expect(hb.lost).toEqual([{ id, execution, started: true }]);

  // The next claim is execution 2; the old execution stays fenced out after it too.
  const other = randomUUID();
  const { rows } = await claimJobs(db, { namespace: 'default', workerId: other, definitions: ['fenced'], limit: 1, leaseMs: LEASE_MS });
  expect(rows).toMatchObject([{ id, execution: 2, attempts: 1 }]);
  expect(await completeExecutions(db, worker, [success(id, 1)])).toEqual([{ id, execution: 1, status: 'stale' }]);
  expect(await completeExecutions(db, other, [success(id, 2)])).toEqual([{ id, execution: 2, status: 'succeeded' }]);
  expect(await executions(id)).toEqual([
    { execution: 1, outcome: 'lost', charged: true, worker_id: worker },
    { execution: 2, outcome: 'succeeded', charged: true, worker_id: other },
  ]);
});

test('recovery returns an attempt that never started uncharged, and leaves unexpired leases alone', async () => {
  const a = await enqueueAndClaim({ n: 'a' });
  const b = await enqueueAndClaim({ n: 'b' });
  await db.query(`update acta.jobs set lease_expires_at = now() - interval '1 second' where id = $1`, [a.id]);
  const recovered = await recoverJobs(db, { namespace: 'default', deadAfterMs: 10 * LEASE_MS });
  expect(recovered).toEqual([{ id: a.id, execution: 1, status: 'ready', charged: false }]);
  expect(await jobRow(a.id)).toMatchObject({ status: 'ready', attempts: 0, uncharged_returns: 1, error: null });
  expect(await executions(a.id)).toEqual([{ execution: 1, outcome: 'lost_uncharged', charged: false, worker_id: worker }]);
  expect(await jobRow(b.id)).toMatchObject({ status: 'executing', execution: 1 });
});

test("an 'expired' completion (the claim arrived after its deadline) returns the row uncharged and counts an uncharged return", async () => {
  const { id, execution } = await enqueueAndClaim({ n: 'expired' });
  expect(await completeExecutions(db, worker, [{ id, execution, outcome: 'expired', result: null, error: null, retryDelayMs: 0 }])).toEqual([
    { id, execution, status: 'ready' },
  ]);
  expect(await jobRow(id)).toMatchObject({ status: 'ready', attempts: 0, uncharged_returns: 1, lease_holder: null, error: null });
  expect(await executions(id)).toEqual([{ execution, outcome: 'expired', charged: false, worker_id: worker }]);
  // The next claim tells the worker how many uncharged returns the job has had.
  const { rows } = await claimJobs(db, { namespace: 'default', workerId: worker, definitions: ['fenced'], limit: 10, leaseMs: LEASE_MS });
  expect(rows).toMatchObject([{ id, execution: execution + 1, unchargedReturns: 1 }]);
});

test('one complete_executions call applies a batch of mixed shapes and fences each element on its own', async () => {
  const client = createClient({ force: true, db });
  await client.enqueueMany([
    { definition: 'fenced', payload: { n: 1 } },
    { definition: 'fenced', payload: { n: 2 } },
    { definition: 'fenced', payload: { n: 3 }, maxAttempts: 1 },
    { definition: 'fenced', payload: { n: 4 } },
    { definition: 'fenced', payload: { n: 5 } },
  ]);
  const { rows } = await claimJobs(db, { namespace: 'default', workerId: worker, definitions: ['fenced'], limit: 10, leaseMs: LEASE_MS });
  const [ok, retry, last, back, stale] = [...rows].sort((x, y) => Number(x.id) - Number(y.id));
  const err = '{"name":"Error","message":"nope"}';
  const acks = await completeExecutions(db, worker, [
    success(ok.id, 1),
    { id: retry.id, execution: 1, outcome: 'failed', result: null, error: err, retryDelayMs: 60_000 },
    { id: last.id, execution: 1, outcome: 'failed', result: null, error: err, retryDelayMs: 60_000 },
    { id: back.id, execution: 1, outcome: 'handed_back', result: null, error: null, retryDelayMs: 0 },
    success(stale.id, 7),
  ]);
  expect(acks).toEqual([
    { id: ok.id, execution: 1, status: 'succeeded' },
    { id: retry.id, execution: 1, status: 'ready' },
    { id: last.id, execution: 1, status: 'failed' },
    { id: back.id, execution: 1, status: 'ready' },
    { id: stale.id, execution: 7, status: 'stale' },
  ]);
  const { rows: jobs } = await db.query<{ id: string; status: string; attempts: number; retry_in_s: number; result: unknown }>(
    `select id, status, attempts, extract(epoch from run_at - now())::float8 as retry_in_s, result
       from acta.all_jobs order by id`,
  );
  expect(jobs.map((j) => [j.status, j.attempts, j.result])).toEqual([
    ['succeeded', 1, { ok: true }],
    ['ready', 1, null],
    ['failed', 1, null],
    ['ready', 0, null],
    ['executing', 0, null],
  ]);
  expect(jobs[1].retry_in_s).toBeGreaterThan(50); // run_at = now() + 60 s back-off
  expect(jobs[3].retry_in_s).toBeLessThanOrEqual(0); // handed back: due at once
  const { rows: ledger } = await db.query<{ job_id: string; outcome: string; charged: boolean }>(
    'select job_id, outcome, charged from acta.all_executions order by job_id',
  );
  expect(ledger).toEqual([
    { job_id: ok.id, outcome: 'succeeded', charged: true },
    { job_id: retry.id, outcome: 'failed', charged: true },
    { job_id: last.id, outcome: 'failed_final', charged: true },
    { job_id: back.id, outcome: 'handed_back', charged: false },
  ]);
});

test('a batch with no result, no error or no delay anywhere (sent as null arrays) applies each element as a batch that has them', async () => {
  const client = createClient({ force: true, db });
  await client.enqueueMany([1, 2, 3].map((n) => ({ definition: 'fenced', payload: { n } })));
  const { rows } = await claimJobs(db, { namespace: 'default', workerId: worker, definitions: ['fenced'], limit: 10, leaseMs: LEASE_MS });
  const [a, b, c] = [...rows].sort((x, y) => Number(x.id) - Number(y.id));
  const err = '{"message":"once"}';
  // No results and no delays: those two go as null arrays; the errors as an array with a null.
  const acks = await completeExecutions(db, worker, [
    { id: a.id, execution: 1, outcome: 'failed', result: null, error: err, retryDelayMs: 0 },
    { id: b.id, execution: 1, outcome: 'handed_back', result: null, error: null, retryDelayMs: 0 },
    { id: c.id, execution: 1, outcome: 'succeeded', result: null, error: null, retryDelayMs: 0 },
  ]);
  expect(acks.map((x) => x.status)).toEqual(['ready', 'ready', 'succeeded']);
  const { rows: jobs } = await db.query<{ status: string; attempts: number; error: unknown; result: unknown; due_now: boolean }>(
    'select status, attempts, error, result, run_at <= now() as due_now from acta.all_jobs order by id',
  );
  expect(jobs).toEqual([
    { status: 'ready', attempts: 1, error: { message: 'once' }, result: null, due_now: true },
    { status: 'ready', attempts: 0, error: null, result: null, due_now: true },
    { status: 'succeeded', attempts: 1, error: null, result: null, due_now: true },
  ]);
});

test('a claim with a null argument claims nothing and answers no row; a negative limit is refused', async () => {
  // The case it guards (SQL callers): a null limit was no LIMIT at all, every due row claimed; a null
  // lease left rows Executing with no lease, which recovery never takes back.
  await createClient({ force: true, db }).enqueueMany([1, 2, 3].map((n) => ({ definition: 'fenced', payload: { n } })));
  const call = (args: unknown[]) => db.query(`select * from acta.claim_jobs($1, $2, $3, $4, $5)`, args);
  for (const args of [
    ['default', worker, ['fenced'], null, LEASE_MS],
    ['default', worker, ['fenced'], 8, null],
    ['default', null, ['fenced'], 8, LEASE_MS],
    [null, worker, ['fenced'], 8, LEASE_MS],
    ['default', worker, null, 8, LEASE_MS],
  ]) {
    expect((await call(args)).rows).toEqual([]);
  }
  await expect(call(['default', worker, ['fenced'], -1, LEASE_MS])).rejects.toMatchObject({ code: '22023' }); // p_limit must be at least 1
  const { rows } = await db.query<{ status: string; n: number }>(`select status, count(*)::int as n from acta.jobs group by status`);
  expect(rows).toEqual([{ status: 'ready', n: 3 }]);
});

test('the claim returns its rows in claim order: priority, then due time, then id', async () => {
  const client = createClient({ force: true, db });
  // Enough rows, with statistics, for the planner to consider a hash join in the claim's UPDATE.
  const priorities = Array.from({ length: 3000 }, (_, i) => (i * 7919) % 13);
  const enqueued = await client.enqueueMany(priorities.map((priority, i) => ({ definition: 'fenced', payload: { i }, priority })));
  await db.query('analyze acta.jobs');
  const { rows } = await claimJobs(db, { namespace: 'default', workerId: worker, definitions: ['fenced'], limit: 2000, leaseMs: LEASE_MS });
  const expected = enqueued
    .map((e, i) => ({ id: e.id, priority: priorities[i], i }))
    .sort((x, y) => y.priority - x.priority || x.i - y.i)
    .map((e) => e.id)
    .slice(0, 2000);
  expect(rows.map((r) => r.id)).toEqual(expected);
});

test('complete_executions stores result and error texts as given (quotes, backslashes, non-ASCII, JSON null) and clamps retry delays to the integer column', async () => {
  const client = createClient({ force: true, db });
  await client.enqueueMany([1, 2, 3, 4].map((n) => ({ definition: 'fenced', payload: { n } })));
  const { rows } = await claimJobs(db, { namespace: 'default', workerId: worker, definitions: ['fenced'], limit: 10, leaseMs: LEASE_MS });
  const [a, b, c, d] = [...rows].sort((x, y) => Number(x.id) - Number(y.id));
  const tricky = { s: 'say "hi"\\n \\ back\u00e9\u{1F600}', list: [1, null, { x: [] }] };
  const err = JSON.stringify({ name: 'Error', message: 'a "quoted" \\ message' });
  const acks = await completeExecutions(db, worker, [
    { id: a.id, execution: 1, outcome: 'succeeded', result: JSON.stringify(tricky), error: null, retryDelayMs: 0 },
    { id: b.id, execution: 1, outcome: 'succeeded', result: 'null', error: null, retryDelayMs: 0 },
    { id: c.id, execution: 1, outcome: 'failed', result: null, error: err, retryDelayMs: Number.NaN },
    { id: d.id, execution: 1, outcome: 'failed', result: null, error: err, retryDelayMs: 2 ** 40 },
  ]);
  expect(acks.map((x) => x.status)).toEqual(['succeeded', 'succeeded', 'ready', 'ready']);
  const { rows: jobs } = await db.query<{ result: unknown; result_type: string | null; error: unknown; retry_in_s: number }>(
    `select result, jsonb_typeof(result) as result_type, error, extract(epoch from run_at - now())::float8 as retry_in_s
       from acta.all_jobs order by id`,
  );
  expect(jobs[0].result).toEqual(tricky);
  expect(jobs[1].result_type).toBe('null'); // a handler's undefined is stored as JSON null, not SQL NULL
  expect(jobs[2].error).toEqual(JSON.parse(err));
  expect(jobs[2].retry_in_s).toBeLessThanOrEqual(0); // NaN delay: 0
  expect(jobs[3].retry_in_s).toBeGreaterThan(2_147_483 - 60); // clamped to 2^31 - 1 ms (~24.8 days)
  expect(jobs[3].retry_in_s).toBeLessThan(2_147_484);
});
