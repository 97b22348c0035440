// client.getJob and client.cancel on real PostgreSQL: a job's status, payload, result, last error
// and its finished attempts from the attempt ledger, as a user reads them without SQL; cancelling a
// Ready job (queued, due later, waiting out a backoff), not a finished one; ids in every
// accepted form; namespaces kept apart; both inside the caller's transaction.
import { types } from 'node:util';
import { ConfigError, createClient, createWorker, defineJob, SchemaNotMigratedError, type JobRecord, type Queryable } from '../../src';
import { createTestDatabase, useTestDatabase, withPgClient } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db, tdb } = useTestDatabase();
beforeEach(() => db.query('truncate acta.jobs, acta.succeeded_jobs, acta.executions'));

test("a job with more finished attempts than getJob returns: its newest 100, in order, and their count (was: every one, unbounded)", async () => {
  const client = createClient({ force: true, db });
  const { id } = await client.enqueue('send-mail', {});
  // 150 handed-back attempts, written as the ledger keeps them (a job handed back without end).
  await db.query(
    `insert into acta.executions (job_id, execution, claimed_at, outcome, charged) select $1::bigint, n, now(), 'handed_back', false from generate_series(1, 150) n`,
    [id],
  );
  const job = (await client.getJob(id))!;
  expect(job.executionCount).toBe(150);
  expect(job.executions.map((e) => e.execution)).toEqual(Array.from({ length: 100 }, (_, i) => 51 + i));
});

test('a queued job reads as Ready with its payload, options and no attempts', async () => {
  const client = createClient({ force: true, db });
  const before = await db.query<{ now: Date }>('select now() as now');
  const runAt = new Date(Date.now() + 3_600_000);
  const { id } = await client.enqueue('send-mail', { to: 'a@example.com' }, { priority: 7, maxAttempts: 4, idempotencyKey: 'k1', runAt });
  const job = await client.getJob<{ to: string }>(id);
  expect(job).toEqual<JobRecord>({
    id,
    definition: 'send-mail',
    status: 'ready',
    payload: { to: 'a@example.com' },
    result: null,
    error: null,
    attempts: 0,
    maxAttempts: 4,
    effectiveMaxAttempts: 4,
    maxAttemptsFrom: 'job',
    execution: 0,
    priority: 7,
    runAt,
    createdAt: expect.any(Date),
    finishedAt: null,
    idempotencyKey: 'k1',
    concurrencyKey: null,
    rateKey: null,
    lane: null,
    blockedBy: null,
    progress: null,
    cancelRequestedAt: null,
    schedule: null,
    scheduledAt: null,
    executions: [],
    executionCount: 0,
  });
  expect(job!.createdAt.getTime()).toBeGreaterThanOrEqual(before.rows[0].now.getTime());
  expect(job!.payload.to).toBe('a@example.com'); // typed by the stated P
  // Without options the row's defaults: null maxAttempts (the definition's applies), priority 0.
  const plain = await client.getJob((await client.enqueue('send-mail', [1, 2])).id);
  expect(plain).toMatchObject({ payload: [1, 2], maxAttempts: null, priority: 0, idempotencyKey: null });
});

