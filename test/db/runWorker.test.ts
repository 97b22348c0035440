// A worker as an Observable on a real database (docs/DESIGN.md, "The Rx surface"; src/worker/runWorker.ts):
// runWorker$ composed with takeUntil, retry and merge as any stream is.
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Registry as PromRegistry } from 'prom-client';
import { BehaviorSubject, defer, filter, firstValueFrom, from, lastValueFrom, map, merge, NEVER, retry, scan, share, Subject, switchMap, takeUntil, takeWhile, tap, toArray } from 'rxjs';
import { ConfigError, createClient, defineJob, HookFailedError, migrate, runWorker$, SchemaNotMigratedError, type WorkerEvent } from '../../src';
import { createTestDatabase, useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db } = useTestDatabase();
beforeEach(() => db.query('truncate acta.jobs, acta.succeeded_jobs, acta.executions, acta.workers'));

const base = { db, logger: silentLogger, safetyPollMs: 100, shutdownTimeoutMs: 5_000 } as const;

const workerStatus = async (id: string) => (await db.query<{ status: string }>('select status from acta.workers where id = $1', [id])).rows[0]?.status;
// Every job, the succeeded ones that left acta.jobs included (acta.all_jobs; the ledger likewise: acta.all_executions).
const jobStatuses = async () => (await db.query<{ status: string }>('select status from acta.all_jobs order by id')).rows.map((r) => r.status);

test('runWorker$ with takeUntil: subscribe starts a worker, its events flow; the unsubscription is a graceful stop: the worker row ends stopped, no job lost', async () => {
  const slow = defineJob<{ n: number }>({ name: 'slow', handler: () => sleep(300) });
  await createClient({ force: true, db }).enqueueMany(Array.from({ length: 6 }, (_, n) => ({ definition: slow, payload: { n } })));
  const firstStart = new Subject<void>();
  const events: WorkerEvent[] = [];
  let completed = false;
  runWorker$({ ...base, definitions: [slow], executors: 2 })
    .pipe(
      tap((e) => e.type === 'started' && firstStart.next()),
      takeUntil(firstStart),
    )
    .subscribe({ next: (e) => events.push(e), complete: () => (completed = true) });
  await waitFor(() => completed, 'the first start');
  const running = events.find((e) => e.type === 'running');
  expect(running).toBeDefined();
  const workerId = (running as { workerId: string }).workerId;
  // The stop runs on after the unsubscription: it waits for the two running handlers and hands back the rest.
  await waitFor(async () => (await workerStatus(workerId)) === 'stopped', 'the worker row to be stopped');
  const statuses = await jobStatuses();
  expect(statuses.filter((s) => s === 'succeeded')).toHaveLength(2);
  expect(statuses.filter((s) => s === 'ready')).toHaveLength(4);
  const { rows } = await db.query<{ outcome: string; charged: boolean }>('select outcome, charged from acta.all_executions order by outcome');
  expect(rows).toEqual([
    { outcome: 'succeeded', charged: true },
    { outcome: 'succeeded', charged: true },
  ]);
});

test('runWorker$ with stop$: the stream completes after the graceful stop, with stopped last', async () => {
  const quick = defineJob<{ n: number }>({ name: 'quick', handler: async () => undefined });
  await createClient({ force: true, db }).enqueueMany(Array.from({ length: 3 }, (_, n) => ({ definition: quick, payload: { n } })));
  const stop$ = new Subject<void>();
  const all = lastValueFrom(
    runWorker$({ ...base, definitions: [quick], stop$ }).pipe(
      tap((e) => e.type === 'succeeded' && (succeeded += 1) === 3 && stop$.next()),
      toArray(),
    ),
  );
  let succeeded = 0;
  const events = await all;
  expect(events[0].type).toBe('running');
  expect(events.at(-1)).toEqual({ type: 'stopped', workerId: (events[0] as { workerId: string }).workerId });
  expect(await workerStatus((events[0] as { workerId: string }).workerId)).toBe('stopped');
  expect(events.filter((e) => e.type === 'succeeded')).toHaveLength(3);
});

