import { randomUUID } from 'node:crypto';
import { backoffMs, createClient, createWorker, defineJob, InvalidJsonError, UnknownDefinitionError, type Db } from '../../src';
import { claimJobs } from '../../src/db/jobs';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db } = useTestDatabase();
beforeEach(() => db.query('truncate acta.jobs, acta.succeeded_jobs, acta.executions'));

const row = async (id: string) =>
  (await db.query<{ status: string; attempts: number; execution: number; result: unknown; error: { message?: string } | null }>(
    'select status, attempts, execution, result, error from acta.all_jobs where id = $1', [id],
  )).rows[0];

test('enqueue → claim → complete: the handler runs once and its result is stored', async () => {
  const seen: unknown[] = [];
  const add = defineJob<{ a: number; b: number }, { sum: number }>({
    name: 'add',
    handler: async (p, ctx) => {
      seen.push({ payload: p, attempt: ctx.attempt, jobId: ctx.jobId, aborted: ctx.signal.aborted });
      return { sum: p.a + p.b };
    },
  });
  const client = createClient({ force: true, db });
  const { id, created } = await client.enqueue('add', { a: 2, b: 3 });
  expect(created).toBe(true);
  const worker = createWorker({ db, definitions: [add], logger: silentLogger, executors: 4 });
  await worker.start();
  await waitFor(async () => (await row(id)).status === 'succeeded', 'job to succeed');
  await worker.stop();
  expect(await row(id)).toMatchObject({ status: 'succeeded', attempts: 1, execution: 1, result: { sum: 5 } });
  expect(seen).toEqual([{ payload: { a: 2, b: 3 }, attempt: 1, jobId: id, aborted: false }]);
  const { rows } = await db.query('select job_id, execution, outcome, charged from acta.all_executions');
  expect(rows).toEqual([{ job_id: id, execution: 1, outcome: 'succeeded', charged: true }]);
});

test('a payload jsonb cannot store is refused at enqueue with a typed error, and nothing is written', async () => {
  const client = createClient({ force: true, db });
  const circular: Record<string, unknown> = {};
  circular.self = circular;
  await expect(client.enqueue('x', { n: 10n })).rejects.toThrow(InvalidJsonError);
  await expect(client.enqueue('x', circular)).rejects.toThrow(/circular/);
  await expect(client.enqueue('x', { s: 'a\u0000b' })).rejects.toMatchObject({ code: 'ACTA_INVALID_JSON', path: '$.s' });
  await expect(client.enqueueMany([{ definition: 'x', payload: { ok: 1 } }, { definition: 'x', payload: { bad: '\ud800' } }])).rejects.toThrow(/lone UTF-16 surrogate/);
  const { rows } = await db.query<{ n: string }>('select count(*) as n from acta.jobs');
  expect(rows[0].n).toBe('0');
});

test('a handler that always throws is retried with back-off up to maxAttempts, then the job is Failed', async () => {
  const backoff = { delayMs: 50 };
  let calls = 0;
  const boom = defineJob({
    name: 'boom',
    backoff,
    handler: async () => {
      calls++;
      throw new Error(`boom ${calls}`);
    },
  });
  const { id } = await createClient({ force: true, db }).enqueue('boom', { x: 1 }, { maxAttempts: 3 });
  const worker = createWorker({ db, definitions: [boom], logger: silentLogger, executors: 2 });
  await worker.start();
  await waitFor(async () => (await row(id)).status === 'failed', 'job to end failed');
  await worker.stop();

  expect(await row(id)).toMatchObject({ status: 'failed', attempts: 3, execution: 3, result: null, error: { name: 'Error', message: 'boom 3' } });
  expect(calls).toBe(3);
  // The gaps come from the database's own timestamps: the retry's run_at is the completion's
  // now() + back-off, and the claim takes only rows whose run_at <= its now(). Measured from the
  // attempt's claim, which precedes that now(): its finished_at is read later, once the
  // completion holds its rows (docs/decisions/2026-12-05-ledger-times.md), so it may pass it.
  const { rows } = await db.query<{ execution: number; outcome: string; charged: boolean; message: string; gap_ms: number | null }>(
    `select execution, outcome, charged, error->>'message' as message,
            (extract(epoch from (lead(claimed_at) over (order by execution) - claimed_at)) * 1000)::float8 as gap_ms
       from acta.all_executions where job_id = $1 order by execution`,
    [id],
  );
  expect(rows.map((r) => [r.execution, r.outcome, r.charged, r.message])).toEqual([
    [1, 'failed', true, 'boom 1'],
    [2, 'failed', true, 'boom 2'],
    [3, 'failed_final', true, 'boom 3'],
  ]);
  expect(rows[0].gap_ms).toBeGreaterThanOrEqual(backoffMs(backoff, 1)); // 50 ms
  expect(rows[1].gap_ms).toBeGreaterThanOrEqual(backoffMs(backoff, 2)); // 100 ms (factor 2)
  expect(rows[2].gap_ms).toBeNull();
});