test('a job that failed once and then succeeded: its result, no error, and both attempts in order', async () => {
  let calls = 0;
  const flaky = defineJob<{ n: number }, { doubled: number }>({
    name: 'flaky',
    backoff: { delayMs: 10 },
    handler: async (p) => {
      if (++calls === 1) throw Object.assign(new TypeError('first try fails'), { code: 'E_FIRST' });
      return { doubled: p.n * 2 };
    },
  });
  const worker = createWorker({ db, definitions: [flaky], logger: silentLogger, executors: 2 });
  await worker.start();
  const client = createClient({ force: true, db });
  const { id } = await client.enqueue(flaky, { n: 21 });
  const job = await waitFor(async () => {
    const j = await client.getJob<{ n: number }, { doubled: number }>(id);
    return j?.status === 'succeeded' ? j : null;
  }, 'the job to succeed');
  await worker.stop();
  expect(job).toMatchObject({ status: 'succeeded', result: { doubled: 42 }, error: null, attempts: 2, execution: 2, finishedAt: expect.any(Date) });
  expect(job.result?.doubled).toBe(42);
  expect(job.executions).toEqual([
    {
      execution: 1,
      workerId: worker.id,
      claimedAt: expect.any(Date),
      finishedAt: expect.any(Date),
      outcome: 'failed',
      charged: true,
      error: expect.objectContaining({ name: 'TypeError', message: 'first try fails', code: 'E_FIRST', stack: expect.stringContaining('first try fails') }),
    },
    { execution: 2, workerId: worker.id, claimedAt: expect.any(Date), finishedAt: expect.any(Date), outcome: 'succeeded', charged: true, error: null },
  ]);
  // The ledger's times, decoded from the statement's json, are the stored ones to the microsecond's millisecond.
  const { rows } = await db.query<{ claimed_at: Date; finished_at: Date }>('select claimed_at, finished_at from acta.all_executions where job_id = $1 order by execution', [id]);
  expect(job.executions.map((e) => [e.claimedAt.getTime(), e.finishedAt.getTime()])).toEqual(rows.map((r) => [r.claimed_at.getTime(), r.finished_at.getTime()]));
  expect(job.executions[0].finishedAt.getTime()).toBeLessThanOrEqual(job.executions[1].claimedAt.getTime());
});

test('a job out of attempts reads as Failed with its last error and a failed_final attempt', async () => {
  const boom = defineJob({
    name: 'boom',
    handler: async () => {
      throw new Error('always');
    },
  });
  const worker = createWorker({ db, definitions: [boom], logger: silentLogger, executors: 2 });
  await worker.start();
  const client = createClient({ force: true, db });
  const { id } = await client.enqueue(boom, {}, { maxAttempts: 1 });
  const job = await waitFor(async () => {
    const j = await client.getJob(id);
    return j?.status === 'failed' ? j : null;
  }, 'the job to fail');
  await worker.stop();
  expect(job).toMatchObject({ attempts: 1, result: null, error: { name: 'Error', message: 'always' }, finishedAt: expect.any(Date) });
  expect(job.executions.map((e) => [e.outcome, e.charged, e.error?.message])).toEqual([['failed_final', true, 'always']]);
});

test('ids: the returned string, a number and a bigint name the same job; ids no job has read as null; malformed ids are refused', async () => {
  const client = createClient({ force: true, db });
  const { id } = await client.enqueue('x', { v: 1 });
  for (const form of [id, Number(id), BigInt(id)]) expect((await client.getJob(form))?.id).toBe(id);
  expect((await client.getJob(id, null))?.id).toBe(id); // null options, as enqueue takes them
  expect(await client.getJob(String(Number(id) + 1000))).toBeNull();
  expect(await client.getJob('9223372036854775807')).toBeNull(); // the largest bigint
  expect(await client.getJob('9223372036854775808')).toBeNull(); // beyond bigint: no job can have it
  expect(await client.getJob('9'.repeat(10_000))).toBeNull();
  expect((await client.getJob(`${'0'.repeat(40)}${id}`))?.id).toBe(id); // leading zeros, however many
  const throwing = { toString: () => { throw new Error('boom'); } };
  for (const bad of ['abc', '', '1.5', '-3', ' 1', '1e3', '0', '000', 0, -1, -1n, 1.5, Number.NaN, 2 ** 60, null, undefined, {}, Object.create(null), throwing] as unknown[]) {
    await expect(client.getJob(bad as string)).rejects.toThrow(ConfigError);
  }
  await expect(client.getJob(id, { txn: undefined } as never)).rejects.toThrow(/unknown getJob option "txn"/);
});

