// A job as an Observable on real PostgreSQL (docs/rx.md, "A job as an Observable"): client.observe
// follows a job's states to its end across processes (NOTIFY acta_job, the poll as the backstop),
// ctx.progress stores the latest value, client.result is the promise form, and client.cancel of a
// running job reaches its worker (NOTIFY, else the heartbeat) and ends it Cancelled, fenced.
// The ledger's side of each rule is in test/ledger/contract.ts ("cancelling a running job",
// "progress and watched jobs").
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import * as path from 'node:path';
import { delay, firstValueFrom, lastValueFrom, Subject, toArray } from 'rxjs';
import { createClient, createPgDb, createWorker, type Db, DbClosedError, defineJob, JobCancelledError, JobFailedError, JobNotFoundError, type JobRecord, ResultTimeoutError } from '../../src';
import { useTestDatabase, withPgClient } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db, tdb } = useTestDatabase();
beforeEach(() => db.query('truncate acta.jobs, acta.executions'));

/** A handler's gate: `next()` lets it go one step on. */
function steps() {
  const gates: (() => void)[] = [];
  return {
    wait: () => new Promise<void>((resolve) => gates.push(resolve)),
    next: () => gates.shift()?.(),
    get waiting() {
      return gates.length;
    },
  };
}

const summary = (states: JobRecord[]) => states.map((s) => [s.status, s.progress]);

test("observe: the job's states as they change, its progress among them, then its result; result() is its promise form", async () => {
  const gate = steps();
  const report = defineJob({
    name: 'report',
    handler: async (_p: unknown, ctx) => {
      for (let done = 1; done <= 3; done++) {
        await gate.wait();
        ctx.progress({ done });
      }
      await gate.wait();
      return { total: 3 };
    },
  });
  const worker = createWorker({ db, definitions: [report], logger: silentLogger, executors: 2 });
  const client = createClient({ force: true, db });
  const { id } = await client.enqueue(report, {});
  const states: JobRecord[] = [];
  const ended = lastValueFrom(client.observe(id).pipe(toArray()));
  const seen = client.observe(id).subscribe((s) => states.push(s));
  const result = client.result(id);
  try {
    await waitFor(() => states.length === 1, 'the first state');
    expect(states[0]).toMatchObject({ id, status: 'ready', progress: null });
    await worker.start();
    await waitFor(() => states.some((s) => s.status === 'executing'), 'the claim observed');
    for (let done = 1; done <= 3; done++) {
      await waitFor(() => gate.waiting === 1, `step ${done}`);
      gate.next();
      await waitFor(() => states.some((s) => (s.progress as { done: number } | null)?.done === done), `progress ${done} observed`);
    }
    await waitFor(() => gate.waiting === 1, 'the last step');
    gate.next();
    expect(await result).toEqual({ total: 3 });
    const all = await ended;
    expect(all.at(-1)).toMatchObject({ status: 'succeeded', result: { total: 3 }, progress: { done: 3 } });
    // Each observer reads on its own: this one completes after its own last read.
    await waitFor(() => seen.closed, 'the other observer to complete');
    expect(summary(states)).toEqual([
      ['ready', null],
      ['executing', null],
      ['executing', { done: 1 }],
      ['executing', { done: 2 }],
      ['executing', { done: 3 }],
      ['succeeded', { done: 3 }],
    ]);
    expect((await client.getJob(id))?.progress).toEqual({ done: 3 });
  } finally {
    seen.unsubscribe();
    await worker.stop();
  }
});