test("the definition's maxAttempts bounds a job enqueued without one, and a retry that then succeeds stores its result", async () => {
  let calls = 0;
  const flaky = defineJob({
    name: 'flaky',
    maxAttempts: 2,
    backoff: { delayMs: 10 },
    handler: async (p: { failFirst: number }) => {
      calls++;
      if (calls <= p.failFirst) throw new Error(`flaky ${calls}`);
      return { calls };
    },
  });
  const client = createClient({ force: true, db, definitions: [flaky] });
  const once = await client.enqueue('flaky', { failFirst: 1 });
  const worker = createWorker({ db, definitions: [flaky], logger: silentLogger, executors: 1 });
  await worker.start();
  await waitFor(async () => (await row(once.id)).status === 'succeeded', 'retried job to succeed');
  calls = 0;
  const always = await client.enqueue('flaky', { failFirst: 99 });
  await waitFor(async () => (await row(always.id)).status === 'failed', 'job to fail after two attempts');
  await worker.stop();

  expect(await row(once.id)).toMatchObject({ status: 'succeeded', attempts: 2, execution: 2, result: { calls: 2 } });
  expect(await row(always.id)).toMatchObject({ status: 'failed', attempts: 2, execution: 2, error: { message: 'flaky 2' } });
  // The rows carry no number of their own: the definition's applies (migration 0004).
  const { rows } = await db.query<{ job_id: string; outcome: string; max_attempts: number | null }>(
    `select e.job_id, e.outcome, j.max_attempts from acta.all_executions e join acta.all_jobs j on j.id = e.job_id order by e.job_id, e.execution`,
  );
  expect(rows).toEqual([
    { job_id: once.id, outcome: 'failed', max_attempts: null },
    { job_id: once.id, outcome: 'succeeded', max_attempts: null },
    { job_id: always.id, outcome: 'failed', max_attempts: null },
    { job_id: always.id, outcome: 'failed_final', max_attempts: null },
  ]);
  await expect(client.enqueue('no-such-job', {})).rejects.toThrow(UnknownDefinitionError);
});

test("a job's own maxAttempts wins over its definition's, above it or below it", async () => {
  const runs = new Map<string, number>();
  const boom = defineJob({
    name: 'boom-own',
    maxAttempts: 2,
    backoff: { delayMs: 1 },
    handler: async (p: { tag: string }) => {
      runs.set(p.tag, (runs.get(p.tag) ?? 0) + 1);
      throw new Error('boom');
    },
  });
  const client = createClient({ force: true, db, definitions: [boom] });
  const above = await client.enqueue('boom-own', { tag: 'above' }, { maxAttempts: 4 });
  const below = await client.enqueue('boom-own', { tag: 'below' }, { maxAttempts: 1 });
  const none = await client.enqueue('boom-own', { tag: 'none' });
  const worker = createWorker({ db, definitions: [boom], logger: silentLogger, executors: 3 });
  await worker.start();
  try {
    for (const id of [above.id, below.id, none.id]) await waitFor(async () => (await row(id)).status === 'failed', 'the job to end Failed');
  } finally {
    await worker.stop();
  }
  expect(Object.fromEntries(runs)).toEqual({ above: 4, below: 1, none: 2 });
  expect(await row(above.id)).toMatchObject({ status: 'failed', attempts: 4 });
});

