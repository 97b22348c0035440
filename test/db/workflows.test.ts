// Workflows on a real database with a real worker (docs/workflows.md): a signal sent in a
// transaction exists only at its commit; a signal sent before the wait is consumed by it; a
// deleted child counts as ended; a fail-parent child fails its parent; `acta signal` delivers.
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { ChildFailedError, ChildInParentLaneError, createClient, createWorker, defineJob, type JobContext } from '../../src';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db, tdb } = useTestDatabase();
// A job's row wherever it is: one that succeeded may have left acta.jobs (acta.all_jobs; migration 0023).
// Children stay in acta.jobs (their parent reads them), so the reads by parent_id below read it.
const status = async (id: string) => (await db.query<{ status: string }>('select status from acta.all_jobs where id = $1', [id])).rows[0]?.status;

test('a signal in a rolled-back transaction is never delivered; one committed is; a signal before the wait is consumed by it', async () => {
  const got: unknown[] = [];
  const gate = defineJob({
    name: 'wf-gate',
    handler: async (p: { early: boolean }, ctx) => {
      if (p.early) await ctx.step('let the signal in', () => new Promise((r) => setTimeout(r, 300)));
      got.push(await ctx.waitForSignal('open'));
    },
  });
  const client = createClient({ force: true, db });
  const worker = createWorker({ db, definitions: [gate], logger: silentLogger, executors: 2 });
  await worker.start();
  try {
    const { id } = await client.enqueue(gate, { early: false });
    await waitFor(async () => (await status(id)) === 'waiting', 'the job parks');
    await db.transaction(async (tx) => {
      expect(await client.signal(id, 'open', 'rolled back', { tx })).toEqual({ delivered: true, jobId: id, consumed: true });
      throw new Error('rollback');
    }).catch(() => undefined);
    expect(await status(id)).toBe('waiting');
    expect(await client.signal({ idempotencyKey: 'nope' }, 'open', 1)).toEqual({ delivered: false, jobId: null, reason: 'not_found' });
    expect(await client.signal(id, 'open', 'committed')).toEqual({ delivered: true, jobId: id, consumed: true });
    await waitFor(async () => (await status(id)) === 'succeeded', 'the job resumes');
    expect(await client.signal(id, 'open', 'late')).toEqual({ delivered: false, jobId: id, reason: 'ended' });

    const early = await client.enqueue(gate, { early: true }, { idempotencyKey: 'early-job' });
    await waitFor(async () => (await status(early.id)) === 'executing', 'the job runs');
    expect(await client.signal({ idempotencyKey: 'early-job' }, 'open', 'before the wait')).toMatchObject({ delivered: true, consumed: false });
    await waitFor(async () => (await status(early.id)) === 'succeeded', 'the job consumes the signal it found');
    expect(got).toEqual(['committed', 'before the wait']);
    const job = await client.getJob(early.id);
    expect(job!.executions.map((e) => e.outcome)).toEqual(['signal_wait', 'succeeded']);
  } finally {
    await worker.stop();
  }
});

test("a child's id from ctx.spawn carries its definition's result type: a parent that gives it out, and client.result of it, need no stated type (the types: test/types/typedIds.ts)", async () => {
  const child = defineJob({ name: 'wf-typed-child', handler: async (p: { n: number }) => ({ doubled: p.n * 2, at: new Date(0) }) });
  const parent = defineJob({
    name: 'wf-typed-parent',
    handler: async (p: { n: number }, ctx) => {
      const id = await ctx.spawn(child, { n: p.n });
      await ctx.waitForChildren();
      return { child: id };
    },
  });
  const client = createClient({ db });
  const worker = createWorker({ db, definitions: [parent, child], logger: silentLogger, executors: 2 });
  await worker.start();
  try {
    const { id } = await client.enqueue(parent, { n: 21 });
    const { child: childId } = await client.result(id, { timeoutMs: 10_000 });
    const result = await client.result(childId, { timeoutMs: 10_000 });
    // Typed { doubled: number; at: string }: a number's and a string's members compile.
    expect([result.doubled.toFixed(0), result.at.slice(0, 4)]).toEqual(['42', '1970']);
  } finally {
    await worker.stop();
  }
});