test("result() of a job enqueued with its typed definition resolves the handler's result as jsonb stored it, typed so without a stated type (the types: test/types/typedIds.ts)", async () => {
  const sentAt = new Date('2026-01-02T03:04:05.678Z');
  const send = defineJob({
    name: 'send',
    handler: async (p: { to: string }) => ({ to: p.to, sentAt, skipped: undefined as string | undefined, tries: [undefined, 1] }),
  });
  const quiet = defineJob({ name: 'quiet', handler: async (_p: { n: number }) => {} });
  const worker = createWorker({ db, definitions: [send, quiet], logger: silentLogger });
  const client = createClient({ db });
  await worker.start();
  try {
    const { id } = await client.enqueue(send, { to: 'a@example.com' });
    const [many, none] = await client.enqueueMany([
      { definition: send, payload: { to: 'b@example.com' } },
      { definition: quiet, payload: { n: 1 } },
    ]);
    const result = await client.result(id, { timeoutMs: 10_000 });
    // Typed as its JSON form: sentAt a string (slice compiles), skipped optional, undefined in an array null.
    expect(result.sentAt.slice(0, 4)).toBe('2026');
    expect(result).toEqual({ to: 'a@example.com', sentAt: sentAt.toISOString(), tries: [null, 1] });
    expect('skipped' in result).toBe(false);
    expect((await client.result(many.id, { timeoutMs: 10_000 })).to).toBe('b@example.com');
    const nothing: null = await client.result(none.id, { timeoutMs: 10_000 });
    expect(nothing).toBeNull();
    // getJob and observe type the stored result alike; the id is the plain decimal string it was.
    expect((await client.getJob(id))?.result?.sentAt).toBe(sentAt.toISOString());
    expect((await lastValueFrom(client.observe(id))).result?.tries).toEqual([null, 1]);
    expect(id).toMatch(/^\d+$/);
    expect(await client.result<{ to: string }>(`${id}`)).toMatchObject({ to: 'a@example.com' }); // a stated type, as before
  } finally {
    await worker.stop();
  }
});

test('observe ends with JobFailedError after a Failed state, JobCancelledError after a Cancelled one, JobNotFoundError for no such job; result() rejects alike, or with ResultTimeoutError', async () => {
  const boom = defineJob({ name: 'boom', maxAttempts: 1, handler: async () => Promise.reject(new Error('kaput')) });
  const worker = createWorker({ db, definitions: [boom], logger: silentLogger });
  await worker.start();
  const client = createClient({ force: true, db });
  try {
    const failed = (await client.enqueue(boom, {})).id;
    const failure = await client.result(failed).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(JobFailedError);
    expect(failure).toMatchObject({ code: 'ACTA_JOB_FAILED', jobId: failed, error: { name: 'Error', message: 'kaput' } });
    const states: JobRecord[] = [];
    await expect(lastValueFrom(client.observe(failed).pipe())).rejects.toBeInstanceOf(JobFailedError);
    await new Promise<void>((resolve) => client.observe(failed).subscribe({ next: (s) => states.push(s), error: () => resolve() }));
    expect(summary(states)).toEqual([['failed', null]]); // the final state first, then the error

    const later = (await client.enqueue(boom, {}, { runAt: new Date(Date.now() + 3_600_000) })).id;
    await expect(client.result(later, { timeoutMs: 300 })).rejects.toEqual(new ResultTimeoutError(later, 300));
    const cancelled = client.result(later);
    expect(await client.cancel(later)).toBe(true);
    await expect(cancelled).rejects.toBeInstanceOf(JobCancelledError);

    // A job that has ended is answered from the first read, whatever the timeout.
    await expect(client.result(failed, { timeoutMs: 0 })).rejects.toBeInstanceOf(JobFailedError);
    await expect(client.result('999999999')).rejects.toBeInstanceOf(JobNotFoundError);
    await expect(client.result('99999999999999999999')).rejects.toBeInstanceOf(JobNotFoundError);
    // Another namespace's job is not found either.
    await expect(createClient({ force: true, db, namespace: 'elsewhere' }).result(failed)).rejects.toBeInstanceOf(JobNotFoundError);
    // observe never throws: a bad id or option errors the Observable.
    await expect(lastValueFrom(client.observe('x'))).rejects.toThrow('a job id is a positive integer');
    await expect(lastValueFrom(client.observe(failed, { pollMs: 1 }))).rejects.toThrow('pollMs must be an integer of ms from 10');
    await expect(client.result(failed, { timeoutMs: -1 })).rejects.toThrow('timeoutMs must be a number of ms');
    await expect(client.result(failed, { timeout: 5 } as never)).rejects.toThrow('unknown result option');
  } finally {
    await worker.stop();
  }
});