test("a namespace reads only its own jobs", async () => {
  const { id } = await createClient({ force: true, db, namespace: 'billing' }).enqueue('x', {});
  expect(await createClient({ force: true, db }).getJob(id)).toBeNull();
  expect((await createClient({ force: true, db, namespace: 'billing' }).getJob(id))?.status).toBe('ready');
});

test("with { tx } the read runs in the caller's transaction and sees its uncommitted enqueue", async () => {
  const client = createClient({ force: true, db });
  await withPgClient(tdb.url, async (pg) => {
    await pg.query('begin');
    const { id } = await client.enqueue('x', { inside: true }, { tx: pg });
    expect(await client.getJob(id)).toBeNull(); // not committed: another session sees nothing
    expect((await client.getJob(id, { tx: pg }))?.payload).toEqual({ inside: true });
    await pg.query('rollback');
    expect(await client.getJob(id, { tx: pg })).toBeNull();
  });
});

test("a user's trigger whose table is missing keeps its own error: it does not read as an unmigrated schema", async () => {
  const client = createClient({ force: true, db });
  const { id } = await client.enqueue('x', {});
  await db.query(`create function public.audit() returns trigger language plpgsql as $$ begin insert into public.audit_gone values (1); return new; end $$`);
  await db.query('create trigger audit_update before update on acta.jobs for each row execute function public.audit()');
  try {
    await expect(client.cancel(id)).rejects.toMatchObject({ code: '42P01', message: expect.stringContaining('"public.audit_gone"') });
  } finally {
    await db.query('drop trigger audit_update on acta.jobs');
    await db.query('drop function public.audit()');
  }
  expect(await client.cancel(id)).toBe(true);
});

test('on a database without the acta schema getJob says to migrate', async () => {
  const empty = await createTestDatabase({ migrate: false });
  try {
    await expect(createClient({ force: true, db: empty.open() }).getJob('1')).rejects.toThrow(SchemaNotMigratedError);
    // Calls failing at once share one question to the migrator, not one error: each its own cause.
    const shared = createClient({ force: true, db: empty.open() });
    const [read, cancelled] = await Promise.allSettled([shared.getJob('1'), shared.cancel('2')]);
    const reasons = [read, cancelled].map((r) => (r as PromiseRejectedResult).reason as Error);
    for (const reason of reasons) {
      expect(reason).toBeInstanceOf(SchemaNotMigratedError);
      expect(types.isNativeError(reason)).toBe(true); // a real error: structuredClone and Node 21+'s stack need one
      expect(reason.stack).toMatch(/^SchemaNotMigratedError: the acta schema is not migrated/);
      expect(structuredClone(reason).message).toBe(reason.message);
    }
    expect(reasons[0]).not.toBe(reasons[1]);
    expect(reasons[0].cause).not.toBe(reasons[1].cause);
    // Inside a caller's transaction holding the pool's only connection: asking the migrator on
    // another connection waited forever; the error's own message decides there.
    const single = empty.open({ max: 1 });
    const calls: ((tx: Queryable) => Promise<unknown>)[] = [(tx) => createClient({ force: true, db: single }).getJob('1', { tx }), (tx) => createClient({ force: true, db: single }).cancel('1', { tx })];
    for (const call of calls) {
      await expect(single.transaction(call)).rejects.toThrow(SchemaNotMigratedError);
    }
  } finally {
    await empty.drop();
  }
});