test('runWorker$ with options createWorker refuses errors at subscription with ConfigError, and starts nothing', async () => {
  const job = defineJob<{ n: number }>({ name: 'job', handler: async () => undefined });
  await expect(lastValueFrom(runWorker$({ ...base, definitions: [job], executors: 0 }))).rejects.toBeInstanceOf(ConfigError);
  await expect(lastValueFrom(runWorker$({ ...base, definitions: [job], stop: NEVER } as never))).rejects.toThrow(/^unknown worker option "stop"/);
  expect((await db.query('select 1 from acta.workers')).rows).toEqual([]);
});

test('runWorker$ errors when the worker cannot start (unmigrated schema); retry, after migrating, starts a new worker', async () => {
  const tdb = await createTestDatabase({ migrate: false });
  const fresh = tdb.open();
  try {
    const job = defineJob<{ n: number }>({ name: 'job', handler: async () => undefined });
    await expect(lastValueFrom(runWorker$({ ...base, db: fresh, definitions: [job] }))).rejects.toBeInstanceOf(SchemaNotMigratedError);

    const errors: unknown[] = [];
    const firstSucceeded = await firstValueFrom(
      runWorker$({ ...base, db: fresh, definitions: [job] }).pipe(
        retry({
          count: 1,
          delay: (err) => {
            errors.push(err);
            return defer(async () => {
              await migrate(fresh);
              await createClient({ force: true, db: fresh }).enqueue(job, { n: 1 });
            });
          },
        }),
        filter((e) => e.type === 'succeeded'),
      ),
    );
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(SchemaNotMigratedError);
    expect(firstSucceeded).toMatchObject({ type: 'succeeded', definition: 'job', attempt: 1 });
  } finally {
    await tdb.drop();
  }
});

test('runWorker$ with retry: a worker that stops itself (a failing beforeExecution hook) errors the stream, and retry runs a NEW incarnation that finishes the jobs', async () => {
  const job = defineJob<{ n: number }>({ name: 'job', handler: async () => undefined });
  const ids = await createClient({ force: true, db }).enqueueMany(Array.from({ length: 4 }, (_, n) => ({ definition: job, payload: { n } })));
  let failuresLeft = 1;
  const metricsRegistry = new PromRegistry(); // shared by the incarnations: each removes its metrics when it ends
  const errors: unknown[] = [];
  const events = await lastValueFrom(
    runWorker$({
      ...base,
      definitions: [job],
      metricsRegistry,
      hooks: {
        beforeExecution: (attempts) =>
          attempts.pipe(
            map((a) => {
              if (failuresLeft > 0 && (a.payload as { n: number }).n === 2) {
                failuresLeft--;
                throw new Error('tenant lookup failed');
              }
              return a;
            }),
          ),
      },
    }).pipe(
      retry({ count: 1, delay: (err) => (errors.push(err), from([0])) }),
      scan((seen: WorkerEvent[], e) => [...seen, e], []),
      takeWhile((seen) => seen.filter((e) => e.type === 'succeeded').length < ids.length, true),
    ),
  );
  expect(errors).toHaveLength(1);
  expect(errors[0]).toBeInstanceOf(HookFailedError);
  expect((errors[0] as HookFailedError).cause).toEqual(new Error('tenant lookup failed'));
  const incarnations = events.filter((e) => e.type === 'running').map((e) => (e as { workerId: string }).workerId);
  expect(incarnations).toHaveLength(2);
  expect(incarnations[0]).not.toBe(incarnations[1]);
  expect(events.find((e) => e.type === 'stopped')).toMatchObject({ workerId: incarnations[0], error: expect.any(HookFailedError) });
  expect(await workerStatus(incarnations[0])).toBe('stopped');
  await waitFor(async () => (await workerStatus(incarnations[1])) === 'stopped', 'the second incarnation to stop after the unsubscription');
  expect(await jobStatuses()).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
  // The job the hook failed on went back uncharged, and so did anything it held.
  const { rows } = await db.query<{ outcome: string; charged: boolean }>(`select outcome, charged from acta.all_executions where outcome <> 'succeeded'`);
  expect(rows.length).toBeGreaterThanOrEqual(1);
  for (const r of rows) expect(r).toEqual({ outcome: 'handed_back', charged: false });
});