test("an attempt's last progress value is stored before its completion, however soon after it the handler returns", async () => {
  const burst = defineJob({
    name: 'burst',
    handler: async (_p: unknown, ctx) => {
      for (let i = 1; i <= 100; i++) ctx.progress({ pct: i });
      return 'done';
    },
  });
  const worker = createWorker({ db, definitions: [burst], logger: silentLogger });
  await worker.start();
  const client = createClient({ force: true, db });
  try {
    const { id } = await client.enqueue(burst, {});
    const states = await lastValueFrom(client.observe(id).pipe(toArray()));
    expect(states.at(-1)).toMatchObject({ status: 'succeeded', result: 'done', progress: { pct: 100 } });
    expect(await client.result(id, { timeoutMs: 0 })).toBe('done');
  } finally {
    await worker.stop();
  }
});

test('many observers share one LISTEN: from the first subscription to the last one ending', async () => {
  let listens = 0;
  let open = 0;
  const counted: Db = {
    ...db,
    query: db.query.bind(db),
    transaction: db.transaction.bind(db),
    close: db.close.bind(db),
    listen: async (channel, handlers, options) => {
      listens++;
      open++;
      const stop = await db.listen(channel, handlers, options);
      return async () => {
        open--;
        await stop();
      };
    },
  };
  const client = createClient({ force: true, db: counted });
  const ids = await Promise.all([1, 2, 3].map(async () => (await client.enqueue('nobody-runs-it', {})).id));
  const subs = ids.map((id) => client.observe(id).subscribe());
  await waitFor(() => open === 1, 'the LISTEN');
  expect(listens).toBe(1);
  subs[0].unsubscribe();
  subs[1].unsubscribe();
  expect(open).toBe(1);
  subs[2].unsubscribe();
  await waitFor(() => open === 0, 'the LISTEN to stop');
  const again = client.observe(ids[0]).subscribe();
  await waitFor(() => open === 1, 'a new LISTEN');
  expect(listens).toBe(2);
  again.unsubscribe();
});

test("cancel a running job: its handler's signal aborts with reason 'cancelled', the job ends Cancelled (uncharged, the ledger says so); a handler that ignores its signal ends the same, and its late result is fenced out", async () => {
  const reasons: unknown[] = [];
  let lateReturn!: () => void;
  const late = new Promise<void>((resolve) => (lateReturn = resolve));
  const lateDone = new Subject<void>();
  const polite = defineJob({
    name: 'polite',
    handler: (_p: unknown, ctx) =>
      new Promise((_resolve, reject) => {
        ctx.signal.addEventListener('abort', () => {
          reasons.push(ctx.signal.reason);
          reject(new Error('stopped'));
        });
      }),
  });
  const deaf = defineJob({
    name: 'deaf',
    handler: async () => {
      await late;
      lateDone.next();
      return 'too late';
    },
  });
  const worker = createWorker({ db, definitions: [polite, deaf], logger: silentLogger, executors: 4 });
  const events: string[] = [];
  worker.events$.subscribe((e) => events.push(e.type));
  await worker.start();
  const client = createClient({ force: true, db });
  try {
    const a = (await client.enqueue(polite, {})).id;
    const b = (await client.enqueue(deaf, {})).id;
    await waitFor(async () => (await client.getJob(a))?.status === 'executing' && (await client.getJob(b))?.status === 'executing', 'both running');
    const ends = [a, b].map((id) => client.result(id).catch((err: unknown) => err));
    expect(await client.cancel(a)).toBe(true);
    expect(await client.cancel(b)).toBe(true);
    for (const end of ends) expect(await end).toBeInstanceOf(JobCancelledError);
    expect(reasons).toEqual(['cancelled']);
    for (const id of [a, b]) {
      expect(await client.getJob(id)).toMatchObject({
        status: 'cancelled',
        attempts: 0,
        cancelRequestedAt: expect.any(Date),
        finishedAt: expect.any(Date),
        error: { name: 'JobCancelledError', code: 'ACTA_JOB_CANCELLED' },
        executions: [{ execution: 1, outcome: 'cancelled', charged: false }],
      });
    }
    expect(events.filter((t) => t === 'cancelled')).toHaveLength(2);
    expect(await worker.metrics.registry.metrics()).toContain('acta_completions_total{outcome="cancelled"} 2');
    // The deaf handler returns after all: nothing of it is written.
    const returned = firstValueFrom(lateDone);
    lateReturn();
    await returned;
    await worker.stop();
    expect(await client.getJob(b)).toMatchObject({ status: 'cancelled', result: null });
    expect(await client.cancel(a)).toBe(false); // finished
  } finally {
    lateReturn();
    await worker.stop();
  }
});

