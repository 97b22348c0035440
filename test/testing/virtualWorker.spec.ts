// A whole worker in virtual time, the way a user writes it with the public exports (acta and
// acta/testing): createWorker on acta/testing's memoryLedger, both on a VirtualClock's scheduler,
// the ledger's answers arriving after a set latency (docs/rx.md, "Testing in virtual time").
// Admission's timing (docs/DESIGN.md, "Policies": the next free token, the hand-on, a meter held
// shut) and a user's operator's effect on the finalizer's batching, as marbles of virtual ms.
import pino from 'pino';
import { concatMap, delay, finalize, lastValueFrom, map, timer } from 'rxjs';
import { createClient, createWorker, type Definition, defineJob, JobCancelledError, type JobContext, type Worker, type WorkerEvent, type WorkerHooks } from '../../src';
import { fromMarbles, InjectedFaultError, injectFaults, type Ledger, memoryLedger, VirtualClock } from '../../src/testing';

const silent = pino({ level: 'silent' });

/** A worker and a client on one memory ledger, in virtual time on `clock`; started (the registration took 1 ms). */
async function virtualWorker(
  clock: VirtualClock,
  definitions: Definition[],
  options: { executors?: number; hooks?: WorkerHooks; faults?: boolean; wrap?: (ledger: Ledger) => Ledger; logger?: pino.Logger } = {},
) {
  const ledger = memoryLedger({ scheduler: clock.scheduler, latencyMs: 1 });
  const faults = injectFaults(ledger, { scheduler: clock.scheduler });
  const worker: Worker = createWorker({
    ledger: (options.wrap ?? ((l: Ledger) => l))(options.faults ? faults.ledger : ledger),
    definitions,
    scheduler: clock.scheduler,
    random: () => 0, // no jitter: exact times
    executors: options.executors ?? 4,
    hooks: options.hooks,
    heartbeatIntervalMs: 10_000,
    logger: options.logger ?? silent,
  });
  const events = clock.record(worker.events$);
  await clock.await(worker.start());
  await clock.advance(10 - clock.now());
  // The client's calls answer on the clock too: await them through it (VirtualClock.await).
  const plain = createClient({ force: true, ledger, definitions });
  const client = {
    enqueue: <P>(definition: Definition<P, any>, payload: P) => clock.await(plain.enqueue(definition, payload)),
    enqueueMany: (items: Parameters<typeof plain.enqueueMany>[0]) => clock.await(plain.enqueueMany(items)),
  };
  const stop = async () => {
    const stopped = worker.stop();
    await clock.advanceUntil(() => events.entries.some((e) => e.value.type === 'stopped'), { stepMs: 10 });
    await stopped;
  };
  return { ledger, faults, worker, client, events, stop };
}

/** The virtual times of the events of `type` (of jobs whose payload index `i` is given, if asked). */
const timesOf = (events: { entries: { at: number; value: WorkerEvent }[] }, type: WorkerEvent['type']) =>
  events.entries.filter((e) => e.value.type === type).map((e) => e.at);

test('a rate limit of 2 per second: a burst of 6 starts 2 at once, then 2 at each next free token, exactly (the claimer sleeps until the token)', async () => {
  const clock = new VirtualClock();
  const ping = defineJob({ name: 'ping', rate: { key: () => 'api', limit: 2, perMs: 1_000 }, handler: () => undefined });
  const { client, events, stop } = await virtualWorker(clock, [ping]);
  await client.enqueueMany(Array.from({ length: 6 }, (_, i) => ({ definition: ping, payload: { i } })));
  await clock.advance(3_000);
  // The enqueue at 10 woke the worker (its NOTIFY); its claim, made at 10, admitted two and parked
  // the rest, answered at 11. The claim after the completions answered at 12 that the next token
  // frees at 1,010 (the first start + 1 s): the claimer slept from that answer, 998 ms, claimed at
  // 1,011 and started the next two at 1,012; the same again a second later.
  expect(timesOf(events, 'started')).toEqual([11, 11, 1012, 1012, 2013, 2013]);
  await stop();
});