test("a deleted child counts as ended for its parent; a 'fail-parent' child that fails fails its parent without retry", async () => {
  const slow = defineJob({ name: 'wf-slow', handler: () => new Promise((r) => setTimeout(r, 60_000)), maxAttempts: 1 });
  const bad = defineJob({ name: 'wf-bad', handler: () => Promise.reject(new Error('bad child')), maxAttempts: 1 });
  const parent = defineJob({
    name: 'wf-parent',
    handler: async (p: { fail: boolean }, ctx) => {
      if (p.fail) await ctx.spawn(bad, {}, { onChildFailure: 'fail-parent' });
      else await ctx.spawn(slow, {}, { runAt: new Date(Date.now() + 3_600_000) });
      return (await ctx.waitForChildren()).map((o) => o.status);
    },
  });
  const client = createClient({ force: true, db });
  const worker = createWorker({ db, definitions: [parent, slow, bad], logger: silentLogger, executors: 2 });
  await worker.start();
  try {
    const { id } = await client.enqueue(parent, { fail: false });
    await waitFor(async () => (await status(id)) === 'waiting', 'the parent parks');
    await db.query('delete from acta.jobs where parent_id = $1', [id]);
    expect(await client.result(id, { timeoutMs: 10_000 })).toEqual(['deleted']);

    const failing = await client.enqueue(parent, { fail: true });
    await waitFor(async () => (await status(failing.id)) === 'failed', 'the parent fails');
    const job = await client.getJob(failing.id);
    expect(job!.error).toMatchObject({ name: 'ChildFailedError', code: 'ACTA_CHILD_FAILED' });
    expect(job!.attempts).toBe(1);
    expect(new ChildFailedError({ id: '1', status: 'failed' }).code).toBe('ACTA_CHILD_FAILED');
  } finally {
    await worker.stop();
  }
});

test("a spawn whose idempotency key names an existing job reports that job as it is (not 'deleted', which failed a fail-parent wait); a fail-parent wait woken by a failure names that child, not a sibling still running", async () => {
  const ok = defineJob({ name: 'wf-dedup-ok', handler: () => 'fine' });
  const bad = defineJob({ name: 'wf-dedup-bad', handler: () => Promise.reject(new Error('bad child')), maxAttempts: 1 });
  const parent = defineJob({
    name: 'wf-dedup-parent',
    maxAttempts: 1,
    handler: async (p: { early: boolean }, ctx) => {
      if (p.early) {
        await ctx.spawn(ok, {}, { onChildFailure: 'fail-parent', runAt: new Date(Date.now() + 3_600_000) });
        await ctx.spawn(bad, {}, { onChildFailure: 'fail-parent' });
      } else {
        await ctx.spawn(ok, {}, { onChildFailure: 'fail-parent', idempotencyKey: 'wf-dedup-shared' });
      }
      return ctx.waitForChildren();
    },
  });
  const client = createClient({ force: true, db });
  const worker = createWorker({ db, definitions: [parent, ok, bad], logger: silentLogger, executors: 2 });
  await worker.start();
  try {
    const shared = await client.enqueue(ok, {}, { idempotencyKey: 'wf-dedup-shared' });
    expect(await client.result(shared.id, { timeoutMs: 10_000 })).toBe('fine');
    const { id } = await client.enqueue(parent, { early: false });
    expect(await client.result(id, { timeoutMs: 10_000 })).toEqual([{ id: shared.id, status: 'succeeded', result: 'fine' }]);

    const early = await client.enqueue(parent, { early: true });
    await waitFor(async () => (await status(early.id)) === 'failed', 'the parent fails');
    const [badId] = (await db.query<{ id: string }>("select id::text from acta.jobs where parent_id = $1 and definition = 'wf-dedup-bad'", [early.id])).rows.map((r) => r.id);
    expect((await client.getJob(early.id))!.error).toMatchObject({ name: 'ChildFailedError', message: expect.stringContaining(`child job ${badId} ended failed`) });
  } finally {
    await worker.stop();
  }
});

