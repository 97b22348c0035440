// worker.events$ on a real database (docs/DESIGN.md, "The Rx surface"; src/worker/events.ts): the events
// of attempts that succeed, fail and are retried, of a failing heartbeat and of a lost lease.
import { setTimeout as sleep } from 'node:timers/promises';
import { filter, firstValueFrom, take } from 'rxjs';
import { createClient, createWorker, defineJob, type JobId, type WorkerEvent } from '../../src';
import { aroundStatements } from '../helpers/around';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db } = useTestDatabase();
beforeEach(() => db.query('truncate acta.jobs, acta.executions, acta.workers'));

const base = { db, logger: silentLogger, safetyPollMs: 100, shutdownTimeoutMs: 5_000 } as const;

const jobStatuses = async () => (await db.query<{ status: string }>('select status from acta.jobs order by id')).rows.map((r) => r.status);

/** The per-attempt events of one job, as [type, attempt, extra]. */
const ofJob = (events: WorkerEvent[], id: JobId) =>
  events.filter((e) => 'jobId' in e && e.jobId === id).map((e) => [e.type, 'attempt' in e ? e.attempt : undefined, e.type === 'failed' ? e.retry : e.type === 'handed_back' ? e.reason : undefined]);

test('worker.events$: claimed, started, succeeded, failed (retried, then final) and rate_limited, running first and stopped last; no payload unless asked', async () => {
  const flaky = defineJob<{ secret: string; failTimes: number }>({
    name: 'flaky',
    backoff: () => 20,
    handler: async ({ failTimes }, { attempt }) => {
      await sleep(5);
      if (attempt <= failTimes) throw new TypeError(`try ${attempt} fails`);
    },
  });
  const client = createClient({ force: true, db });
  const worker = createWorker({ ...base, definitions: [flaky], executors: 2 });
  const events: WorkerEvent[] = [];
  const completed = new Promise<void>((resolve) => worker.events$.subscribe({ next: (e) => events.push(e), complete: resolve }));
  await worker.start();
  const ok = await client.enqueue(flaky, { secret: 's1', failTimes: 0 });
  const retried = await client.enqueue(flaky, { secret: 's2', failTimes: 1 });
  const failed = await client.enqueue(flaky, { secret: 's3', failTimes: 5 }, { maxAttempts: 2 });
  await waitFor(async () => (await jobStatuses()).every((s) => s === 'succeeded' || s === 'failed'), 'the three jobs to end');
  await worker.stop();
  await completed;

  expect(events[0]).toEqual({ type: 'running', workerId: worker.id, namespace: 'default' });
  expect(events.at(-1)).toEqual({ type: 'stopped', workerId: worker.id });
  expect(ofJob(events, ok.id)).toEqual([
    ['started', 1, undefined],
    ['succeeded', 1, undefined],
  ]);
  expect(ofJob(events, retried.id)).toEqual([
    ['started', 1, undefined],
    ['failed', 1, true],
    ['started', 2, undefined],
    ['succeeded', 2, undefined],
  ]);
  expect(ofJob(events, failed.id)).toEqual([
    ['started', 1, undefined],
    ['failed', 1, true],
    ['started', 2, undefined],
    ['failed', 2, false],
  ]);
  const lastFailure = events.find((e) => e.type === 'failed' && !e.retry);
  expect(lastFailure).toMatchObject({ jobId: failed.id, definition: 'flaky', execution: 2, error: { name: 'TypeError', message: 'try 2 fails' } });
  expect((lastFailure as { runMs: number }).runMs).toBeGreaterThanOrEqual(4);
  expect(events.find((e) => e.type === 'failed' && e.retry)).toMatchObject({ retryDelayMs: 20 });
  const started = events.find((e) => e.type === 'started')!;
  expect(started).toEqual({ type: 'started', jobId: expect.any(String), definition: 'flaky', attempt: 1, execution: 1, waitedMs: expect.any(Number) });
  // Claim statistics: every claim, asked = got + wasted, with its round trip.
  const claims = events.filter((e) => e.type === 'claimed');
  expect(claims.length).toBeGreaterThan(0);
  for (const c of claims) expect(c).toEqual({ type: 'claimed', asked: c.got + c.wasted, got: expect.any(Number), wasted: expect.any(Number), durationMs: expect.any(Number) });
  expect(claims.reduce((n, c) => n + c.got, 0)).toBe(5); // 1 + 2 + 2 attempts
  expect(JSON.stringify(events)).not.toMatch(/"secret"|s1|s2|s3/);

  // A handler that calls ctx.rateLimited: its attempt is written as rate_limited, uncharged.
  const limited = defineJob<{ n: number }>({ name: 'limited', handler: async (_, { attempt, rateLimited }) => (attempt === 1 && !limitedOnce++ ? rateLimited({ retryAfterMs: 30 }) : undefined) });
  let limitedOnce = 0;
  const limitedWorker = createWorker({ ...base, definitions: [limited] });
  const limitedEvents: WorkerEvent[] = [];
  limitedWorker.events$.subscribe((e) => limitedEvents.push(e));
  await limitedWorker.start();
  const limitedJob = await client.enqueue(limited, { n: 1 });
  await waitFor(() => limitedEvents.some((e) => e.type === 'succeeded'), 'the rate-limited job to succeed');
  await limitedWorker.stop();
  expect(ofJob(limitedEvents, limitedJob.id)).toEqual([
    ['started', 1, undefined],
    ['rate_limited', 1, undefined],
    ['started', 1, undefined],
    ['succeeded', 1, undefined],
  ]);
  expect(limitedEvents.find((e) => e.type === 'rate_limited')).toMatchObject({ retryAfterMs: 30 });

  // With `events: { payloads: true }` the per-attempt events carry the handler's payload.
  const withPayloads = createWorker({ ...base, definitions: [flaky], events: { payloads: true } });
  const seen = firstValueFrom(withPayloads.events$.pipe(filter((e) => e.type === 'succeeded'), take(1)));
  await withPayloads.start();
  await client.enqueue(flaky, { secret: 's4', failTimes: 0 });
  expect(await seen).toMatchObject({ type: 'succeeded', payload: { secret: 's4', failTimes: 0 }, runMs: expect.any(Number) });
  await withPayloads.stop();
});