test('higher priority is claimed first; equal priorities in enqueue order', async () => {
  const order: string[] = [];
  const job = defineJob<{ tag: string }>({ name: 'prio', handler: async (p) => void order.push(p.tag) });
  const input = [
    { tag: 'p0-a', priority: 0 },
    { tag: 'p5-a', priority: 5 },
    { tag: 'p-3', priority: -3 },
    { tag: 'p10', priority: 10 },
    { tag: 'p5-b', priority: 5 },
    { tag: 'p0-b', priority: undefined },
  ];
  await createClient({ force: true, db }).enqueueMany(input.map(({ tag, priority }) => ({ definition: 'prio', payload: { tag }, priority })));
  const worker = createWorker({ db, definitions: [job], logger: silentLogger, executors: 1 });
  await worker.start();
  await waitFor(() => order.length === input.length, 'every job to run');
  await worker.stop();
  expect(order).toEqual(['p10', 'p5-a', 'p5-b', 'p0-a', 'p0-b', 'p-3']);
  const { rows } = await db.query<{ tag: string }>(
    `select j.payload->>'tag' as tag from acta.all_executions e join acta.all_jobs j on j.id = e.job_id order by e.claimed_at, e.job_id`,
  );
  expect(rows.map((r) => r.tag)).toEqual(order);
});

test('a claim of fewer rows than are due takes them in claim order: a higher priority due later first, then enqueue order', async () => {
  // The claim looks at the first limit + 1 due rows in due order (jobs_due_idx, migration 0005):
  // a higher-priority row due after them must still come first, and equal rows come in id order.
  const client = createClient({ force: true, db });
  const early = await client.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ definition: 'order', payload: { i } })));
  const urgent = await client.enqueue('order', { urgent: true }, { priority: 5 });
  const claim = (limit: number) => claimJobs(db, { namespace: 'default', workerId: randomUUID(), definitions: ['order'], limit, leaseMs: 60_000 });
  expect((await claim(8)).rows.map((r) => r.id)).toEqual([urgent.id, ...early.slice(0, 7).map((e) => e.id)]);
  expect((await claim(8)).rows.map((r) => r.id)).toEqual(early.slice(7, 15).map((e) => e.id));
  expect((await claim(8)).rows.map((r) => r.id)).toEqual(early.slice(15, 20).map((e) => e.id));
  expect((await claim(8)).rows).toEqual([]);
});