test("a parent waiting for a child in its own lane fails without retry, saying why, and the child then runs (the wait could never end)", async () => {
  const child = defineJob({ name: 'wf-lane-child', handler: () => 'ran' });
  const client = createClient({ force: true, db });
  const parent = defineJob({
    name: 'wf-lane-parent',
    handler: async (p: { lane: string; cancel?: boolean }, ctx) => {
      const id = await ctx.spawn(child, {}, { lane: p.lane });
      if (p.cancel) await ctx.step('cancel the child', () => client.cancel(id));
      return ctx.waitForChildren();
    },
  });
  const worker = createWorker({ db, definitions: [parent, child], logger: silentLogger, executors: 2 });
  await worker.start();
  try {
    const stuck = await client.enqueue(parent, { lane: 'L' }, { lane: 'L' });
    await waitFor(async () => (await status(stuck.id)) === 'failed', 'the parent fails');
    const job = await client.getJob(stuck.id);
    expect(job!.error).toMatchObject({ name: 'ChildInParentLaneError', code: 'ACTA_CHILD_IN_PARENT_LANE' });
    expect(job!.attempts).toBe(1);
    const [{ id: childId }] = (await db.query<{ id: string }>('select id::text from acta.jobs where parent_id = $1', [stuck.id])).rows;
    expect(await client.result(childId, { timeoutMs: 10_000 })).toBe('ran');

    // Another lane is fine: the parent parks and resumes with the child's outcome.
    const fine = await client.enqueue(parent, { lane: 'M' }, { lane: 'L' });
    expect(await client.result(fine.id, { timeoutMs: 10_000 })).toMatchObject([{ status: 'succeeded', result: 'ran' }]);
    // A child in the parent's lane that has ended (cancelled here) is no obstacle: the wait returns it.
    const cancelled = await client.enqueue(parent, { lane: 'L', cancel: true }, { lane: 'L' });
    expect(await client.result(cancelled.id, { timeoutMs: 10_000 })).toMatchObject([{ status: 'cancelled' }]);
    expect(new ChildInParentLaneError('1', 'L').code).toBe('ACTA_CHILD_IN_PARENT_LANE');
  } finally {
    await worker.stop();
  }
});

test("a parent waiting for a child in its waiting grandparent's lane fails without retry; the child runs, and the grandparent resumes with the parent's failure", async () => {
  const child = defineJob({ name: 'wf-gl-child', handler: () => 'ran' });
  const parent = defineJob({
    name: 'wf-gl-parent',
    handler: async (p: { lane: string }, ctx) => {
      await ctx.spawn(child, {}, { lane: p.lane });
      return ctx.waitForChildren();
    },
  });
  const grand = defineJob({
    name: 'wf-gl-grand',
    handler: async (p: { lane: string }, ctx) => {
      await ctx.spawn(parent, p); // the parent in no lane; its child in the grandparent's
      return (await ctx.waitForChildren()).map((o) => o.status);
    },
  });
  const client = createClient({ force: true, db });
  const worker = createWorker({ db, definitions: [grand, parent, child], logger: silentLogger, executors: 3 });
  await worker.start();
  try {
    // Before the rule covered ancestors, the parent parked for a child that could not start while
    // the grandparent, parked for the parent, held lane G: all three waited for ever.
    const g = await client.enqueue(grand, { lane: 'G' }, { lane: 'G' });
    expect(await client.result(g.id, { timeoutMs: 15_000 })).toEqual(['failed']);
    const [{ id: parentId }] = (await db.query<{ id: string }>('select id::text from acta.jobs where parent_id = $1', [g.id])).rows;
    const failed = await client.getJob(parentId);
    expect(failed).toMatchObject({ status: 'failed', attempts: 1, error: { name: 'ChildInParentLaneError', message: expect.stringContaining('lane "G"') } });
    const [{ id: childId }] = (await db.query<{ id: string }>('select id::text from acta.jobs where parent_id = $1', [parentId])).rows;
    expect(await client.result(childId, { timeoutMs: 10_000 })).toBe('ran');
    // The grandparent's lane left free (another lane for the child): the family completes.
    const fine = await client.enqueue(grand, { lane: 'M' }, { lane: 'G' });
    expect(await client.result(fine.id, { timeoutMs: 15_000 })).toEqual(['succeeded']);
  } finally {
    await worker.stop();
  }
});

