// The order of a job's events in one worker's events$ (docs/reference.md, "Events"; src/worker/events.ts):
// an attempt's end comes before the next attempt of the same job starts, even when the next claim's
// answer arrives before the answer of the write that ended the attempt. The write's commit makes the
// job due (a retry after 0 ms, a hand-back) and NOTIFYs, and a claim on another connection can take
// it and start it while the write's answer is still on its way back.
import pino from 'pino';
import { delay, Subject, timer } from 'rxjs';
import { type Attempt, createClient, createWorker, type Definition, defineJob, type JobId, type WorkerEvent, type WorkerHooks } from '../src';
import type { ClaimedRow, CompletionAck } from '../src/db/types';
import { injectFaults, memoryLedger, VirtualClock } from '../src/testing';
import type { Completion } from '../src/worker/executor';
import { WorkerEvents } from '../src/worker/events';
import { Registry } from '../src/worker/registry';

const silent = pino({ level: 'silent' });

/** The per-attempt events of one job, as "type attempt.execution". */
const ofJob = (events: readonly WorkerEvent[], id: JobId) =>
  events.filter((e) => 'jobId' in e && e.jobId === id).map((e) => `${e.type} ${'attempt' in e ? e.attempt : ''}.${'execution' in e ? e.execution : ''}`);

/** A worker on a memory ledger in virtual time whose completion writes answer 50 ms after they take effect, its claims after 1 ms. */
async function slowAnswers(definitions: Definition[], hooks?: WorkerHooks) {
  const clock = new VirtualClock();
  const ledger = memoryLedger({ scheduler: clock.scheduler, latencyMs: { completeExecutions: 50, claimJobs: 1, enqueueJobs: 1, registerWorker: 1 } });
  const worker = createWorker({ ledger, definitions, hooks, scheduler: clock.scheduler, random: () => 0, executors: 2, heartbeatIntervalMs: 10_000, logger: silent });
  const recorded = clock.record(worker.events$);
  await clock.await(worker.start());
  const client = createClient({ force: true, ledger, definitions });
  const events = () => recorded.entries.map((e) => e.value);
  const stop = async () => {
    const stopped = worker.stop();
    await clock.advanceUntil(() => recorded.completedAt !== undefined, { stepMs: 10 });
    await stopped;
  };
  return { clock, ledger, client, events, recorded, stop };
}

test("a retry due at once, claimed and started before the failed attempt's write answered: events$ tells the failure first, then the second attempt", async () => {
  const flaky = defineJob({
    name: 'flaky',
    backoff: () => 0,
    handler: (_: { n: number }, { attempt }) => {
      if (attempt === 1) throw new TypeError('first try fails');
    },
  });
  const { clock, client, events, recorded, stop } = await slowAnswers([flaky]);
  const { id } = await clock.await(client.enqueue(flaky, { n: 1 }));
  await clock.advanceUntil(() => events().some((e) => e.type === 'succeeded'), { maxMs: 1_000 });
  // The failure's write takes effect at once and its NOTIFY wakes the claimer; the claim answers
  // 1 ms later and the second attempt starts then, 49 ms before the write's answer arrives.
  const started2 = recorded.entries.find((e) => e.value.type === 'started' && e.value.attempt === 2)!;
  const failed1 = recorded.entries.find((e) => e.value.type === 'failed')!;
  expect(failed1.value).toMatchObject({ retry: true, retryDelayMs: 0, error: { name: 'TypeError', message: 'first try fails' } });
  // The start is told when the failure is: held, not lost, and in order.
  expect(started2.at).toBe(failed1.at);
  expect(ofJob(events(), id)).toEqual(['started 1.1', 'failed 1.1', 'started 2.2', 'succeeded 2.2']);
  await stop();
});

test('an attempt a hook hands back, claimed again before the hand-back\'s write answered: handed_back comes before the next start', async () => {
  let handedBack = 0;
  const noop = defineJob({ name: 'noop', handler: (_: { n: number }) => undefined });
  const hooks: WorkerHooks = {
    beforeExecution: (attempts, tools) => {
      const out = new Subject<Attempt>();
      attempts.subscribe((a) => (handedBack++ === 0 ? tools.handBack(a, 'not now') : out.next(a)));
      return out.pipe(delay(0, tools.scheduler));
    },
  };
  const { clock, client, events, stop } = await slowAnswers([noop], hooks);
  const { id } = await clock.await(client.enqueue(noop, { n: 1 }));
  await clock.advanceUntil(() => events().some((e) => e.type === 'succeeded'), { maxMs: 1_000 });
  // The hand-back is uncharged (attempt 1 again) under a new execution.
  expect(ofJob(events(), id)).toEqual(['handed_back 1.1', 'started 1.2', 'succeeded 1.2']);
  await stop();
});