test('two queues with the same claim key (namespace "a", definition "b/c"; namespace "a/b", definition "c") share an index range and nothing else', async () => {
  // Migration 0006: jobs_due_idx and jobs_claim_idx lead with hashtextextended(namespace || '/' ||
  // definition, 0); these two texts are equal, so their rows sit in one range of each index.
  const { rows: keys } = await db.query<{ same: boolean }>(`select hashtextextended('a' || '/' || 'b/c', 0) = hashtextextended('a/b' || '/' || 'c', 0) as same`);
  expect(keys[0].same).toBe(true);
  const inA = createClient({ force: true, db, namespace: 'a' });
  const inAB = createClient({ force: true, db, namespace: 'a/b' });
  const dbNow = async () => (await db.query<{ now: Date }>('select now() as now')).rows[0].now;
  const otherLater = await inAB.enqueue('c', { n: 0 }, { runAt: new Date((await dbNow()).getTime() + 30_000) });
  const other = await inAB.enqueue('c', { n: 1 }, { priority: 9 });
  const claim = (namespace: string, definition: string) =>
    claimJobs(db, { namespace, workerId: randomUUID(), definitions: [definition], limit: 8, leaseMs: 60_000 });
  // Nothing of its own: no row of the other queue, and no next due time from it.
  expect(await claim('a', 'b/c')).toEqual({ rows: [], nextDueInMs: null });
  const own = await inA.enqueueMany([0, 1, 2].map((i) => ({ definition: 'b/c', payload: { i }, priority: i === 2 ? 5 : 0 })));
  // Mixed priorities: the pick walks jobs_claim_idx, where the other queue's priority-9 row comes first.
  expect((await claim('a', 'b/c')).rows.map((r) => r.id)).toEqual([own[2].id, own[0].id, own[1].id]);
  expect((await claim('a/b', 'c')).rows.map((r) => r.id)).toEqual([other.id]);
  const idle = await claim('a/b', 'c');
  expect(idle.rows).toEqual([]);
  expect(idle.nextDueInMs).toBeGreaterThan(20_000);
  expect(await row(otherLater.id)).toMatchObject({ status: 'ready', execution: 0 });
});

test('a claim that names a definition twice takes as many rows as it asks for, each once', async () => {
  // The case it guards (SQL callers; the worker refuses duplicate names): the pick
  // ran once per name, and the second pass saw the rows its own transaction had just locked (SKIP
  // LOCKED skips only other transactions' locks), so the claim came back with half its rows.
  const client = createClient({ force: true, db });
  const jobs = await client.enqueueMany(Array.from({ length: 10 }, (_, i) => ({ definition: 'twice', payload: { i } })));
  const claim = (definitions: string[], limit: number) =>
    claimJobs(db, { namespace: 'default', workerId: randomUUID(), definitions, limit, leaseMs: 60_000 });
  expect((await claim(['twice', 'twice'], 4)).rows.map((r) => r.id)).toEqual(jobs.slice(0, 4).map((j) => j.id));
  expect((await claim(['twice', 'other', 'twice'], 4)).rows.map((r) => r.id)).toEqual(jobs.slice(4, 8).map((j) => j.id));
  expect((await claim(['twice', 'twice'], 4)).rows.map((r) => r.id)).toEqual(jobs.slice(8, 10).map((j) => j.id));
  const { rows } = await db.query<{ execution: number; n: string }>('select execution, count(*) as n from acta.jobs group by execution');
  expect(rows).toEqual([{ execution: 1, n: '10' }]);
});

test('a claim for fewer than 1 row is refused with 22023, rather than answering "nothing due" while rows are', async () => {
  await createClient({ force: true, db }).enqueue('limits', {});
  const claim = (limit: number) => claimJobs(db, { namespace: 'default', workerId: randomUUID(), definitions: ['limits'], limit, leaseMs: 60_000 });
  await expect(claim(0)).rejects.toMatchObject({ code: '22023', message: expect.stringContaining('p_limit must be at least 1, got 0') });
  await expect(claim(-1)).rejects.toMatchObject({ code: '22023' });
  expect((await claim(1)).rows).toHaveLength(1);
});

test('a due row the claim locked but did not take wakes idle workers when the claim commits', async () => {
  // The case it guards: the pick locks the first due rows in due order, then walks claim order when
  // their priorities differ from a due row's; the row it locked and left was skipped by a
  // concurrent claim, which went idle until its next poll while the row stayed due.
  const client = createClient({ force: true, db });
  const low = await client.enqueue('mixed', { low: true });
  const high = await client.enqueue('mixed', { high: true }, { priority: 5 });
  const woken: string[] = [];
  const unlisten = await db.listen('acta_jobs', { onNotify: (payload) => woken.push(payload) });
  const claim = (q: Parameters<typeof claimJobs>[0]) => claimJobs(q, { namespace: 'default', workerId: randomUUID(), definitions: ['mixed'], limit: 1, leaseMs: 60_000 });
  await db.transaction(async (tx) => {
    expect((await claim(tx)).rows.map((r) => r.id)).toEqual([high.id]); // the higher priority, though due later
    expect((await claim(db)).rows).toEqual([]); // `low` is locked until this claim commits
  });
  await waitFor(async () => woken.length > 0, 'a wakeup after the claim committed');
  expect(woken).toEqual(['default']);
  expect((await claim(db)).rows.map((r) => r.id)).toEqual([low.id]);
  await unlisten();
});