test('acta signal delivers by id and by key, and exits 1 saying why when the job has ended', async () => {
  const client = createClient({ force: true, db });
  const { id } = await client.enqueue('wf-cli', {}, { idempotencyKey: 'cli-job' });
  const run = (...args: string[]) => promisify(execFile)('node', [path.join(__dirname, '../../bin/acta.js'), ...args], { env: { ...process.env, DATABASE_URL: tdb.url } });
  expect(JSON.parse((await run('signal', id, 'go', '{"a":1}')).stdout)).toEqual({ delivered: true, jobId: id, consumed: false });
  expect(JSON.parse((await run('signal', '--key', 'cli-job', 'go', '--idempotency-key', 'k')).stdout)).toMatchObject({ delivered: true });
  await expect(run('signal', '--key', 'cli-job', 'go', '--idempotency-key', 'k')).rejects.toMatchObject({ stderr: expect.stringContaining('duplicate') });
  await client.cancel(id);
  await expect(run('signal', id, 'go')).rejects.toMatchObject({ code: 1, stderr: expect.stringContaining('ended') });
  const { rows } = await db.query<{ name: string; payload: unknown }>('select name, payload from acta.signals where job_id = $1 order by id', [id]);
  expect(rows).toEqual([
    { name: 'go', payload: { a: 1 } },
    { name: 'go', payload: null },
  ]);
});

test('spawn and wait survive transient database errors: a spawn whose answer was lost is repeated and spawns once; the children read is repeated', async () => {
  const failures: string[] = [];
  const flaky = {
    ...db,
    query: async (text: string, params?: unknown[]) => {
      if (text.includes('acta.spawn_children') && !failures.includes('spawn')) {
        failures.push('spawn');
        await db.query(text, params); // committed; then the connection dies before the answer
        throw new Error('Connection terminated unexpectedly');
      }
      if (text.includes('result, error from acta.jobs where id = any') && !failures.includes('children')) { // readChildren's read
        failures.push('children');
        throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
      }
      return db.query(text, params);
    },
  } as typeof db;
  const leaf = defineJob({ name: 'wf-leaf', handler: (p: { i: number }) => p.i * 10 });
  const parent = defineJob({
    name: 'wf-flaky-parent',
    maxAttempts: 1,
    handler: async (_p, ctx) => {
      await ctx.spawnMany([0, 1, 2].map((i) => ({ definition: leaf, payload: { i } })));
      return (await ctx.waitForChildren()).map((o) => o.result);
    },
  });
  const client = createClient({ db });
  const worker = createWorker({ db: flaky, definitions: [parent, leaf], logger: silentLogger, executors: 2 });
  await worker.start();
  try {
    const { id } = await client.enqueue(parent, {});
    expect(await client.result(id, { timeoutMs: 20_000 })).toEqual([0, 10, 20]);
    expect(failures).toEqual(['spawn', 'children']);
    const { rows } = await db.query<{ n: number }>('select count(*)::int as n from acta.jobs where parent_id = $1', [id]);
    expect(rows[0].n).toBe(3);
    expect((await client.getJob(id))!.attempts).toBe(1);
  } finally {
    await worker.stop();
  }
}, 30_000);

test("a user step named acta:… is refused with a ConfigError: the prefix is acta's own waits and spawns", async () => {
  const sneaky = defineJob({ name: 'wf-sneaky', maxAttempts: 1, handler: (_p, ctx) => ctx.step('acta:signal:0', () => 1) });
  const client = createClient({ db });
  const worker = createWorker({ db, definitions: [sneaky], logger: silentLogger });
  await worker.start();
  try {
    const { id } = await client.enqueue(sneaky, {});
    await waitFor(async () => (await status(id)) === 'failed', 'the job fails');
    expect((await client.getJob(id))!.error).toMatchObject({ name: 'ConfigError', code: 'ACTA_CONFIG', message: expect.stringContaining('acta:') });
    expect((await db.query('select 1 from acta.steps where job_id = $1', [id])).rows).toEqual([]);
  } finally {
    await worker.stop();
  }
});