test('runWorker$ with merge: two workers share the jobs; unsubscribing the merge stops both gracefully', async () => {
  const job = defineJob<{ n: number }>({ name: 'job', handler: () => sleep(20) });
  const count = 30;
  await createClient({ force: true, db }).enqueueMany(Array.from({ length: count }, (_, n) => ({ definition: job, payload: { n } })));
  const both$ = merge(runWorker$({ ...base, definitions: [job], executors: 2 }), runWorker$({ ...base, definitions: [job], executors: 2 })).pipe(share());
  const events = await lastValueFrom(
    both$.pipe(
      scan((seen: WorkerEvent[], e) => [...seen, e], []),
      takeWhile((seen) => seen.filter((e) => e.type === 'succeeded').length < count, true),
    ),
  );
  const workers = events.filter((e) => e.type === 'running').map((e) => (e as { workerId: string }).workerId);
  expect(new Set(workers).size).toBe(2);
  for (const id of workers) await waitFor(async () => (await workerStatus(id)) === 'stopped', `worker ${id} to stop`);
  expect(await jobStatuses()).toEqual(Array(count).fill('succeeded'));
  // Both took part (each ran at least one attempt), and no attempt ran twice.
  const { rows } = await db.query<{ worker_id: string; n: string }>('select worker_id, count(*) as n from acta.all_executions group by 1');
  expect(rows).toHaveLength(2);
  expect(rows.reduce((n, r) => n + Number(r.n), 0)).toBe(count);
});

/** A port nothing listens on now. */
const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer().once('error', reject);
    server.listen(0, () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

test('runWorker$ with metricsPort, restarted by switchMap while the old worker\'s stop waits for a running handler: the new one listens on the port at once, and serves its own metrics there', async () => {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  // Ignores its abort: the old worker's stop waits for it (shutdownTimeoutMs below).
  const long = defineJob({ name: 'long', handler: () => released });
  await createClient({ force: true, db }).enqueue(long, {});
  const port = await freePort();
  const incarnation$ = new BehaviorSubject(1);
  const events: { n: number; event: WorkerEvent }[] = [];
  let failure: unknown;
  const subscription = incarnation$
    .pipe(switchMap((n) => runWorker$({ ...base, definitions: [long], metricsPort: port, shutdownTimeoutMs: 60_000 }).pipe(map((event) => ({ n, event })))))
    .subscribe({ next: (e) => events.push(e), error: (err: unknown) => (failure = err) });
  try {
    await waitFor(() => failure ?? events.find((e) => e.n === 1 && e.event.type === 'started'), 'the first worker to start the long handler');
    const oldId = (events.find((e) => e.event.type === 'running')!.event as { workerId: string }).workerId;
    incarnation$.next(2); // the first worker's stop begins: it waits for the handler
    await waitFor(() => failure ?? events.find((e) => e.n === 2 && e.event.type === 'running'), 'the second worker to run');
    // Was: the second start failed with ACTA_METRICS_PORT (EADDRINUSE) until the first stop had ended.
    expect(failure).toBeUndefined();
    expect(await workerStatus(oldId)).toBe('alive'); // its stop has not finished: the handler still runs
    // The port serves the second worker's metrics: it holds no attempt; the first still runs one.
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(text).toContain('acta_jobs_inflight{state="executing"} 0');
    release();
    subscription.unsubscribe();
    const newId = (events.find((e) => e.n === 2 && e.event.type === 'running')!.event as { workerId: string }).workerId;
    for (const id of [oldId, newId]) await waitFor(async () => (await workerStatus(id)) === 'stopped', `worker ${id} to stop`);
  } finally {
    release();
    subscription.unsubscribe();
  }
});
