// sys.retention on a real server (docs/retention.md): what a pass deletes and keeps, judged by the
// database's clock; a batch that times out shrinks and the pass still ends; claims and completions
// beside a pass wait for nothing, and a pass waits for no locked row.
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { createPgDb } from '../../src/db/pgDb';
import { sqlLedger } from '../../src/ledger';
import { DEFAULT_CANCELLED_AGE_MS, DEFAULT_FAILED_AGE_MS, DEFAULT_SUCCEEDED_AGE_MS, retentionDefinition, retentionSettings, runRetentionPass } from '../../src/recurring/retention';
import { ConfigError, createClient, createWorker, defineJob } from '../../src';
import { waitFor } from '../helpers/wait';
import { silentLogger } from '../helpers/silentLogger';
import type { Queryable } from '../../src/db/Db';
import { useTestDatabase } from '../helpers/db';

const { db, tdb } = useTestDatabase();
let ns: string;
beforeEach(() => {
  ns = `retention-${randomUUID().slice(0, 8)}`;
});

/**
 * Inserts a job of `status` in the namespace, finished `finishedAgoMs` before the database's now()
 * (null: not finished), with one attempt and one step; its id.
 */
async function row(status: string, finishedAgoMs: number | null, more: { namespace?: string; parentId?: string } = {}): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    `insert into acta.jobs (namespace, definition, payload, status, execution, attempts, finished_at, claimed_at, parent_id)
     values ($1, 'd', '{}', $2, 1, 1, now() - $3::bigint * interval '1 millisecond', now() - interval '30 days', $4)
     returning id`,
    [more.namespace ?? ns, status, finishedAgoMs, more.parentId ?? null],
  );
  const id = rows[0].id;
  await db.query(`insert into acta.executions (job_id, execution, claimed_at, outcome, charged) values ($1, 1, now() - interval '30 days', 'succeeded', true)`, [id]);
  await db.query(`insert into acta.steps (job_id, name, execution, result) values ($1, 's', 1, '1')`, [id]);
  return id;
}

/** `n` rows of `status` (default Succeeded) finished `finishedAgoMs` ago, each with an attempt and a step, in one statement. */
async function succeededRows(n: number, finishedAgoMs: number, namespace = ns, status = 'succeeded'): Promise<void> {
  await db.query(
    `with j as (
       insert into acta.jobs (namespace, definition, payload, status, execution, attempts, finished_at, claimed_at)
       select $1, 'd', '{}', $4, 1, 1, now() - $3::bigint * interval '1 millisecond', now() - interval '30 days' from generate_series(1, $2)
       returning id
     ), e as (
       insert into acta.executions (job_id, execution, claimed_at, outcome, charged) select id, 1, now(), 'succeeded', true from j
     )
     insert into acta.steps (job_id, name, execution, result) select id, 's', 1, '1' from j`,
    [namespace, n, finishedAgoMs, status],
  );
}

async function remaining(ids: string[]): Promise<{ jobs: string[]; executions: string[]; steps: string[] }> {
  const q = async (sql: string) => (await db.query<{ id: string }>(sql, [ids])).rows.map((r) => r.id).sort((a, b) => Number(a) - Number(b));
  return {
    jobs: await q('select id::text as id from acta.jobs where id = any ($1::bigint[])'),
    executions: await q('select job_id::text as id from acta.executions where job_id = any ($1::bigint[])'),
    steps: await q('select job_id::text as id from acta.steps where job_id = any ($1::bigint[])'),
  };
}

const SLACK_MS = 30_000;

test('each state is kept for its age by the database clock: rows just past it go with their attempts and steps; rows inside it, live rows, a child of an unfinished parent and other namespaces stay', async () => {
  const past = [await row('succeeded', DEFAULT_SUCCEEDED_AGE_MS + 1_000), await row('cancelled', DEFAULT_CANCELLED_AGE_MS + 1_000), await row('failed', DEFAULT_FAILED_AGE_MS + 1_000)];
  const inside = [await row('succeeded', DEFAULT_SUCCEEDED_AGE_MS - SLACK_MS), await row('cancelled', DEFAULT_CANCELLED_AGE_MS - SLACK_MS), await row('failed', DEFAULT_FAILED_AGE_MS - SLACK_MS)];
  // A failed row older than the succeeded and cancelled ages but inside its own.
  inside.push(await row('failed', DEFAULT_SUCCEEDED_AGE_MS * 2));
  const live = [await row('ready', null), await row('executing', null), await row('waiting', null)];
  const parent = await row('waiting', null);
  const child = await row('succeeded', DEFAULT_SUCCEEDED_AGE_MS * 3, { parentId: parent });
  const elsewhere = await row('succeeded', DEFAULT_SUCCEEDED_AGE_MS * 3, { namespace: `${ns}-other` });

  const result = await runRetentionPass(sqlLedger(db), ns, retentionSettings({}));
  expect(result).toEqual({ deleted: 3, batches: 1, timeouts: 0, batchSize: 1_000, complete: true });
  const all = [...past, ...inside, ...live, parent, child, elsewhere];
  const kept = [...inside, ...live, parent, child, elsewhere].sort((a, b) => Number(a) - Number(b));
  expect(await remaining(all)).toEqual({ jobs: kept, executions: kept, steps: kept });

  // The parent finishes: its child goes at the next pass.
  await db.query(`update acta.jobs set status = 'succeeded', finished_at = now() where id = $1`, [parent]);
  expect((await runRetentionPass(sqlLedger(db), ns, retentionSettings({}))).deleted).toBe(1);
  expect((await remaining([child])).jobs).toEqual([]);
});