test("a key at its limit: the refused job starts when the holder's completion hands its slot on (one write, one claim), not at the bounce", async () => {
  const clock = new VirtualClock();
  const render = defineJob({
    name: 'render',
    concurrency: { key: () => 'gpu', limit: 1 },
    handler: (p: { ms: number }, ctx: JobContext) => new Promise<void>((resolve) => {
      // Time from the worker's own clock: a handler in virtual time takes its time there too.
      const sub = timer(p.ms, clock.scheduler).subscribe(() => resolve());
      ctx.signal.addEventListener('abort', () => sub.unsubscribe());
    }),
  });
  const { client, events, stop } = await virtualWorker(clock, [render]);
  await client.enqueue(render, { ms: 300 });
  await client.enqueue(render, { ms: 10 });
  await clock.advance(1_000);
  // The first runs from 11 to 311; the second, enqueued at 11, was refused by the claim its enqueue
  // woke (answered at 12: 'claimed 0/3') and waits parked. The first's completion, written at 311,
  // hands the slot on and its NOTIFY wakes the claimer, whose claim (made at 311) starts the second
  // at 312, when the write's answer also arrives: not at the 2 s bounce, nor at a poll.
  expect(timesOf(events, 'started')).toEqual([11, 312]);
  expect(timesOf(events, 'succeeded')).toEqual([312, 323]);
  await stop();
});

test('ctx.rateLimited holds the meter shut for its delay: the other job of the key waits, the rate-limited one is due after it', async () => {
  let calls = 0;
  const api = defineJob({
    name: 'api',
    rate: { key: () => 'vendor', limit: 100, perMs: 1_000 },
    handler: (_: { i: number }, ctx: JobContext) => {
      if (calls++ === 0) ctx.rateLimited({ retryAfterMs: 500 });
    },
  });
  const clock = new VirtualClock();
  const { client, events, stop } = await virtualWorker(clock, [api], { executors: 1 });
  await client.enqueue(api, { i: 0 });
  await clock.advance(20);
  await client.enqueue(api, { i: 1 });
  await clock.advance(1_000);
  // i=0 started at 11 and was rate limited: the write, made at 11 (its answer at 12), shut the meter
  // and made i=0 due at 511. i=1, enqueued at 31, was refused and parked until the meter opens (the
  // idle answer's next due, 511): the claimer slept from that answer (32) 480 ms and claimed at 512,
  // where the meter's recheck released i=1, first in due order (its place: due at 31), then i=0.
  expect(timesOf(events, 'rate_limited')).toEqual([12]);
  expect(timesOf(events, 'started')).toEqual([11, 513, 514]);
  await stop();
});

test("a user's throttle before execution spaces the starts, and the finalizer then writes each completion alone instead of one batch", async () => {
  const noop = defineJob({ name: 'noop', handler: () => undefined });
  const written = async (hooks?: (clock: VirtualClock) => WorkerHooks) => {
    const clock = new VirtualClock();
    const { client, events, stop } = await virtualWorker(clock, [noop], { executors: 4, hooks: hooks?.(clock) });
    await client.enqueueMany(Array.from({ length: 4 }, (_, i) => ({ definition: noop, payload: { i } })));
    await clock.advance(500);
    await stop();
    return events.entries.filter((e) => e.value.type === 'succeeded').map((e) => ({ at: e.at, value: 's' }));
  };
  // Without a hook: four attempts start at 11 and end at once. The finalizer writes the first
  // completion alone (a lone completion never waits for a batch: docs/DESIGN.md, "Finalizer") and
  // the three that came meanwhile in the next call, when the first call's answer is in.
  expect(await written()).toEqual(fromMarbles('12ms s (sss)', { s: 's' }));
  // With a throttle of one start per 100 ms (the user's own operator, on the worker's scheduler):
  // each attempt starts alone, so each completion is written alone, 100 ms apart.
  const spaced = (clock: VirtualClock): WorkerHooks => ({
    beforeExecution: (attempts) => attempts.pipe(concatMap((a, n) => (n === 0 ? [a] : timer(100, clock.scheduler).pipe(map(() => a))))),
  });
  expect(await written(spaced)).toEqual(fromMarbles('12ms s 99ms s 99ms s 99ms s', { s: 's' }));
});