test('a job whose runAt is in the future is not claimed before it is due', async () => {
  const client = createClient({ force: true, db });
  const dbNow = async () => (await db.query<{ now: Date }>('select now() as now')).rows[0].now;
  // Straight through the claim: a row due in a minute is not taken, and the claim says when it is due.
  const far = await client.enqueue('later', { n: 0 }, { runAt: new Date((await dbNow()).getTime() + 60_000) });
  const empty = await claimJobs(db, { namespace: 'default', workerId: randomUUID(), definitions: ['later'], limit: 10, leaseMs: 10_000 });
  expect(empty.rows).toEqual([]);
  expect(empty.nextDueInMs).toBeGreaterThan(50_000);
  expect(empty.nextDueInMs).toBeLessThanOrEqual(60_000);
  expect(await row(far.id)).toMatchObject({ status: 'ready', execution: 0 });
  await db.query('delete from acta.jobs');

  // Through a running worker: the job waits for its time, then runs.
  const ran: string[] = [];
  const later = defineJob({ name: 'later', handler: async (_p, ctx) => void ran.push(ctx.jobId) });
  const worker = createWorker({ db, definitions: [later], logger: silentLogger, executors: 2 });
  await worker.start();
  const due = await client.enqueue('later', { n: 1 }, { runAt: new Date((await dbNow()).getTime() + 1_500) });
  const now = await client.enqueue('later', { n: 2 });
  await waitFor(() => ran.includes(now.id), 'the job due now to run');
  const { rows: early } = await db.query<{ status: string; not_due: boolean }>('select status, run_at > now() as not_due from acta.all_jobs where id = $1', [due.id]);
  if (early[0].not_due) expect(early[0].status).toBe('ready');
  await waitFor(async () => (await row(due.id)).status === 'succeeded', 'the future job to run once due');
  await worker.stop();
  const { rows } = await db.query<{ on_time: boolean }>(
    'select e.claimed_at >= j.run_at as on_time from acta.all_executions e join acta.all_jobs j on j.id = e.job_id where j.id = $1',
    [due.id],
  );
  expect(rows).toEqual([{ on_time: true }]);
  expect(ran).toEqual([now.id, due.id]);
});