test('the payload sets the ages per namespace: succeededMs 0 takes every Succeeded row, null keeps a state for ever; batches loop until fewer rows are due than asked', async () => {
  const fresh = [await row('succeeded', 0), await row('succeeded', 1), await row('succeeded', 5)];
  const failedForever = await row('failed', DEFAULT_FAILED_AGE_MS * 10);
  const settings = retentionSettings({ succeededMs: 0, failedMs: null, batchSize: 2 });
  expect(settings.ages).toEqual({ succeededMs: 0, cancelledMs: DEFAULT_CANCELLED_AGE_MS, failedMs: null });
  const result = await runRetentionPass(sqlLedger(db), ns, settings);
  expect(result).toEqual({ deleted: 3, batches: 2, timeouts: 0, batchSize: 2, complete: true });
  expect(await remaining([...fresh, failedForever])).toEqual({ jobs: [failedForever], executions: [failedForever], steps: [failedForever] });
});

test('a bad payload is a ConfigError and deletes nothing', async () => {
  const id = await row('succeeded', DEFAULT_SUCCEEDED_AGE_MS * 2);
  const definition = retentionDefinition({ ledger: sqlLedger(db), namespace: ns });
  const ctx = { signal: new AbortController().signal, logger: { info() {}, debug() {}, warn() {} } } as never;
  for (const payload of [{ succeededMs: -1 }, { succeededMs: 1.5 }, { batchSize: 0 }, { succeded: 1 }, [1]]) {
    await expect(Promise.resolve().then(() => definition.handler(payload as never, ctx))).rejects.toThrow(ConfigError);
  }
  expect((await remaining([id])).jobs).toEqual([id]);
  expect(await definition.handler(null, ctx)).toMatchObject({ deleted: 1, complete: true });
});

test('a batch that runs past its statement timeout rolls back and the next is half its size; the pass still ends with every due row gone', async () => {
  const ids: string[] = [];
  for (let i = 0; i < 40; i++) ids.push(await row('succeeded', DEFAULT_SUCCEEDED_AGE_MS + 1_000 + i));
  // Another session holds acta.steps, so every batch's delete of its rows' steps waits, until released.
  const blocker = new Client({ connectionString: tdb.url });
  await blocker.connect();
  try {
    await blocker.query('begin');
    await blocker.query('lock table acta.steps in access exclusive mode');
    const pass = runRetentionPass(sqlLedger(db), ns, { ...retentionSettings({}), batchSize: 64, batchTimeoutMs: 100 });
    await new Promise((resolve) => setTimeout(resolve, 450));
    await blocker.query('commit');
    const result = await pass;
    expect(result.timeouts).toBeGreaterThanOrEqual(2);
    expect(result.batchSize).toBe(64 >> result.timeouts || 1);
    expect(result).toMatchObject({ deleted: 40, complete: true });
    expect(await remaining(ids)).toEqual({ jobs: [], executions: [], steps: [] });
  } finally {
    await blocker.end();
  }
});