test('a completion aroundHandler holds at a stop is written as it ended at the shutdown timeout (10 s), and the stop ends then, not at the attempt deadline (2.5 H)', async () => {
  const clock = new VirtualClock();
  const noop = defineJob({ name: 'noop', handler: () => 'done' });
  let finalized = 0;
  // The user's operator holds each completion for an hour (a delay, a rate limit of writes...).
  const hooks: WorkerHooks = { aroundHandler: (_a, run) => run.pipe(delay(3_600_000, clock.scheduler), finalize(() => finalized++)) };
  const logged: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void logged.push(JSON.parse(line).msg) });
  const { ledger, client, events, worker } = await virtualWorker(clock, [noop], { hooks, logger });
  await client.enqueue(noop, {});
  await clock.advance(90); // the run ended at 11; the hook holds its completion
  expect(ledger.state().jobs.map((j) => j.status)).toEqual(['executing']);
  const stopped = worker.stop(); // at 101; shutdownTimeoutMs: the default 10,000
  await clock.advanceUntil(() => events.entries.some((e) => e.value.type === 'stopped'), { stepMs: 10, maxMs: 60_000 });
  await stopped;
  // Was: the stop waited for the hold limit, the attempt deadline (25,000 ms at H = 10 s, 112.5 s
  // at the default H), far past shutdownTimeoutMs: a supervisor's kill meanwhile lost the result
  // and the job ran again after its lease.
  const at = (type: WorkerEvent['type']) => timesOf(events, type);
  // The timeout at 10,101 passes the completion on; its write answers at 10,102, stopWorker at 10,103.
  expect(at('succeeded')).toEqual([10_102]);
  expect(at('stopped')).toEqual([10_103]);
  expect(ledger.state().jobs.map((j) => [j.status, j.result])).toEqual([['succeeded', 'done']]);
  expect(finalized).toBe(1); // the hook's subscription was ended, its finalize ran
  // No handler was running: the log names the held completion, not handlers aborted.
  expect(logged.filter((m) => /shutdown timeout|held the completion/.test(m))).toEqual(['aroundHandler held the completion past the shutdown timeout: written as it ended']);
});

/** The worker's ledger with its heartbeat refused for good (a revoked grant: SQLSTATE 42501, not transient), every other call answering: a fatal stop at the first beat (10,001 at H = 10 s). */
const heartbeatRefused = (ledger: Ledger): Ledger => ({
  ...ledger,
  heartbeat: () => Promise.reject(Object.assign(new Error('permission denied for function heartbeat'), { code: '42501' })),
});

/** Runs `clock` until the worker stopped itself; what `done` rejected with. */
async function stoppedItself(clock: VirtualClock, worker: Worker, events: { entries: { value: WorkerEvent }[] }): Promise<unknown> {
  let failure: unknown;
  worker.done.catch((err: unknown) => (failure = err));
  await clock.advanceUntil(() => events.entries.some((e) => e.value.type === 'stopped'), { stepMs: 10, maxMs: 60_000 });
  await clock.advance(10);
  return failure;
}

test('a fatal stop writes, in its last try, the completion aroundHandler holds, as it ended; the attempt still running goes back uncharged', async () => {
  const clock = new VirtualClock();
  const quick = defineJob({ name: 'quick', handler: () => 'done' });
  const slow = defineJob({
    name: 'slow',
    handler: (_: null, ctx: JobContext) => new Promise<void>((resolve) => {
      const sub = timer(3_600_000, clock.scheduler).subscribe(() => resolve());
      ctx.signal.addEventListener('abort', () => sub.unsubscribe());
    }),
  });
  // The user's operator holds each completion for an hour; the running one's too, when it comes.
  const hooks: WorkerHooks = { aroundHandler: (_a, run) => run.pipe(delay(3_600_000, clock.scheduler)) };
  const { ledger, client, events, worker } = await virtualWorker(clock, [quick, slow], { hooks, wrap: heartbeatRefused });
  await client.enqueue(quick, null);
  await client.enqueue(slow, null);
  await clock.advance(100); // quick's run ended at 11 (its completion held); slow runs
  expect(ledger.state().jobs.map((j) => [j.definition, j.status])).toEqual([['quick', 'executing'], ['slow', 'executing']]);
  const failure = await stoppedItself(clock, worker, events);
  expect(failure).toMatchObject({ code: '42501' });
  // Was: quick's held completion was neither written nor handed back, its row Executing until its
  // lease ran out (40 s at H = 10 s) and a recovery pass ran the finished job again.
  expect(ledger.state().jobs.map((j) => [j.definition, j.status, j.result, j.attempts])).toEqual([
    ['quick', 'succeeded', 'done', 1],
    ['slow', 'ready', null, 0],
  ]);
});