const row = (id: string, execution: number, attempts = execution - 1): ClaimedRow => ({ id, definition: 'd', payload: {}, execution, attempts, maxAttempts: 25, unchargedReturns: 0, priority: 0 });

/** The entry's completion as the executor hands it on (state Finalizing): a failure, retried. */
const finalizing = (entry: ReturnType<Registry['addClaimed']>[number]): Completion => {
  const completion = { entry, row: { id: entry.row.id, execution: entry.row.execution, outcome: 'failed', result: null, error: null, retryDelayMs: 0 }, bytes: 0 } as unknown as Completion;
  entry.state = 'finalizing';
  entry.completion = completion;
  return completion;
};
const retried: CompletionAck = { status: 'ready' } as CompletionAck;

test('WorkerEvents: a start held behind its job\'s unwritten attempt is told after that attempt\'s end; a subscriber that came meanwhile sees both, in order', () => {
  const registry = new Registry();
  const events = new WorkerEvents();
  const [first] = registry.addClaimed([row('7', 1)], 1_000);
  const completion = finalizing(first); // nobody listened as it ran
  const seen: string[] = [];
  events.events$.subscribe((e) => seen.push(`${e.type}${'jobId' in e ? ` ${e.jobId}.${e.execution}` : ''}`));
  const [second] = registry.addClaimed([row('7', 2)], 2_000);
  second.state = 'executing';
  events.started(second);
  events.started(registry.addClaimed([row('8', 1)], 2_000)[0]); // another job is not held
  expect(seen).toEqual(['started 8.1']);
  registry.remove(first); // the write answered (completionsWritten.ts)
  events.written([completion], [retried]);
  expect(seen).toEqual(['started 8.1', 'failed 7.1', 'started 7.2']);
  // Told once: the next write of the job's attempts holds nothing back.
  events.leaseLost(second);
  events.written([finalizing(second)], [retried]);
  expect(seen).toEqual(['started 8.1', 'failed 7.1', 'started 7.2', 'lease_lost 7.2', 'failed 7.2']);
});

test('WorkerEvents: a start still held when the worker stops (its job\'s write never answered) is told before stopped', () => {
  const registry = new Registry();
  const events = new WorkerEvents();
  const seen: string[] = [];
  events.events$.subscribe((e) => seen.push(e.type));
  const [first] = registry.addClaimed([row('7', 1)], 1_000);
  finalizing(first);
  const [second] = registry.addClaimed([row('7', 2)], 2_000);
  events.started(second);
  expect(seen).toEqual([]);
  events.stopped('w');
  expect(seen).toEqual(['started', 'stopped']);
});

test("a fatal stop's last try tells what it wrote: the held completion's end and the running attempt's hand-back come before stopped", async () => {
  const clock = new VirtualClock();
  const ledger = memoryLedger({ scheduler: clock.scheduler, latencyMs: 1 });
  const quick = defineJob({ name: 'quick', handler: () => 'done' });
  const slow = defineJob({ name: 'slow', handler: (_: null, ctx) => new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve())) });
  // The heartbeat is refused (a non-transient error): the worker stops itself at its first beat.
  const refused = { ...ledger, heartbeat: () => Promise.reject(Object.assign(new Error('permission denied for function heartbeat'), { code: '42501' })) };
  const worker = createWorker({
    ledger: refused,
    definitions: [quick, slow],
    // quick's completion is held an hour: the fatal stop's last try writes it.
    hooks: { aroundHandler: (_a, run) => run.pipe(delay(3_600_000, clock.scheduler)) },
    scheduler: clock.scheduler,
    random: () => 0,
    executors: 2,
    heartbeatIntervalMs: 10_000,
    logger: silent,
  });
  const recorded = clock.record(worker.events$);
  worker.done.catch(() => undefined);
  await clock.await(worker.start());
  const client = createClient({ force: true, ledger, definitions: [quick, slow] });
  const { id: quickId } = await clock.await(client.enqueue(quick, null));
  const { id: slowId } = await clock.await(client.enqueue(slow, null));
  await clock.advanceUntil(() => recorded.completedAt !== undefined, { stepMs: 10, maxMs: 60_000 });
  expect(ledger.state().jobs.map((j) => [j.definition, j.status])).toEqual([['quick', 'succeeded'], ['slow', 'ready']]);
  const events = recorded.entries.map((e) => e.value);
  expect(ofJob(events, quickId)).toEqual(['started 1.1', 'succeeded 1.1']);
  expect(ofJob(events, slowId)).toEqual(['started 1.1', 'handed_back 1.1']);
  // Its handler ran from its start until the stop at the first beat: runMs is that time, as a graceful stop's.
  const handedBack = events.find((e) => e.type === 'handed_back');
  expect(handedBack).toMatchObject({ reason: 'shutdown' });
  expect((handedBack as { runMs: number | null }).runMs).toBeGreaterThan(9_000);
  expect(events[events.length - 1]).toMatchObject({ type: 'stopped', error: { code: '42501' } });
});