test("a workflow call ctx refuses (a bad option, signal name, timeout or payload) fails the job at its first attempt, without retry, the error stored", async () => {
  const kid = defineJob({ name: 'wf-refused-kid', handler: () => 1 });
  const calls: Record<string, (ctx: JobContext) => Promise<unknown>> = {
    badPolicy: (ctx) => ctx.spawn(kid, {}, { onChildFailure: 'explode' as never }),
    badTimeout: (ctx) => ctx.waitForSignal('x', { timeoutMs: -5 }),
    emptyName: (ctx) => ctx.waitForSignal(''),
    bigintPayload: (ctx) => ctx.spawn(kid, { n: 1n }),
    notAnArray: (ctx) => ctx.spawnMany('kid' as never),
    // A misspelt timeout option (or a bare number) parked the job with no timeout at all, for ever.
    unknownWaitOption: (ctx) => ctx.waitForSignal('x', { timeout: 60_000 } as never),
    waitOptionsNotAnObject: (ctx) => ctx.waitForSignal('x', 60_000 as never),
    // A step without its function threw a TypeError, retried as any Error, attempt after attempt.
    stepWithoutFn: (ctx) => ctx.step('s', undefined as never),
  };
  const refused = defineJob({ name: 'wf-refused', backoff: () => 10, handler: (p: { call: string }, ctx) => calls[p.call](ctx) });
  const client = createClient({ db });
  const worker = createWorker({ db, definitions: [refused, kid], logger: silentLogger });
  await worker.start();
  try {
    const ids = await Promise.all(Object.keys(calls).map(async (call) => [call, (await client.enqueue(refused, { call })).id] as const));
    const seen: Record<string, unknown> = {};
    for (const [call, id] of ids) {
      await waitFor(async () => (await status(id)) === 'failed', `${call} fails`);
      const job = (await client.getJob(id))!;
      seen[call] = [job.attempts, job.executions.length, job.error?.name];
    }
    expect(seen).toEqual({
      badPolicy: [1, 1, 'ConfigError'],
      badTimeout: [1, 1, 'ConfigError'],
      emptyName: [1, 1, 'ConfigError'],
      bigintPayload: [1, 1, 'InvalidJsonError'],
      notAnArray: [1, 1, 'ConfigError'],
      unknownWaitOption: [1, 1, 'ConfigError'],
      waitOptionsNotAnObject: [1, 1, 'ConfigError'],
      stepWithoutFn: [1, 1, 'ConfigError'],
    });
    expect((await db.query("select 1 from acta.all_jobs where definition = 'wf-refused-kid'")).rows).toEqual([]);
  } finally {
    await worker.stop();
  }
});

test("a child's policy keys: computed by the definition the spawning worker runs; a keyed definition it does not run, given by name without them, is refused (ACTA_POLICY_KEY_MISSING), nothing spawned", async () => {
  const keyedHere = defineJob({ name: 'wf-keyed-here', concurrency: { key: (p: { account: string }) => p.account, limit: 1 }, handler: () => 'ran' });
  const keyedThere = defineJob({ name: 'wf-keyed-there', concurrency: { key: (p: { account: string }) => p.account, limit: 1 }, handler: () => 'ran' });
  const parent = defineJob({
    name: 'wf-keys-parent',
    maxAttempts: 1,
    handler: async (p: { child: string; key?: string }, ctx) => {
      await ctx.spawn(p.child, { account: 'acc-1' }, p.key ? { concurrencyKey: p.key } : {});
      return (await ctx.waitForChildren()).map((o) => o.status);
    },
  });
  const client = createClient({ db });
  const worker = createWorker({ db, definitions: [parent, keyedHere], logger: silentLogger });
  const other = createWorker({ db, definitions: [keyedThere], logger: silentLogger });
  await worker.start();
  await other.start();
  try {
    // Before, a child's keys were taken as given: this one ran with no key, outside its limit.
    const here = await client.enqueue(parent, { child: 'wf-keyed-here' });
    expect(await client.result(here.id, { timeoutMs: 10_000 })).toEqual(['succeeded']);
    expect((await db.query("select concurrency_key from acta.all_jobs where definition = 'wf-keyed-here'")).rows).toEqual([{ concurrency_key: 'acc-1' }]);
    const missing = await client.enqueue(parent, { child: 'wf-keyed-there' });
    await waitFor(async () => (await status(missing.id)) === 'failed', 'the parent fails');
    expect((await client.getJob(missing.id))!.error).toMatchObject({ name: 'EnqueueRefusedError', code: 'ACTA_POLICY_KEY_MISSING' });
    expect((await db.query("select 1 from acta.all_jobs where definition = 'wf-keyed-there'")).rows).toEqual([]);
    const given = await client.enqueue(parent, { child: 'wf-keyed-there', key: 'acc-2' });
    expect(await client.result(given.id, { timeoutMs: 10_000 })).toEqual(['succeeded']);
  } finally {
    await worker.stop();
    await other.stop();
  }
});