test("a fatal stop writes, in its last try, a completion the finalizer has not written (its call unanswered), as it ended", async () => {
  const clock = new VirtualClock();
  const quick = defineJob({ name: 'quick', handler: () => 'done' });
  // The finalizer's first call is never answered (a connection gone silent); the rest answer.
  let calls = 0;
  const { ledger, client, events, worker } = await virtualWorker(clock, [quick], {
    wrap: (l) => {
      const refused = heartbeatRefused(l);
      return { ...refused, completeExecutions: (id, rows) => (calls++ === 0 ? new Promise(() => {}) : l.completeExecutions(id, rows)) };
    },
  });
  await client.enqueue(quick, null);
  await clock.advance(100);
  expect(ledger.state().jobs.map((j) => j.status)).toEqual(['executing']);
  expect(await stoppedItself(clock, worker, events)).toMatchObject({ code: '42501' });
  // Was: its row stayed Executing until its lease ran out, and the finished job ran again.
  expect(ledger.state().jobs.map((j) => [j.status, j.result])).toEqual([['succeeded', 'done']]);
  expect(calls).toBe(2);
});

test('a job cancelled while beforeExecution holds its attempt (a 20 s delay) ends Cancelled at once, its handler never run', async () => {
  const clock = new VirtualClock();
  let ran = 0;
  const work = defineJob({ name: 'work', handler: () => void ran++ });
  const hooks: WorkerHooks = { beforeExecution: (attempts) => attempts.pipe(delay(20_000, clock.scheduler)) };
  const { ledger, events, stop } = await virtualWorker(clock, [work], { hooks });
  const client = createClient({ ledger, definitions: [work], scheduler: clock.scheduler });
  const { id } = await clock.await(client.enqueue(work, {}));
  await clock.advance(89); // claimed at 11, held by the delay
  expect(await clock.await(client.cancel(id))).toBe(true); // at 100, answered at 101
  await clock.advance(100);
  // The cancel's NOTIFY reaches the worker at 100: the held attempt leaves the hook at once and its
  // end is written at 101. Was: it waited out the delay, written Cancelled at 20,012.
  expect(timesOf(events, 'cancelled')).toEqual([101]);
  expect(ledger.state().jobs.map((j) => j.status)).toEqual(['cancelled']);
  expect(ran).toBe(0);
  await stop();
});

test('a crash right after a step, in virtual time: the row comes back after its lease (40 s at H = 10 s) and the next attempt replays the step instead of running it', async () => {
  const clock = new VirtualClock();
  const effects: [string, number][] = [];
  const pay = defineJob({
    name: 'pay',
    handler: async (_: null, ctx: JobContext) => {
      await ctx.step('charge', () => void effects.push(['charge', clock.now()]));
      await ctx.step('receipt', () => void effects.push(['receipt', clock.now()]));
    },
  });
  const { faults, client, events, stop } = await virtualWorker(clock, [pay], { faults: true });
  faults.crashAfterStep('charge');
  await client.enqueue(pay, null);
  await clock.advanceUntil(() => events.entries.some((e) => e.value.type === 'succeeded'), { stepMs: 100, maxMs: 200_000 });
  // Charged once, at 12 (the attempt started at 11; its first step read the recorded steps, 1 ms);
  // the receipt by the second attempt, once recovery had returned the row after its 40 s lease
  // (the recovery pass runs every lease too).
  expect(effects.map(([what]) => what)).toEqual(['charge', 'receipt']);
  expect(effects[0][1]).toBe(12);
  expect(effects[1][1]).toBeGreaterThan(40_000);
  await stop();
});