test('a registration whose answer was lost is repeated, the worker starts (register_worker is repeatable), and the recovery pass the lost call took runs', async () => {
  // A dead worker's row, its lease run out, and the namespace's recovery pass due: the lost call
  // takes the pass (moving it a lease on, 80 s here), so unless the repeat runs one, nobody
  // recovers the row for 80 s (docs/decisions/2026-12-01-registration-is-the-first-beat.md).
  const client = createClient({ force: true, db });
  const orphan = await client.enqueue('registered', { orphan: true });
  await claimJobs(db, { namespace: 'default', workerId: randomUUID(), definitions: ['registered'], limit: 1, leaseMs: 1 });
  await waitFor(async () => (await db.query(`select 1 from acta.jobs where id = $1 and lease_expires_at < now()`, [orphan.id])).rows.length > 0, 'the lease to run out');
  await db.query(`update acta.passes set due_at = now() where namespace = 'default' and pass = 'recovery'`);
  let lost = 0;
  // The call commits, then the connection drops before the answer arrives.
  const flaky = new Proxy(db, {
    get(target, prop) {
      if (prop === 'query') {
        return async (text: string, params?: unknown[]) => {
          const result = await target.query(text, params);
          if (lost === 0 && text.includes('register_worker')) {
            lost++;
            throw Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
          }
          return result;
        };
      }
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  }) as Db;
  const worker = createWorker({ db: flaky, definitions: [defineJob({ name: 'registered', handler: () => undefined })], heartbeatIntervalMs: 20_000, logger: silentLogger });
  try {
    await worker.start();
    expect(lost).toBe(1);
    const { rows } = await db.query<{ n: string }>('select count(*) as n from acta.workers where id = $1', [worker.id]);
    expect(Number(rows[0].n)).toBe(1);
    await waitFor(async () => (await row(orphan.id)).status === 'succeeded', 'the orphaned row to be recovered and run', 10_000);
    const { rows: ledger } = await db.query('select execution, outcome from acta.all_executions where job_id = $1 order by execution', [orphan.id]);
    expect(ledger).toEqual([
      { execution: 1, outcome: 'lost_uncharged' },
      { execution: 2, outcome: 'succeeded' },
    ]);
  } finally {
    await worker.stop();
  }
});

test('the execution timeout: a handler that ignores its signal is not waited for, one that listens sees the abort, and the attempt fails with AttemptTimeoutError', async () => {
  const reasons: unknown[] = [];
  let lateReads = 0;
  // Ignores its signal and never settles: the executor stops waiting at the timeout.
  const stuck = defineJob({ name: 'stuck', timeoutMs: 100, maxAttempts: 1, handler: () => new Promise<never>(() => undefined) });
  // Listens from the start: its signal aborts with the cause as reason.
  const listening = defineJob({
    name: 'listening',
    timeoutMs: 100,
    maxAttempts: 1,
    handler: (_p, ctx) =>
      new Promise<never>((_, reject) => {
        ctx.signal.addEventListener('abort', () => {
          reasons.push(ctx.signal.reason);
          reject(new Error('gave up'));
        });
      }),
  });
  // Reads its signal only after the timeout fired: it is already aborted.
  const late = defineJob({
    name: 'late',
    timeoutMs: 100,
    maxAttempts: 1,
    handler: async (_p, ctx) => {
      await new Promise((r) => setTimeout(r, 300));
      if (ctx.signal.aborted && ctx.signal.reason === 'timeout') lateReads++;
    },
  });
  const client = createClient({ force: true, db });
  const ids = await Promise.all(['stuck', 'listening', 'late'].map(async (name) => (await client.enqueue(name, {})).id));
  const worker = createWorker({ db, definitions: [stuck, listening, late], logger: silentLogger, executors: 4 });
  await worker.start();
  await waitFor(async () => (await Promise.all(ids.map(row))).every((r) => r.status === 'failed'), 'three jobs to fail');
  await waitFor(async () => lateReads === 1, 'the late handler to see its aborted signal');
  await worker.stop();
  for (const id of ids) {
    expect(await row(id)).toMatchObject({ status: 'failed', attempts: 1, error: { name: 'AttemptTimeoutError', message: 'attempt exceeded its timeout of 100 ms' } });
  }
  expect(reasons).toEqual(['timeout']);
});

test('stop() right after start() leaves no worker marked alive (a registration in flight is awaited or skipped)', async () => {
  const job = defineJob({ name: 'j', handler: () => undefined });
  const statuses: string[] = [];
  for (const delayMs of [0, 0, 0, 1, 1, 3]) {
    const worker = createWorker({ db, definitions: [job], logger: silentLogger });
    const started = worker.start();
    if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
    await Promise.all([started.catch(() => undefined), worker.stop()]);
    await new Promise((r) => setTimeout(r, 100)); // a registration that commits late would show now
    const { rows } = await db.query<{ status: string }>('select status from acta.workers where id = $1', [worker.id]);
    statuses.push(rows[0]?.status ?? 'none');
  }
  // Before: the cancelled registration committed after stop_worker: 'alive' in 3 of 7 tries.
  expect(statuses.filter((s) => s === 'alive')).toEqual([]);
});