test('an attempt its worker claims again while it runs (injectFaults deliverTwice: the row came back by recovery) ends in events$ as lease_lost, before the new attempt starts', async () => {
  const clock = new VirtualClock();
  const ledger = memoryLedger({ scheduler: clock.scheduler, latencyMs: 1 });
  const faults = injectFaults(ledger, { scheduler: clock.scheduler });
  const long = defineJob({
    name: 'long',
    handler: (_: null, ctx) => new Promise<void>((resolve) => {
      const sub = timer(20_000, clock.scheduler).subscribe(() => resolve());
      ctx.signal.addEventListener('abort', () => sub.unsubscribe());
    }),
  });
  const worker = createWorker({ ledger: faults.ledger, definitions: [long], scheduler: clock.scheduler, random: () => 0, executors: 2, heartbeatIntervalMs: 1_000, logger: silent });
  const recorded = clock.record(worker.events$);
  await clock.await(worker.start());
  const { id } = await clock.await(createClient({ force: true, ledger, definitions: [long] }).enqueue(long, null));
  faults.deliverTwice(id);
  await clock.advance(60_000);
  await clock.await(worker.stop());
  expect(ledger.state().executions.map((e) => [e.execution, e.outcome])).toEqual([[1, 'lost_uncharged'], [2, 'succeeded']]);
  // Was: 'started 1.1', 'started 1.2', 'succeeded 1.2': the first attempt never ended in events$.
  expect(ofJob(recorded.entries.map((e) => e.value), id)).toEqual(['started 1.1', 'lease_lost 1.1', 'started 1.2', 'succeeded 1.2']);
});

test('a completion the database refuses for its content is written as failed_final, and events$ tells that failure, not the outcome refused', async () => {
  const clock = new VirtualClock();
  const ledger = memoryLedger({ scheduler: clock.scheduler, latencyMs: 1 });
  // As a LATIN1 database refuses a result it cannot encode (22P05): any call carrying that result.
  const refusing = {
    ...ledger,
    completeExecutions: (workerId: string, rows: Parameters<typeof ledger.completeExecutions>[1]) =>
      rows.some((r) => r.result?.includes('🙂'))
        ? Promise.reject(Object.assign(new Error('character with byte sequence 0xf0 0x9f 0x99 0x82 in encoding "UTF8" has no equivalent in encoding "LATIN1"'), { code: '22P05' }))
        : ledger.completeExecutions(workerId, rows),
  };
  const greet = defineJob({ name: 'greet', handler: (p: { smile: boolean }) => (p.smile ? 'hi 🙂' : 'hi') });
  const worker = createWorker({ ledger: refusing, definitions: [greet], scheduler: clock.scheduler, random: () => 0, executors: 2, heartbeatIntervalMs: 10_000, logger: silent });
  const recorded = clock.record(worker.events$);
  await clock.await(worker.start());
  const client = createClient({ force: true, ledger, definitions: [greet] });
  const { id } = await clock.await(client.enqueue(greet, { smile: true }));
  await clock.advance(1_000);
  await clock.await(worker.stop());
  expect(ledger.state().jobs.map((j) => j.status)).toEqual(['failed']);
  const ends = recorded.entries.map((e) => e.value).filter((e) => 'jobId' in e && e.jobId === id && e.type !== 'started');
  // Was: { type: 'succeeded' } for a job that ended Failed.
  expect(ends).toEqual([expect.objectContaining({ type: 'failed', retry: false, error: expect.objectContaining({ name: 'UnstorableOutcome' }) })]);
  expect(await clock.await(worker.metrics.registry.getSingleMetricAsString('acta_completions_total'))).toMatch(/outcome="failed_final"[^\n]* 1/);
});