test('a job followed in virtual time: ctx.progress every 10 ms is stored at most every 250 ms (the first at once), client.observe sees each stored value, and a cancel at 600 ends it through the NOTIFY, its last value stored first', async () => {
  const clock = new VirtualClock();
  const reports: number[] = [];
  const ledger = memoryLedger({ scheduler: clock.scheduler, latencyMs: 1 });
  // The progress calls, by virtual time: the ledger seen through a wrapper.
  const watched = { ...ledger, reportProgress: (workerId: string, rows: Parameters<typeof ledger.reportProgress>[1]) => (reports.push(clock.now()), ledger.reportProgress(workerId, rows)) };
  const long = defineJob({
    name: 'long',
    handler: (_p: unknown, ctx: JobContext) =>
      new Promise<void>((_resolve, reject) => {
        let done = 0;
        const sub = timer(0, 10, clock.scheduler).subscribe(() => ctx.progress({ done: done++ }));
        ctx.signal.addEventListener('abort', () => {
          sub.unsubscribe();
          reject(new Error(`aborted: ${String(ctx.signal.reason)}`));
        });
      }),
  });
  const worker = createWorker({ ledger: watched, definitions: [long], scheduler: clock.scheduler, random: () => 0, heartbeatIntervalMs: 10_000, logger: silent });
  const events = clock.record(worker.events$);
  await clock.await(worker.start());
  const client = createClient({ force: true, ledger, scheduler: clock.scheduler });
  const { id } = await clock.await(client.enqueue(long, {}));
  const states = clock.record(client.observe(id, { pollMs: 60_000 }));
  await clock.advance(600 - clock.now());
  await clock.await(client.cancel(id));
  await clock.advance(100);
  // The worker's start took 3 ms; the enqueue's NOTIFY woke its claimer, whose claim answered at 5.
  expect(timesOf(events, 'started')).toEqual([5]);
  // The first report went at once, the rest at most every 250 ms, each with the latest value; the
  // value pending when the attempt ended (59, reported at 595) went at 600, before its completion.
  expect(reports).toEqual([5, 255, 505, 600]);
  // The observer subscribed at 4 read the job first at 5, already Executing (the claim had taken
  // it), then each stored value about 2 ms after its call (the NOTIFY, then its read): the tick
  // values 0, 24 and 49. The cancel at 600: the request (its NOTIFY reaches the observer and the
  // worker at once), the last value stored (answered at 601), then the completion (written at 601,
  // answered at 602), the end read at 603.
  const seen = states.entries.map((e) => [e.at, e.value.status, (e.value.progress as { done: number } | null)?.done ?? null, e.value.cancelRequestedAt !== null]);
  expect(seen).toEqual([
    [5, 'executing', null, false],
    [7, 'executing', 0, false],
    [256, 'executing', 24, false],
    [506, 'executing', 49, false],
    [601, 'executing', 49, true],
    [602, 'executing', 59, true],
    [603, 'cancelled', 59, true],
  ]);
  expect(timesOf(events, 'cancelled')).toEqual([602]);
  expect(states.error).toEqual({ at: 603, error: new JobCancelledError(id) });
  await clock.await(worker.stop());
});

test('progress reports that fail (injectFaults) are dropped, and the next report carries the latest value', async () => {
  const clock = new VirtualClock();
  const long = defineJob({
    name: 'long',
    handler: (_p: unknown, ctx: JobContext) =>
      new Promise<void>((resolve) => {
        let done = 0;
        const sub = timer(0, 10, clock.scheduler).subscribe(() => {
          ctx.progress({ done: done++ });
          if (done > 70) {
            sub.unsubscribe();
            resolve();
          }
        });
      }),
  });
  const { ledger, faults, client, stop } = await virtualWorker(clock, [long], { faults: true });
  faults.fail('reportProgress', { forMs: 300 });
  const { id } = await client.enqueue(long, {});
  const progressAt = async (ms: number) => {
    await clock.advance(ms - clock.now());
    return ledger.state().jobs.find((j) => String(j.id) === id)?.progress;
  };
  expect(await progressAt(400)).toBe(null); // the reports at 11 and 261 failed
  expect(await progressAt(520)).toEqual({ done: 49 }); // the one at 511, before that instant's tick: the value of 501
  await stop();
});