describe('cancel', () => {
  test('a Ready job is cancelled once: never claimed, finished, its idempotency key kept; a worker runs the others', async () => {
    const ran: string[] = [];
    const job = defineJob<{ n: string }>({ name: 'job', handler: async (p) => void ran.push(p.n) });
    const client = createClient({ force: true, db });
    const doomed = await client.enqueue(job, { n: 'doomed' }, { idempotencyKey: 'once' });
    const kept = await client.enqueue(job, { n: 'kept' });
    expect(await client.cancel(doomed.id)).toBe(true);
    expect(await client.cancel(doomed.id)).toBe(false); // already Cancelled
    expect(await client.enqueue(job, { n: 'again' }, { idempotencyKey: 'once' })).toEqual({ id: doomed.id, created: false });
    const worker = createWorker({ db, definitions: [job], logger: silentLogger, executors: 2 });
    await worker.start();
    await waitFor(async () => (await client.getJob(kept.id))?.status === 'succeeded', 'the other job to run');
    await new Promise((r) => setTimeout(r, 200)); // a few more claims
    await worker.stop();
    expect(ran).toEqual(['kept']);
    expect(await client.getJob(doomed.id)).toMatchObject({ status: 'cancelled', execution: 0, attempts: 0, finishedAt: expect.any(Date), executions: [] });
  });

  test('a job waiting out a retry backoff is cancelled: no more attempts, its last error and ledger kept', async () => {
    let calls = 0;
    const flaky = defineJob({
      name: 'flaky',
      backoff: { delayMs: 60_000 },
      handler: async () => {
        calls++;
        throw new Error('not yet');
      },
    });
    const worker = createWorker({ db, definitions: [flaky], logger: silentLogger, executors: 2 });
    await worker.start();
    const client = createClient({ force: true, db });
    const { id } = await client.enqueue(flaky, {});
    await waitFor(async () => (await client.getJob(id))?.attempts === 1, 'the first attempt to fail');
    expect(await client.cancel(id)).toBe(true);
    await worker.stop();
    expect(calls).toBe(1);
    const read = await client.getJob(id);
    expect(read).toMatchObject({ status: 'cancelled', attempts: 1, error: { message: 'not yet' } });
    expect(read!.executions.map((e) => e.outcome)).toEqual(['failed']);
  });

  test('a finished job stays as it ended (an Executing one is cancelled through its worker: test/db/observe.test.ts)', async () => {
    const quick = defineJob({ name: 'quick', handler: async () => 'done' });
    const worker = createWorker({ db, definitions: [quick], logger: silentLogger, executors: 2 });
    await worker.start();
    const client = createClient({ force: true, db });
    const { id } = await client.enqueue(quick, {});
    await waitFor(async () => (await client.getJob(id))?.status === 'succeeded', 'the job to succeed');
    await worker.stop();
    expect(await client.cancel(id)).toBe(false);
    expect(await client.getJob(id)).toMatchObject({ status: 'succeeded', result: 'done', cancelRequestedAt: null });
  });

  test("ids and namespaces as getJob's; in the caller's transaction a rollback undoes it", async () => {
    const client = createClient({ force: true, db });
    const { id } = await client.enqueue('x', {});
    expect(await createClient({ force: true, db, namespace: 'other' }).cancel(id)).toBe(false);
    expect(await client.cancel('9223372036854775808')).toBe(false);
    await expect(client.cancel('x1')).rejects.toThrow(ConfigError);
    await expect(client.cancel(id, { tx: undefined, force: true } as never)).rejects.toThrow(/unknown cancel option "force"/);
    await withPgClient(tdb.url, async (pg) => {
      await pg.query('begin');
      await pg.query('select now()'); // the transaction's clock starts before the job below exists
      await new Promise((r) => setTimeout(r, 50));
      const later = await client.enqueue('x', {});
      expect(await client.cancel(later.id, { tx: pg })).toBe(true);
      const read = await client.getJob(later.id, { tx: pg });
      expect(read!.finishedAt!.getTime()).toBeGreaterThanOrEqual(read!.createdAt.getTime()); // the statement's time, not the transaction's
      expect(await client.cancel(BigInt(id), { tx: pg })).toBe(true);
      expect((await client.getJob(id, { tx: pg }))?.status).toBe('cancelled');
      expect((await client.getJob(id))?.status).toBe('ready'); // not committed
      await pg.query('rollback');
    });
    expect((await client.getJob(id))?.status).toBe('ready');
    expect(await client.cancel(Number(id))).toBe(true);
  });
});