test("without NOTIFY (listen: false) the worker's next heartbeat carries the cancel", async () => {
  const reasons: unknown[] = [];
  const waits = defineJob({
    name: 'waits',
    handler: (_p: unknown, ctx) =>
      new Promise((_resolve, reject) =>
        ctx.signal.addEventListener('abort', () => {
          reasons.push(ctx.signal.reason);
          reject(new Error('stopped'));
        }),
      ),
  });
  const worker = createWorker({ db, definitions: [waits], logger: silentLogger, listen: false, heartbeatIntervalMs: 500, safetyPollMs: 50 });
  await worker.start();
  const client = createClient({ force: true, db });
  try {
    const { id } = await client.enqueue(waits, {});
    await waitFor(async () => (await client.getJob(id))?.status === 'executing', 'the job to run');
    expect(await client.cancel(id)).toBe(true);
    expect(await client.getJob(id)).toMatchObject({ status: 'executing', cancelRequestedAt: expect.any(Date) });
    await expect(client.result(id)).rejects.toBeInstanceOf(JobCancelledError);
    expect(reasons).toEqual(['cancelled']);
  } finally {
    await worker.stop();
  }
});

test("cancel a job whose attempt a beforeExecution hook holds (an hour's delay): it ends Cancelled through its worker at once, its handler never run, the attempt uncharged", async () => {
  let ran = 0;
  const held = defineJob({ name: 'held', handler: () => void ran++ });
  const worker = createWorker({ db, definitions: [held], logger: silentLogger, hooks: { beforeExecution: (attempts, { scheduler }) => attempts.pipe(delay(3_600_000, scheduler)) } });
  await worker.start();
  const client = createClient({ force: true, db });
  try {
    const { id } = await client.enqueue(held, {});
    await waitFor(async () => (await client.getJob(id))?.status === 'executing', 'the job to be claimed');
    expect(await client.cancel(id)).toBe(true);
    // Was: the attempt stayed in the hook with its permit until the delay ran out, the job Executing.
    await expect(client.result(id, { timeoutMs: 10_000 })).rejects.toBeInstanceOf(JobCancelledError);
    const job = await client.getJob(id);
    expect(job).toMatchObject({ status: 'cancelled', attempts: 0 });
    expect(job!.executions.map((e) => [e.outcome, e.charged])).toEqual([['cancelled', false]]);
    expect(ran).toBe(0);
  } finally {
    await worker.stop();
  }
});