test('worker.events$: degraded and recovered as the heartbeat fails and succeeds again; lease_lost, then stale, for an attempt whose row was taken away', async () => {
  let failBeats = false;
  const flakyDb = aroundStatements(db, (text, params, run) => {
    if (failBeats && text.includes('acta.heartbeat(')) return Promise.reject(Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }));
    return run();
  });
  const waits = defineJob<{ n: number }>({
    name: 'waits',
    handler: (_, { signal }) => new Promise((resolve) => signal.addEventListener('abort', () => resolve(undefined))),
  });
  const worker = createWorker({ ...base, db: flakyDb, definitions: [waits], heartbeatIntervalMs: 200 });
  const events: WorkerEvent[] = [];
  worker.events$.subscribe((e) => events.push(e));
  await worker.start();
  failBeats = true;
  await waitFor(() => events.some((e) => e.type === 'degraded'), 'degraded');
  failBeats = false;
  await waitFor(() => events.some((e) => e.type === 'recovered'), 'recovered');
  expect(events.filter((e) => e.type === 'degraded' || e.type === 'recovered')).toEqual([
    { type: 'degraded', cause: 'heartbeat' },
    { type: 'recovered', cause: 'heartbeat' },
  ]);

  const { id } = await createClient({ force: true, db }).enqueue(waits, { n: 1 });
  await waitFor(() => events.some((e) => e.type === 'started'), 'the attempt to start');
  // Another holder takes the row (as recovery and a new claim would): the next beat finds the lease lost.
  await db.query(`update acta.jobs set lease_holder = gen_random_uuid() where id = $1`, [id]);
  await waitFor(() => events.some((e) => e.type === 'stale'), 'the completion to be fenced out');
  await worker.stop();
  expect(ofJob(events, id)).toEqual([
    ['started', 1, undefined],
    ['lease_lost', 1, undefined],
    ['stale', 1, undefined],
  ]);
  expect(events.find((e) => e.type === 'lease_lost')).toMatchObject({ jobId: id, execution: 1, started: true });
  expect(events.find((e) => e.type === 'stale')).toMatchObject({ jobId: id, outcome: 'failed' });
});

test.each(['claimed', 'started', 'succeeded'] as const)('worker.stop() called inside an events$ callback (%s): every job runs at most once, the rest go back uncharged, the stop ends', async (type) => {
  const runs = new Map<string, number>();
  const job = defineJob<{ n: number }>({
    name: 'counted',
    handler: async (_, { jobId }) => {
      runs.set(jobId, (runs.get(jobId) ?? 0) + 1);
      await sleep(20);
    },
  });
  const client = createClient({ force: true, db });
  const ids = (await client.enqueueMany(Array.from({ length: 12 }, (_, n) => ({ definition: job, payload: { n } })))).map((j) => j.id);
  const worker = createWorker({ ...base, definitions: [job], executors: 3 });
  let stopping: Promise<void> | undefined;
  const events: WorkerEvent[] = [];
  worker.events$.subscribe((e) => {
    events.push(e);
    if (e.type === type && !stopping) stopping = worker.stop();
  });
  await worker.start();
  await waitFor(async () => stopping !== undefined, `a ${type} event`);
  await stopping;
  await worker.done.catch(() => undefined);
  expect([...runs.values()].every((n) => n === 1)).toBe(true);
  const rows = (await db.query<{ id: string; status: string; attempts: number }>('select id::text, status, attempts from acta.all_jobs where id = any($1::bigint[]) order by id', [ids])).rows;
  for (const row of rows) {
    if (runs.has(row.id)) expect(row).toMatchObject({ status: 'succeeded', attempts: 1 });
    else expect(row).toMatchObject({ status: 'ready', attempts: 0 });
  }
  const started = events.filter((e) => e.type === 'started').map((e) => (e as { jobId: string }).jobId);
  expect(new Set(started).size).toBe(started.length);
  expect(started.sort()).toEqual([...runs.keys()].sort());
});