test('a child named by a definition no worker declared in the namespace is refused as client.enqueue refuses it (EnqueueRefusedError), nothing spawned; one another worker declared, or forced, is spawned', async () => {
  const elsewhere = defineJob({ name: 'wf-declared-elsewhere', handler: () => 'ran' });
  const parent = defineJob({
    name: 'wf-typo-parent',
    maxAttempts: 1,
    handler: async (p: { child: string; force?: boolean }, ctx) => {
      await ctx.spawn(p.child, {}, p.force ? { force: true } : {});
      return (await ctx.waitForChildren()).map((o) => o.status);
    },
  });
  const client = createClient({ db });
  const worker = createWorker({ db, definitions: [parent], logger: silentLogger });
  const other = createWorker({ db, definitions: [elsewhere], logger: silentLogger });
  await worker.start();
  await other.start();
  try {
    const typo = await client.enqueue(parent, { child: 'wf-declared-elswhere' });
    await waitFor(async () => (await status(typo.id)) === 'failed', 'the parent fails');
    const job = (await client.getJob(typo.id))!;
    expect(job.error).toMatchObject({ name: 'EnqueueRefusedError', code: 'ACTA_UNKNOWN_DEFINITION' });
    // The message names the fix, in the words of a spawn, and what the namespace declares.
    expect(job.error!.message).toMatch(/^no worker has declared a job definition named "wf-declared-elswhere" in namespace "default"; declared there: .*"wf-declared-elsewhere".*the spawn option \{ force: true \}$/);
    expect((await db.query("select 1 from acta.all_jobs where definition = 'wf-declared-elswhere'")).rows).toEqual([]);
    expect((await db.query('select name from acta.steps where job_id = $1', [typo.id])).rows).toEqual([]);

    // Declared by the other worker, which runs it.
    expect(await client.result((await client.enqueue(parent, { child: 'wf-declared-elsewhere' })).id, { timeoutMs: 10_000 })).toEqual(['succeeded']);
    // Forced: spawned though no worker declared it (it waits for one).
    const forced = await client.enqueue(parent, { child: 'wf-not-started-yet', force: true });
    await waitFor(async () => (await status(forced.id)) === 'waiting', 'the parent waits for its forced child');
    expect((await db.query("select status from acta.jobs where definition = 'wf-not-started-yet'")).rows).toEqual([{ status: 'ready' }]);
  } finally {
    await worker.stop();
    await other.stop();
  }
});

test('a retried child (retryJobs) is waited for again: its parent, still waiting for a sibling, does not resume when the retried child ends a second time', async () => {
  const flaky = defineJob({ name: 'wf-retried-flaky', maxAttempts: 1, handler: () => Promise.reject(new Error('flaky child')) });
  const gated = defineJob({ name: 'wf-retried-gated', handler: (_p: null, ctx: JobContext) => ctx.waitForSignal('go') });
  const parent = defineJob({
    name: 'wf-retried-parent',
    handler: async (_p: null, ctx) => {
      await ctx.spawnMany([{ definition: flaky, payload: null }, { definition: gated, payload: null }]);
      return (await ctx.waitForChildren()).map((o) => o.status);
    },
  });
  const client = createClient({ force: true, db });
  const worker = createWorker({ db, definitions: [parent, flaky, gated], logger: silentLogger, executors: 4 });
  await worker.start();
  try {
    const { id } = await client.enqueue(parent, null);
    const child = async (definition: string) => (await db.query<{ id: string }>('select id::text from acta.jobs where parent_id = $1 and definition = $2', [id, definition])).rows[0]?.id;
    await waitFor(async () => (await status(id)) === 'waiting' && (await status((await child('wf-retried-gated'))!)) === 'waiting' && (await status((await child('wf-retried-flaky'))!)) === 'failed', 'a child fails, its sibling and the parent wait');
    const flakyId = (await child('wf-retried-flaky'))!;
    const gatedId = (await child('wf-retried-gated'))!;
    // Retried, the failed child is open again for its parent; its second failure must not count as the sibling's end.
    expect(await client.retryJobs({ ids: [flakyId] })).toEqual([flakyId]);
    await waitFor(async () => (await client.getJob(flakyId))!.executions.length === 2 && (await status(flakyId)) === 'failed', 'the retried child fails again');
    await new Promise((r) => setTimeout(r, 300));
    expect(await status(id)).toBe('waiting');
    expect(await client.signal(gatedId, 'go', 1)).toMatchObject({ delivered: true });
    expect(await client.result(id, { timeoutMs: 10_000 })).toEqual(['failed', 'succeeded']);
  } finally {
    await worker.stop();
  }
});