test('observe with cancelOnUnsubscribe: unsubscribing before the job ended cancels it (a running one through its worker); after it ended, nothing', async () => {
  const waits = defineJob({
    name: 'waits',
    handler: (_p: unknown, ctx) => new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('stopped')))),
  });
  const quick = defineJob({ name: 'quick', handler: async () => 'ok' });
  // A cancel reaches the worker by NOTIFY. The first claim can come before the worker's LISTEN is
  // up: a cancel sent then is found by the beat the worker makes once LISTEN comes up while it
  // holds attempts (at the default H = 45 s, past this test's 20 s, were it left to the next beat).
  const worker = createWorker({ db, definitions: [waits, quick], logger: silentLogger });
  await worker.start();
  const client = createClient({ force: true, db });
  try {
    const { id } = await client.enqueue(waits, {});
    const states: JobRecord[] = [];
    const sub = client.observe(id, { cancelOnUnsubscribe: true }).subscribe((s) => states.push(s));
    await waitFor(() => states.some((s) => s.status === 'executing'), 'the job to run');
    sub.unsubscribe();
    await waitFor(async () => (await client.getJob(id))?.status === 'cancelled', 'the job to end Cancelled');

    const done = (await client.enqueue(quick, {})).id;
    expect(await lastValueFrom(client.observe(done, { cancelOnUnsubscribe: true }))).toMatchObject({ status: 'succeeded', result: 'ok' });
    const after = client.observe(done, { cancelOnUnsubscribe: true }).subscribe();
    after.unsubscribe();
    expect(await client.getJob(done)).toMatchObject({ status: 'succeeded', cancelRequestedAt: null });
  } finally {
    await worker.stop();
  }
});