test("a failed report of an attempt's last value: the value goes with the attempt's end, so the job keeps it (not an older one), whether the call failed before the end or while the attempt ended", async () => {
  for (const endsAt of [400, 263]) {
    const clock = new VirtualClock();
    // The handler reports 1 (sent at once, at 11), then 2 at 111, which the batch call at 261
    // carries; that call fails 5 ms later, at 266. The handler then ends quietly at `endsAt`: after
    // the failure, or while the call is still in flight.
    const quiet = defineJob({
      name: 'quiet',
      handler: async (_p: unknown, ctx: JobContext) => {
        ctx.progress(1);
        await lastValueFrom(timer(100, clock.scheduler));
        ctx.progress(2);
        await lastValueFrom(timer(endsAt - 111, clock.scheduler));
        return 'ok';
      },
    });
    const calls: number[] = [];
    const failAt = 261;
    const { ledger, client, events, stop } = await virtualWorker(clock, [quiet], {
      wrap: (inner) => ({
        ...inner,
        reportProgress: (workerId: string, rows: Parameters<Ledger['reportProgress']>[1]) => {
          calls.push(clock.now());
          if (clock.now() !== failAt) return inner.reportProgress(workerId, rows);
          return lastValueFrom(timer(5, clock.scheduler)).then(() => Promise.reject(new InjectedFaultError('reportProgress')));
        },
      }),
    });
    const { id } = await client.enqueue(quiet, {});
    await clock.advance(1_000);
    expect(timesOf(events, 'succeeded')).toHaveLength(1);
    // The value 2 again, alone, once the attempt ended (after the failed call's answer at 266).
    expect(calls).toEqual([11, 261, Math.max(endsAt, 266)]);
    // Was 1: the failed call's value was dropped, and nothing reported after it to carry it.
    expect(ledger.state().jobs.find((j) => String(j.id) === id)?.progress).toBe(2);
    await stop();
  }
});

test('ctx.progress after the attempt ended stores nothing and says so: one warning per attempt on its logger', async () => {
  const clock = new VirtualClock();
  const lines: { level: number; msg: string; jobId?: string }[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  let saved: JobContext | undefined;
  const quick = defineJob({
    name: 'quick',
    handler: (_p: unknown, ctx: JobContext) => {
      saved = ctx;
      return 'ok';
    },
  });
  const ledger = memoryLedger({ scheduler: clock.scheduler, latencyMs: 1 });
  const worker = createWorker({ ledger, definitions: [quick], scheduler: clock.scheduler, random: () => 0, logger });
  await clock.await(worker.start());
  const { id } = await clock.await(createClient({ ledger }).enqueue(quick, {}));
  await clock.advanceUntil(() => ledger.state().jobs.some((j) => String(j.id) === id && j.status === 'succeeded'));
  saved!.progress({ late: 1 });
  saved!.progress({ late: 2 });
  await clock.advance(1_000);
  const warned = lines.filter((l) => l.msg.startsWith('ctx.progress after the attempt ended'));
  expect(warned).toEqual([expect.objectContaining({ level: 40, jobId: id })]);
  expect(ledger.state().jobs.find((j) => String(j.id) === id)?.progress).toBe(null);
  await clock.await(worker.stop());
});

test('a VirtualClock given where its scheduler belongs is a ConfigError naming clock.scheduler, at once', () => {
  const clock = new VirtualClock();
  const ledger = memoryLedger({ scheduler: clock.scheduler });
  const noop = defineJob({ name: 'noop', handler: () => undefined });
  const named = (where: string) => `${where}: scheduler must be an RxJS scheduler (now() and schedule()) (a VirtualClock: give its clock.scheduler), got object`;
  // Was: createWorker took it and start() rejected with "TypeError: scheduler.schedule is not a function"; memoryLedger and createClient took it without a word.
  expect(() => createWorker({ ledger, definitions: [noop], scheduler: clock as never, logger: silent })).toThrow(named('createWorker'));
  expect(() => memoryLedger({ scheduler: clock as never })).toThrow(named('memoryLedger'));
  expect(() => createClient({ ledger, scheduler: clock as never })).toThrow(named('createClient'));
  expect(() => createWorker({ ledger, definitions: [noop], scheduler: 5 as never, logger: silent })).toThrow('createWorker: scheduler must be an RxJS scheduler (now() and schedule()), got number');
});
