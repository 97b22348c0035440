import { AttemptCancelledError, createClient, createWorker, defineJob } from '../../src';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db } = useTestDatabase();

// A job that succeeded may have left acta.jobs (migration 0023): its row is read in acta.all_jobs.
const status = async (id: string) => (await db.query<{ status: string }>('select status from acta.all_jobs where id = $1', [id])).rows[0].status;

test('a recorded step never runs again: a retried attempt gets its recorded result', async () => {
  const runs: string[] = [];
  let attempts = 0;
  const job = defineJob<{}, { a: number; b: string }>({
    name: 'two-steps',
    backoff: { delayMs: 10 },
    async handler(_p, ctx) {
      attempts++;
      const a = await ctx.step('a', async () => {
        runs.push(`a@${ctx.execution}`);
        return 41 + ctx.execution; // differs per attempt: shows which one was recorded
      });
      if (ctx.attempt === 1) throw new Error('fail after step a');
      const b = await ctx.step('b', () => {
        runs.push(`b@${ctx.execution}`);
        return { at: new Date(0) };
      });
      return { a, b: (b as unknown as { at: string }).at };
    },
  });
  const { id } = await createClient({ force: true, db }).enqueue('two-steps', {});
  const worker = createWorker({ db, definitions: [job], logger: silentLogger, executors: 2 });
  await worker.start();
  await waitFor(async () => (await status(id)) === 'succeeded', 'the job to succeed');
  await worker.stop();
  expect(attempts).toBe(2);
  expect(runs).toEqual(['a@1', 'b@2']);
  const { rows } = await db.query<{ result: unknown }>('select result from acta.all_jobs where id = $1', [id]);
  expect(rows[0].result).toEqual({ a: 42, b: '1970-01-01T00:00:00.000Z' }); // a from attempt 1; b through jsonb
  const steps = await db.query<{ name: string; execution: number }>('select name, execution from acta.steps where job_id = $1 order by name', [id]);
  expect(steps.rows).toEqual([{ name: 'a', execution: 1 }, { name: 'b', execution: 2 }]);
});

test('a step whose record is refused because the attempt lost the job aborts the attempt', async () => {
  let seen: unknown;
  let signalAborted = false;
  const job = defineJob({
    name: 'loses-lease',
    maxAttempts: 1,
    async handler(_p, ctx) {
      try {
        await ctx.step('s', async () => {
          // Meanwhile the row moved on (as if recovered and claimed by another worker).
          await db.query(`update acta.jobs set execution = execution + 1 where id = $1`, [ctx.jobId]);
          return 1;
        });
      } catch (err) {
        seen = err;
        signalAborted = ctx.signal.aborted;
        throw err;
      }
    },
  });
  const { id } = await createClient({ force: true, db }).enqueue('loses-lease', {});
  const worker = createWorker({ db, definitions: [job], logger: silentLogger, executors: 2 });
  await worker.start();
  await waitFor(() => seen, 'the step to be refused');
  await waitFor(async () => (await db.query(`select 1 from acta.jobs where id = $1 and lease_holder is not null`, [id])).rows.length === 1, 'the row to still be held');
  await worker.stop();
  expect(seen).toBeInstanceOf(AttemptCancelledError);
  expect(signalAborted).toBe(true);
  expect((await db.query('select * from acta.steps where job_id = $1', [id])).rows).toEqual([]);
  // The attempt's completion was fenced out: nothing in the ledger for it.
  expect((await db.query('select * from acta.all_executions where job_id = $1', [id])).rows).toEqual([]);
});

test('a step whose result cannot be stored fails its job without retry: its fn runs once', async () => {
  let runs = 0;
  const job = defineJob({
    name: 'unstorable-step',
    backoff: { delayMs: 10 },
    async handler(_p, ctx) {
      await ctx.step('charge', () => {
        runs++;
        return { amount: 5n }; // a BigInt: not JSON
      });
    },
  });
  const { id } = await createClient({ force: true, db }).enqueue('unstorable-step', {}, { maxAttempts: 3 });
  const worker = createWorker({ db, definitions: [job], logger: silentLogger, executors: 2 });
  await worker.start();
  await waitFor(async () => (await status(id)) === 'failed', 'the job to fail');
  await worker.stop();
  expect(runs).toBe(1);
  const { rows } = await db.query<{ attempts: number; error: { name: string; code: string; message: string } }>('select attempts, error from acta.jobs where id = $1', [id]);
  expect(rows[0].attempts).toBe(1);
  expect(rows[0].error).toMatchObject({ name: 'UnstorableStepResultError', code: 'ACTA_UNSTORABLE_STEP_RESULT', message: expect.stringContaining('step "charge"') });
  expect((await db.query('select 1 from acta.steps where job_id = $1', [id])).rows).toHaveLength(0);
});