test('across processes: an `acta worker` process runs the job; this process observes its progress, and `acta cancel` cancels it there', async () => {
  const root = path.resolve(__dirname, '../..');
  const child = spawn(process.execPath, ['bin/acta.js', 'worker', 'test/fixtures/fault-jobs.js', '--heartbeat', '1000'], {
    cwd: root,
    env: { ...process.env, DATABASE_URL: tdb.url, ACTA_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const actaCli = (args: string[]) =>
    new Promise<{ code: number | null; stdout: string }>((resolve) => {
      const cli = spawn(process.execPath, ['bin/acta.js', ...args], { cwd: root, env: { ...process.env, DATABASE_URL: tdb.url }, stdio: ['ignore', 'pipe', 'inherit'] });
      let stdout = '';
      cli.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      cli.on('exit', (code) => resolve({ code, stdout }));
    });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  try {
    const client = createClient({ force: true, db });
    const { id } = await client.enqueue('steps', { steps: 3, stepMs: 300 });
    const states = await lastValueFrom(client.observe(id).pipe(toArray()));
    expect(states.at(-1)).toMatchObject({ status: 'succeeded', result: { done: 3 } });
    // Each value the handler reported 300 ms apart while it ran was seen, in order (the last one,
    // reported as it returned, is stored only if its report landed before the completion).
    const progress = states.map((s) => s.progress as { done: number; of: number } | null).filter((p) => p !== null);
    expect(progress.every((p) => p.of === 3)).toBe(true);
    expect([...new Set(progress.map((p) => p.done))].slice(0, 3)).toEqual([0, 1, 2]);

    const long = (await client.enqueue('steps', { steps: 100, stepMs: 300 })).id;
    const seen: JobRecord[] = [];
    const ended = new Promise<unknown>((resolve) => client.observe(long).subscribe({ next: (s) => seen.push(s), error: resolve, complete: () => resolve('completed') }));
    await waitFor(() => seen.some((s) => (s.progress as { done: number } | null)?.done === 2), 'progress 2 of the long job');
    // `acta cancel`, from a third process.
    expect(await actaCli(['cancel', long])).toEqual({ code: 0, stdout: '{"cancelRequested":true}\n' });
    expect(await ended).toBeInstanceOf(JobCancelledError);
    expect(await client.getJob(long)).toMatchObject({ status: 'cancelled', executions: [{ outcome: 'cancelled', charged: false }] });
  } finally {
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  }
  expect(stderr).toBe('');
}, 60_000);

test("db.close() under open followers on a server: observe and result end with DbClosedError, later calls reject alike, and the Db's LISTEN is gone", async () => {
  const own = createPgDb({ connectionString: tdb.url, max: 2 });
  const client = createClient({ force: true, db: own });
  const { id } = await client.enqueue('nobody-runs-it', {});
  const states: JobRecord[] = [];
  const ended = new Promise<unknown>((resolve) => client.observe(id, { pollMs: 50 }).subscribe({ next: (s) => states.push(s), error: resolve, complete: () => resolve('completed') }));
  const result = client.result(id).catch((err: unknown) => err);
  await waitFor(() => states.length === 1, 'the first state');
  const listeners = async () => Number((await db.query<{ n: string }>(`select count(*) as n from pg_stat_activity where application_name = 'acta listener' and datname = current_database()`)).rows[0].n);
  await waitFor(async () => (await listeners()) >= 1, 'the LISTEN connection');
  await own.close();
  expect(await ended).toBeInstanceOf(DbClosedError);
  expect(await result).toBeInstanceOf(DbClosedError);
  await expect(client.getJob(id)).rejects.toBeInstanceOf(DbClosedError);
  await expect(client.result(id)).rejects.toBeInstanceOf(DbClosedError);
  await expect(own.close()).resolves.toBeUndefined(); // again: the same close
  await waitFor(async () => (await listeners()) === 0, 'the LISTEN connection to end');
});

test("a claim that skipped the row a watch held: the watch's commit wakes the namespace (NOTIFY acta_jobs), and a client with publishWakeup sends its own wakeup for a Ready job it starts to follow", async () => {
  // result() right after enqueue marks the row watched while a woken worker claims: the claim
  // skips the locked row and answers "nothing due", and without another wakeup the job waited for
  // the safety poll (seen: 1 s by default, 8 s of 8 s here and there, on LISTEN and on Redis).
  const client = createClient({ force: true, db });
  const { id } = await client.enqueue('nobody-runs-it', {});
  await withPgClient(tdb.url, async (listener) => {
    const heard: string[] = [];
    listener.on('notification', (n) => heard.push(n.payload ?? ''));
    await listener.query('listen acta_jobs'); // after the enqueue's commit: its own NOTIFY is not heard
    await withPgClient(tdb.url, async (watcher) => {
      await watcher.query('begin');
      expect((await watcher.query(`select acta.watch_job('default', $1) as found`, [id])).rows[0].found).toBe(true);
      const claim = await db.query<{ job_id: string | null; next_due_in_ms: number | null }>(
        `select job_id::text, next_due_in_ms from acta.claim_jobs('default', $1, array['nobody-runs-it'], 8, 60000)`,
        [randomUUID()],
      );
      expect(claim.rows).toEqual([{ job_id: null, next_due_in_ms: null }]); // skipped: locked by the watch
      expect(heard).toEqual([]);
      await watcher.query('commit');
    });
    await waitFor(() => heard.includes('default'), "the watch's wakeup");
  });
  expect((await client.getJob(id))?.status).toBe('ready');

  // The client's own wakeup (Redis, for workers that do not LISTEN): once per follower of a Ready
  // job, none for one that has ended.
  const woken: string[] = [];
  const publishing = createClient({ force: true, db, publishWakeup: (ns) => woken.push(ns) });
  const second = await publishing.enqueue('nobody-runs-it', {});
  expect(woken).toEqual(['default']); // the enqueue's
  const states: JobRecord[] = [];
  const following = publishing.observe(second.id, { pollMs: 20 }).subscribe((s) => states.push(s));
  try {
    await waitFor(() => woken.length === 2, "the follower's wakeup");
    await new Promise((r) => setTimeout(r, 100)); // polls read it again: no more wakeups
    expect(woken).toEqual(['default', 'default']);
  } finally {
    following.unsubscribe();
  }
  await publishing.cancel(second.id);
  await expect(publishing.result(second.id)).rejects.toBeInstanceOf(JobCancelledError);
  expect(woken).toEqual(['default', 'default']);
});