test('a claim and a completion beside an open batch wait for nothing, and a batch skips a finished row another session holds', async () => {
  await succeededRows(500, DEFAULT_SUCCEEDED_AGE_MS + 1_000);
  const held = await row('succeeded', DEFAULT_SUCCEEDED_AGE_MS + 1_000);
  // Every session of this Db gives up on a lock after 1 s: a wait fails the test instead of passing slowly.
  await db.query(`alter database ${tdb.name} set lock_timeout = '1s'`);
  const strict = createPgDb({ connectionString: tdb.url, max: 2 });
  const pass = new Client({ connectionString: tdb.url });
  await pass.connect();
  try {
    const ledger = sqlLedger(strict);
    const workerId = randomUUID();
    await ledger.registerWorker({ workerId, namespace: ns, hostname: 'h', pid: 1, definitions: ['d'], maxAttempts: [null], leaseMs: 60_000, build: null, policies: {} });
    await ledger.enqueueJobs(ns, { definitions: ['d', 'd'], payloads: ['{}', '{}'], priorities: [null, null], runAts: [null, null], maxAttempts: [null, null], idempotencyKeys: [null, null], concurrencyKeys: [null, null], rateKeys: [null, null], lanes: [null, null] });

    // A session holds a finished row (as acta.watch_job would) while the batch runs.
    const holder = new Client({ connectionString: tdb.url });
    await holder.connect();
    await holder.query('begin');
    await holder.query('select id from acta.jobs where id = $1 for update', [held]);
    await pass.query('begin');
    await pass.query(`select set_config('statement_timeout', '5s', true)`);
    const { rows } = await pass.query<{ n: number }>('select acta.prune_jobs($1, 0, 0, 0, 10000) as n', [ns]);
    expect(rows[0].n).toBe(500);
    await holder.query('commit');
    await holder.end();

    // The batch's transaction is open, its rows deleted and locked: claims and completions go on.
    const claimed = await ledger.claimJobs({ namespace: ns, workerId, definitions: ['d'], limit: 2, leaseMs: 60_000 });
    expect(claimed.rows).toHaveLength(2);
    const acks = await ledger.completeExecutions(
      workerId,
      claimed.rows.map((r) => ({ id: r.id, execution: r.execution, outcome: 'succeeded' as const, result: null, error: null, retryDelayMs: 0 })),
    );
    expect(acks.map((a) => a.status)).toEqual(['succeeded', 'succeeded']);
    await pass.query('commit');
    expect((await remaining([held])).jobs).toEqual([held]);
  } finally {
    await pass.end();
    await strict.close();
    await db.query(`alter database ${tdb.name} reset lock_timeout`);
  }
});

test.each(['fresh', 'analyzed'])('a batch reads its own ranges in order and stops at its limit, whatever the statistics (%s): other namespaces, other states and young rows are outside them', async (stats) => {
  await db.query('truncate acta.jobs, acta.executions, acta.steps');
  await succeededRows(3_000, DEFAULT_SUCCEEDED_AGE_MS * 2, `${ns}-other`); // another namespace's, due there
  await succeededRows(3_000, DEFAULT_SUCCEEDED_AGE_MS - SLACK_MS); // young
  await succeededRows(3_000, DEFAULT_SUCCEEDED_AGE_MS * 3, ns, 'failed'); // inside 7 days
  await succeededRows(25, DEFAULT_SUCCEEDED_AGE_MS * 2); // due
  if (stats === 'analyzed') await db.query('vacuum analyze acta.jobs');
  // The index's counter of entries returned, read before and after the call in one transaction (one
  // backend): PostgreSQL accumulates a backend's counts until it flushes them, about once a second.
  const returned = async (tx: Queryable) => Number((await tx.query<{ n: string }>(`select pg_stat_get_xact_tuples_returned('acta.jobs_finished_idx'::regclass) as n`)).rows[0].n);
  const batch = (limit: number) =>
    db.transaction(async (tx) => {
      const before = await returned(tx);
      const { rows } = await tx.query<{ n: number }>(`select acta.prune_jobs($1, $2, $3, $4, $5) as n`, [ns, DEFAULT_SUCCEEDED_AGE_MS, DEFAULT_CANCELLED_AGE_MS, DEFAULT_FAILED_AGE_MS, limit]);
      return { deleted: rows[0].n, entries: (await returned(tx)) - before };
    });
  const first = await batch(10);
  expect(first.deleted).toBe(10);
  expect(first.entries).toBeLessThanOrEqual(12);
  expect((await batch(100)).deleted).toBe(15);
  // A deleted row's index entry stays until vacuum removes it, and a batch whose range holds it
  // reads it: the 25 rows deleted, never the 9,000 rows of the other populations.
  const idle = await batch(100);
  expect(idle).toMatchObject({ deleted: 0 });
  expect(idle.entries).toBeLessThanOrEqual(25);
});

test('the sys.retention definition runs in a worker like any job: a fire with its payload deletes, its result is the pass', async () => {
  const gone = await row('succeeded', 10 * 60_000);
  const kept = await row('failed', 10 * 60_000);
  const worker = createWorker({ db, namespace: ns, definitions: [retentionDefinition({ ledger: sqlLedger(db), namespace: ns })], logger: silentLogger, listen: false, safetyPollMs: 50 });
  await worker.start();
  try {
    const client = createClient({ db, namespace: ns });
    const { id } = await client.enqueue('sys.retention', { succeededMs: 60_000 });
    expect(await client.result(id, { timeoutMs: 20_000 })).toEqual({ deleted: 1, batches: 1, timeouts: 0, batchSize: 1_000, complete: true });
    expect((await remaining([gone, kept])).jobs).toEqual([kept]);
  } finally {
    await worker.stop();
  }
});