test('a step reached after the attempt deadline passed unnoticed (event loop blocked) does not run; the attempt fails with the deadline', async () => {
  // The case it guards: a worker paused or blocked past its lease ran, when it resumed, a step that
  // another attempt had recorded meanwhile. Here H = 500 ms: deadline 1.25 s after the last renewal.
  const runs: string[] = [];
  const job = defineJob({
    name: 'blocked',
    backoff: { delayMs: 10 },
    async handler(_p, ctx) {
      await ctx.step('a', () => runs.push(`a@${ctx.execution}`));
      if (ctx.execution === 1) {
        const until = Date.now() + 2_000; // no timer can fire: the heartbeat's checks cannot run
        while (Date.now() < until) {
          /* blocked */
        }
      }
      await ctx.step('b', () => runs.push(`b@${ctx.execution}`));
    },
  });
  const { id } = await createClient({ force: true, db }).enqueue('blocked', {});
  const worker = createWorker({ db, definitions: [job], logger: silentLogger, heartbeatIntervalMs: 500 });
  await worker.start();
  await waitFor(async () => (await status(id)) === 'succeeded', 'the job to succeed');
  await worker.stop();
  expect(runs).toEqual(['a@1', 'b@2']);
  const { rows } = await db.query<{ execution: number; outcome: string; error: { name: string; message: string } | null }>(
    'select execution, outcome, error from acta.all_executions where job_id = $1 order by execution',
    [id],
  );
  expect(rows.map((r) => [r.execution, r.outcome, r.error?.message])).toEqual([
    [1, 'failed', 'attempt deadline passed: its lease was not renewed in time'],
    [2, 'succeeded', undefined],
  ]);
}, 30_000);

test('a step survives transient database errors: the read of recorded steps and a record whose answer was lost are repeated; fn runs once', async () => {
  // The case it guards: a 2 s server restart failed 2–3 of 20 maxAttempts-1 jobs whose handlers
  // never failed: one failed step call failed (and charged) the attempt.
  const failures: string[] = [];
  const flaky = {
    ...db,
    query: async (text: string, params?: unknown[]) => {
      if (text.includes('from acta.steps') && !failures.includes('load')) {
        failures.push('load');
        throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }); // never sent
      }
      if (text.includes('acta.record_step') && !failures.includes('record')) {
        failures.push('record');
        await db.query(text, params); // committed; then the connection dies before the answer
        throw new Error('Connection terminated unexpectedly');
      }
      return db.query(text, params);
    },
  } as typeof db;
  const runs: number[] = [];
  const job = defineJob({
    name: 'flaky-db',
    maxAttempts: 1,
    async handler(_p, ctx) {
      return ctx.step('s', () => (runs.push(ctx.execution), { n: 7 }));
    },
  });
  const { id } = await createClient({ force: true, db }).enqueue('flaky-db', {});
  const worker = createWorker({ db: flaky, definitions: [job], logger: silentLogger });
  await worker.start();
  await waitFor(async () => ['succeeded', 'failed'].includes(await status(id)), 'the job to end');
  await worker.stop();
  expect(failures).toEqual(['load', 'record']);
  expect(runs).toEqual([1]);
  const { rows } = await db.query<{ status: string; result: unknown }>('select status, result from acta.all_jobs where id = $1', [id]);
  expect(rows).toEqual([{ status: 'succeeded', result: { n: 7 } }]);
  const steps = await db.query('select name, execution, result from acta.steps where job_id = $1', [id]);
  expect(steps.rows).toEqual([{ name: 's', execution: 1, result: { n: 7 } }]);
}, 30_000);

test('two calls of one step at once (Promise.all) run its fn once: the second gets the first one\'s record', async () => {
  let runs = 0;
  const job = defineJob({
    name: 'same-step-twice',
    async handler(_p, ctx) {
      const once = () => ctx.step('charge', async () => {
        runs++;
        await new Promise((r) => setTimeout(r, 50));
        return { charge: runs };
      });
      return Promise.all([once(), once()]);
    },
  });
  const { id } = await createClient({ force: true, db }).enqueue('same-step-twice', {});
  const worker = createWorker({ db, definitions: [job], logger: silentLogger });
  await worker.start();
  await waitFor(async () => (await status(id)) === 'succeeded', 'the job to succeed');
  await worker.stop();
  expect(runs).toBe(1);
  const { rows } = await db.query<{ result: unknown }>('select result from acta.all_jobs where id = $1', [id]);
  expect(rows[0].result).toEqual([{ charge: 1 }, { charge: 1 }]);
});