test('retention zero in a worker: with succeededMs 0 each job that succeeds goes in its completion with its attempts and steps; a result awaited is still delivered; a failed one stays', async () => {
  const seen: string[] = [];
  // The awaited job ends once its result's watch is in place: one that ends first is deleted
  // unwatched (test/db/followDeleted.test.ts).
  let watched!: () => void;
  const whenWatched = new Promise<void>((resolve) => (watched = resolve));
  const worker = createWorker({
    db, namespace: ns, logger: silentLogger, listen: false, safetyPollMs: 50, retention: { succeededMs: 0 },
    definitions: [
      defineJob({ name: 'work', maxAttempts: 1, handler: async (payload: { fail?: boolean; awaited?: boolean }, ctx) => {
        seen.push(String(ctx.jobId));
        await ctx.step('s', async () => 1);
        if (payload.awaited) await whenWatched;
        if (payload.fail) throw new Error('no');
        return 'done';
      } }),
    ],
  });
  await worker.start();
  try {
    const client = createClient({ db, namespace: ns });
    const { id: awaited } = await client.enqueue('work', { awaited: true });
    const result = client.result(awaited, { timeoutMs: 20_000 });
    await waitFor(async () => (await db.query<{ watched: boolean }>('select watched from acta.jobs where id = $1', [awaited])).rows[0]?.watched, 'the watch');
    watched();
    expect(await result).toBe('done');
    const plain = await Promise.all(Array.from({ length: 5 }, async () => (await client.enqueue('work', {})).id));
    const { id: failed } = await client.enqueue('work', { fail: true });
    // Until the failed one's completion committed (its attempt row), not only its handler ran.
    await waitFor(async () => seen.length === 7 && (await remaining([...plain, failed])).executions.length === 1 && (await remaining(plain)).jobs.length === 0, 'the jobs to end');
    expect(await remaining([...plain, failed])).toEqual({ jobs: [failed], executions: [failed], steps: [failed] });
    expect((await remaining([awaited])).jobs).toEqual([awaited]); // watched: left to the pass
  } finally {
    await worker.stop();
  }
});

test('retention zero deletes with a succeeded row what refers to it: its earlier attempts, its steps and its signals (acta.delete_job_references)', async () => {
  await db.query(
    `insert into acta.schedules (namespace, name, definition, cron, payload, source)
     values ($1, 'sys.retention', 'sys.retention', '* * * * *', '{"succeededMs": 0}', 'declared')`,
    [ns],
  );
  const ledger = sqlLedger(db);
  const workerId = randomUUID();
  const claim = async () => (await ledger.claimJobs({ namespace: ns, workerId, definitions: ['d'], limit: 10, leaseMs: 60_000 })).rows;
  const [{ id }, { id: other }] = await ledger.enqueueJobs(ns, {
    definitions: ['d', 'd'], payloads: ['{}', '{}'], priorities: [null, null], runAts: [null, null], maxAttempts: [null, null],
    idempotencyKeys: [null, null], concurrencyKeys: [null, null], rateKeys: [null, null], lanes: [null, null],
  });
  const first = (await claim()).find((r) => r.id === id)!;
  await ledger.completeExecutions(workerId, [{ id: id!, execution: first.execution, outcome: 'handed_back', result: null, error: null, retryDelayMs: 0 }]);
  expect((await ledger.sendSignal({ namespace: ns, jobId: id!, jobKey: null, name: 'go', payloadJson: '1', idempotencyKey: null })).outcome).not.toBe('ended');
  const second = (await claim()).find((r) => r.id === id)!;
  expect(second.execution).toBe(2);
  expect((await ledger.recordStep({ workerId, jobId: id!, execution: 2, name: 's', resultJson: '1' })).status).toBe('recorded');
  const acks = await ledger.completeExecutions(workerId, [{ id: id!, execution: 2, outcome: 'succeeded', result: '1', error: null, retryDelayMs: 0 }]);
  expect(acks.map((a) => a.status)).toEqual(['succeeded']);
  expect(await remaining([id!, other!])).toEqual({ jobs: [other], executions: [], steps: [] });
  expect((await db.query('select count(*)::int as n from acta.signals where job_id = $1', [id])).rows[0].n).toBe(0);
});
