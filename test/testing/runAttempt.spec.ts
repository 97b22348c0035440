// acta/testing's runAttempt, used as a user's unit test uses it: through the entry the package's
// exports map points at (src/testing/index.ts, built to dist/src/testing), no database. Time is
// virtual (a VirtualTimeScheduler) wherever a timeout or a timed abort is involved.
import { VirtualAction, VirtualTimeScheduler } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { ConfigError, defineJob, InvalidJsonError, type JobContext } from '../../src';
import { ABORT_CAUSES, type AbortCause, runAttempt } from '../../src/testing';

/** A promise that settles when `signal` aborts (with its reason), as a handler that waits for its signal does. */
const untilAborted = (signal: AbortSignal) =>
  new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(new Error(`aborted: ${String(signal.reason)}`)), { once: true }));

describe('steps', () => {
  const calls: string[] = [];
  const order = defineJob({
    name: 'charge-and-mail',
    handler: async (p: { orderId: string; total: number }, { step }: JobContext) => {
      const charge = await step('charge', () => {
        calls.push('charge');
        return { chargeId: `ch_${p.orderId}`, at: new Date(Date.UTC(2030, 0, 2)) };
      });
      const mail = await step('mail', () => {
        calls.push('mail');
        return { sentFor: charge.chargeId, at: charge.at };
      });
      return { charge, mail };
    },
  });
  beforeEach(() => (calls.length = 0));

  test('a seeded first step is replayed, not run again; the second runs; both are recorded', async () => {
    const run = await runAttempt(order, { orderId: 'o1', total: 5 }, { attempt: 2, steps: { charge: { chargeId: 'ch_seeded', at: '2030-01-01T00:00:00.000Z' } } });
    expect(calls).toEqual(['mail']);
    expect(run.steps.ran).toEqual(['mail']);
    expect(run.steps.replayed).toEqual(['charge']);
    expect(run.outcome).toBe('succeeded');
    expect(run.result).toEqual({
      charge: { chargeId: 'ch_seeded', at: '2030-01-01T00:00:00.000Z' },
      mail: { sentFor: 'ch_seeded', at: '2030-01-01T00:00:00.000Z' },
    });
    expect(run.steps.recorded).toEqual({
      charge: { chargeId: 'ch_seeded', at: '2030-01-01T00:00:00.000Z' },
      mail: { sentFor: 'ch_seeded', at: '2030-01-01T00:00:00.000Z' },
    });
  });

  test('results go through JSON as jsonb stores them: a Date comes back as its ISO string, a later attempt gets them back', async () => {
    const first = await runAttempt(order, { orderId: 'o2', total: 5 });
    expect(calls).toEqual(['charge', 'mail']);
    expect(first.steps).toEqual({
      ran: ['charge', 'mail'],
      replayed: [],
      recorded: { charge: { chargeId: 'ch_o2', at: '2030-01-02T00:00:00.000Z' }, mail: { sentFor: 'ch_o2', at: '2030-01-02T00:00:00.000Z' } },
    });
    // The step's caller got the stored form too, not the Date its fn returned.
    expect(first.result).toEqual({ charge: first.steps.recorded.charge, mail: first.steps.recorded.mail });
    const second = await runAttempt(order, { orderId: 'o2', total: 5 }, { attempt: 2, steps: first.steps.recorded });
    expect(calls).toEqual(['charge', 'mail']); // nothing ran again
    expect(second.steps.replayed).toEqual(['charge', 'mail']);
    expect(second.result).toEqual(first.result);
  });

  test('a step that returned undefined is recorded as null; a name used twice returns the first record', async () => {
    let runs = 0;
    const def = defineJob({
      name: 'twice',
      handler: async (_: null, { step }: JobContext) => [await step('a', () => void runs++), await step('a', () => runs++)],
    });
    const run = await runAttempt(def, null);
    expect(runs).toBe(1);
    expect(run.result).toEqual([null, null]);
    expect(run.steps).toEqual({ ran: ['a'], replayed: ['a'], recorded: { a: null } });
  });

  test("an unstorable step result fails the job without retry (UnstorableStepResultError); a bad name is ctx's ConfigError, without retry too", async () => {
    const unstorable = defineJob({ name: 'bigint-step', handler: async (_: null, { step }: JobContext) => step('n', () => 10n) });
    const run = await runAttempt(unstorable, null);
    expect(run).toMatchObject({ outcome: 'failed_final', retryDelayMs: null, steps: { ran: ['n'], recorded: {} } });
    expect(run.error).toMatchObject({ name: 'UnstorableStepResultError', code: 'ACTA_UNSTORABLE_STEP_RESULT', cause: { name: 'InvalidJsonError' } });

    const unnamed = defineJob({ name: 'unnamed-step', handler: async (_: null, { step }: JobContext) => step('', () => 1) });
    const bad = await runAttempt(unnamed, null);
    expect(bad).toMatchObject({ outcome: 'failed_final', retryDelayMs: null, error: { name: 'ConfigError', message: 'a step needs a non-empty name' } });
  });

  test('seeded steps are stored as acta stores them, or refused', async () => {
    const seen: unknown[] = [];
    const def = defineJob({ name: 'seen', handler: async (_: null, { step }: JobContext) => void seen.push(await step('s', () => 'ran'), await step('u', () => 'ran')) });
    await runAttempt(def, null, { steps: { s: new Date(0), u: undefined } });
    expect(seen).toEqual(['1970-01-01T00:00:00.000Z', null]);
    await expect(runAttempt(def, null, { steps: { s: { n: 1n } } })).rejects.toThrow(InvalidJsonError);
    await expect(runAttempt(def, null, { steps: { s: { n: 1n } } })).rejects.toMatchObject({ path: '$.s.n' });
    await expect(runAttempt(def, null, { steps: { '': 1 } })).rejects.toThrow(ConfigError);
  });
});

describe('timeout and abort', () => {
  const waits = (timeoutMs?: number) =>
    defineJob({
      name: 'waits',
      timeoutMs,
      handler: async (_: null, ctx: JobContext) => {
        await untilAborted(ctx.signal);
      },
    });

  test("the definition's timeoutMs aborts the signal with 'timeout' and fails the attempt with AttemptTimeoutError, retried after the backoff", async () => {
    const scheduler = new VirtualTimeScheduler();
    let reason: unknown;
    let waiting!: () => void;
    const handlerWaits = new Promise<void>((resolve) => (waiting = resolve));
    const def = defineJob({
      name: 'slow',
      timeoutMs: 2_000,
      backoff: { delayMs: 700 },
      handler: async (_: null, ctx: JobContext) => {
        ctx.signal.addEventListener('abort', () => (reason = ctx.signal.reason));
        waiting();
        await new Promise(() => {}); // never settles: the worker does not wait for it
      },
    });
    const pending = runAttempt(def, null, { scheduler });
    await handlerWaits; // the handler starts on a later turn: let it reach its wait, then move the time on
    scheduler.flush();
    const run = await pending;
    expect(scheduler.now()).toBe(2_000);
    expect(reason).toBe('timeout');
    expect(run).toMatchObject({ outcome: 'failed', abortCause: 'timeout', retryDelayMs: 700, result: null });
    expect(run.error).toMatchObject({ name: 'AttemptTimeoutError', code: 'ACTA_ATTEMPT_TIMEOUT', message: 'attempt exceeded its timeout of 2000 ms' });
  });

  test("with the default scheduler, jest's fake timers move the timeout on", async () => {
    jest.useFakeTimers();
    try {
      const pending = runAttempt(waits(5_000), null);
      await jest.advanceTimersByTimeAsync(4_999);
      let settled = false;
      void pending.then(() => (settled = true));
      await jest.advanceTimersByTimeAsync(0);
      expect(settled).toBe(false);
      await jest.advanceTimersByTimeAsync(1);
      expect(await pending).toMatchObject({ outcome: 'failed', abortCause: 'timeout', error: { name: 'AttemptTimeoutError' } });
    } finally {
      jest.useRealTimers();
    }
  });

  test.each(ABORT_CAUSES)("an attempt aborted ('%s', by the signal or abortAfter) leaves no timer pending: its 300 s timeout and its abortAfter are cleared when the run settles", async (cause) => {
    jest.useFakeTimers();
    try {
      // A handler that ignores its signal: the run settles at the abort all the same.
      const ignores = defineJob({ name: 'ignores', handler: (_: null, ctx: JobContext) => new Promise<never>(() => void ctx.signal) });
      const controller = new AbortController();
      const bySignal = runAttempt(ignores, null, { signal: controller.signal, abortAfter: { ms: 60_000, cause } });
      await jest.advanceTimersByTimeAsync(10);
      expect(jest.getTimerCount()).toBe(2); // the timeout (300 s, the default) and the abortAfter
      controller.abort(cause);
      expect((await bySignal).abortCause).toBe(cause);
      expect(jest.getTimerCount()).toBe(0);
      const byTimer = runAttempt(ignores, null, { abortAfter: { ms: 100, cause } });
      await jest.advanceTimersByTimeAsync(100);
      expect((await byTimer).abortCause).toBe(cause);
      expect(jest.getTimerCount()).toBe(0);
    } finally {
      jest.useRealTimers();
    }
  });

  test('without timeoutMs the default is 300 s', async () => {
    const scheduler = new VirtualTimeScheduler();
    const pending = runAttempt(waits(), null, { scheduler });
    scheduler.flush();
    expect((await pending).error?.message).toBe('attempt exceeded its timeout of 300000 ms');
    expect(scheduler.now()).toBe(300_000);
  });

  test.each<[AbortCause, string, string | null]>([
    ['lost', 'failed', 'AttemptCancelledError'],
    ['deadline', 'failed', 'AttemptTimeoutError'],
    ['shutdown', 'handed_back', null],
    ['fatal', 'handed_back', null],
  ])("the test's signal aborted with '%s': %s", async (cause, outcome, errorName) => {
    const controller = new AbortController();
    let started!: () => void;
    const handlerStarted = new Promise<void>((resolve) => (started = resolve));
    const def = defineJob({
      name: 'aborted',
      handler: async (_: null, ctx: JobContext) => {
        started();
        await untilAborted(ctx.signal);
      },
    });
    const pending = runAttempt(def, null, { signal: controller.signal });
    await handlerStarted;
    controller.abort(cause);
    const run = await pending;
    expect(run.outcome).toBe(outcome);
    expect(run.abortCause).toBe(cause);
    expect(run.error?.name ?? null).toBe(errorName);
    expect(run.retryDelayMs).toBe(outcome === 'failed' ? 1_000 : 0);
  });

  test("abortAfter aborts after that many ms of the scheduler's time", async () => {
    const scheduler = new VirtualTimeScheduler();
    let abortedAt: number | undefined;
    let waiting!: () => void;
    const handlerWaits = new Promise<void>((resolve) => (waiting = resolve));
    const def = defineJob({
      name: 'abort-after',
      handler: async (_: null, ctx: JobContext) => {
        ctx.signal.addEventListener('abort', () => (abortedAt = scheduler.now()));
        waiting();
        await untilAborted(ctx.signal);
      },
    });
    const pending = runAttempt(def, null, { scheduler, abortAfter: { ms: 250, cause: 'lost' } });
    await handlerWaits;
    scheduler.flush();
    const run = await pending;
    expect(abortedAt).toBe(250);
    expect(run).toMatchObject({ outcome: 'failed', abortCause: 'lost', error: { name: 'AttemptCancelledError' } });
  });

  /** A handler that says when it waits for its signal, and when its run settled. */
  const waiting = (scheduler: VirtualTimeScheduler, timeoutMs?: number) => {
    let started!: () => void;
    const handlerWaits = new Promise<void>((resolve) => (started = resolve));
    const seen: { abortedAt?: number } = {};
    const def = defineJob({
      name: 'waits',
      timeoutMs,
      handler: async (_: null, ctx: JobContext) => {
        ctx.signal.addEventListener('abort', () => (seen.abortedAt = scheduler.now()));
        started();
        await untilAborted(ctx.signal);
      },
    });
    return { def, handlerWaits, seen };
  };
  /** Lets the promises settled so far run their continuations (a few turns of the event loop). */
  const settle = async () => {
    for (let i = 0; i < 3; i++) await new Promise<void>((resolve) => setImmediate(resolve));
  };

  test("a TestScheduler left at rxjs's default maxFrames (750) runs a timeoutMs and an abortAfter past it; its maxFrames is 750 again after the run", async () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    expect(scheduler.maxFrames).toBe(750);
    // A run that ends without time moving (its 300 s timeout armed all the same) leaves 750 too.
    expect(await runAttempt(defineJob({ name: 'quick', handler: () => 1 }), null, { scheduler })).toMatchObject({ outcome: 'succeeded', result: 1 });
    expect(scheduler.maxFrames).toBe(750);
    const timed = waiting(scheduler, 2_000);
    const pending = runAttempt(timed.def, null, { scheduler });
    await timed.handlerWaits;
    scheduler.flush(); // was: stopped at frame 750, before the timeout, and the run never settled
    expect(await pending).toMatchObject({ outcome: 'failed', abortCause: 'timeout', error: { message: 'attempt exceeded its timeout of 2000 ms' } });
    expect(timed.seen.abortedAt).toBe(2_000);
    expect(scheduler.maxFrames).toBe(750);
    const aborted = waiting(scheduler);
    const again = runAttempt(aborted.def, null, { scheduler, abortAfter: { ms: 5_000, cause: 'lost' } });
    await aborted.handlerWaits;
    scheduler.flush();
    expect(await again).toMatchObject({ outcome: 'failed', abortCause: 'lost', error: { name: 'AttemptCancelledError' } });
    expect(aborted.seen.abortedAt).toBe(7_000); // 2,000 + 5,000
    expect(scheduler.maxFrames).toBe(750);
  });

  test('runs under way at once on one TestScheduler: one that ends first leaves the bound raised for the others', async () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    const timed = waiting(scheduler, 2_000);
    const pending = runAttempt(timed.def, null, { scheduler });
    expect(await runAttempt(defineJob({ name: 'quick', handler: () => 1 }), null, { scheduler })).toMatchObject({ outcome: 'succeeded' });
    await timed.handlerWaits;
    scheduler.flush();
    expect(await pending).toMatchObject({ outcome: 'failed', abortCause: 'timeout' });
    expect(timed.seen.abortedAt).toBe(2_000);
    expect(scheduler.maxFrames).toBe(750);
  });

  test('a VirtualTimeScheduler, or a TestScheduler given another maxFrames, is used as given: its flush stops at its maxFrames, and a raised one runs the rest', async () => {
    for (const scheduler of [new VirtualTimeScheduler(VirtualAction, 1_000), Object.assign(new TestScheduler((a, b) => expect(a).toEqual(b)), { maxFrames: 1_000 })]) {
      const timed = waiting(scheduler, 2_000);
      let settled = false;
      const pending = runAttempt(timed.def, null, { scheduler }).finally(() => (settled = true));
      await timed.handlerWaits;
      scheduler.flush();
      await settle();
      expect(settled).toBe(false);
      expect(scheduler.maxFrames).toBe(1_000);
      scheduler.maxFrames = Infinity;
      scheduler.flush();
      expect(await pending).toMatchObject({ outcome: 'failed', abortCause: 'timeout' });
      expect(timed.seen.abortedAt).toBe(2_000);
    }
  });

  test('a signal aborted before the run: the handler never runs and the job goes back uncharged', async () => {
    let ran = false;
    const def = defineJob({ name: 'never', handler: () => void (ran = true) });
    const run = await runAttempt(def, null, { signal: AbortSignal.abort('shutdown') });
    await Promise.resolve();
    expect(ran).toBe(false);
    expect(run).toMatchObject({ outcome: 'handed_back', retryDelayMs: 0, error: null, abortCause: 'shutdown' });
  });

  test("a signal aborted before the run with cause 'cancelled': the handler never runs and the job ends cancelled, as a job cancelled before its start", async () => {
    let ran = false;
    const def = defineJob({ name: 'never', handler: () => void (ran = true) });
    const run = await runAttempt(def, null, { signal: AbortSignal.abort('cancelled') });
    await Promise.resolve();
    expect(ran).toBe(false);
    expect(run).toMatchObject({ outcome: 'cancelled', abortCause: 'cancelled', retryDelayMs: null });
  });

  test("a cancel (abortAfter cause 'cancelled', as client.cancel reaches a running attempt): the attempt ends 'cancelled' with JobCancelledError", async () => {
    const scheduler = new VirtualTimeScheduler();
    let waiting!: () => void;
    const handlerWaits = new Promise<void>((resolve) => (waiting = resolve));
    const def = defineJob({
      name: 'cancel-me',
      handler: async (_: null, ctx: JobContext) => {
        waiting();
        await untilAborted(ctx.signal);
      },
    });
    const pending = runAttempt(def, null, { scheduler, abortAfter: { ms: 100, cause: 'cancelled' } });
    await handlerWaits;
    scheduler.flush();
    // retryDelayMs null: the job has ended Cancelled, it is never due again (was 0, as if handed back).
    expect(await pending).toMatchObject({ outcome: 'cancelled', abortCause: 'cancelled', retryDelayMs: null, error: { name: 'JobCancelledError', code: 'ACTA_JOB_CANCELLED' } });
  });

  test.each([
    ['lost', 'AttemptCancelledError'],
    ['cancelled', 'JobCancelledError'],
    ['deadline', 'AttemptTimeoutError'],
    ['shutdown', 'AttemptCancelledError'],
  ] as const)("a step whose attempt is aborted (%s) while its fn runs throws %s in the handler, not the signal's bare reason", async (cause, name) => {
    const scheduler = new VirtualTimeScheduler();
    let caught: unknown;
    let inStep!: () => void;
    const stepStarted = new Promise<void>((resolve) => (inStep = resolve));
    let release!: () => void;
    const fnDone = new Promise<void>((resolve) => (release = resolve));
    const def = defineJob({
      name: 'aborted-step',
      handler: async (_: null, ctx: JobContext) => {
        try {
          await ctx.step('s', async () => {
            inStep();
            await fnDone;
            return 1;
          });
        } catch (err) {
          caught = err;
          throw err;
        }
      },
    });
    const pending = runAttempt(def, null, { scheduler, abortAfter: { ms: 100, cause } });
    await stepStarted;
    scheduler.flush();
    release();
    await pending;
    expect(caught).toBeInstanceOf(Error);
    expect((caught as Error).name).toBe(name);
  });

  test('an abort reason that is not a cause a worker uses is refused', async () => {
    const controller = new AbortController();
    const pending = runAttempt(waits(), null, { signal: controller.signal });
    controller.abort(); // reason: a DOMException
    await expect(pending).rejects.toThrow(ConfigError);
    await expect(pending).rejects.toThrow(/the signal's reason must be one of timeout, deadline, lost, cancelled, shutdown, fatal/);
    await expect(runAttempt(waits(), null, { abortAfter: { ms: 1, cause: 'crash' as AbortCause } })).rejects.toThrow(/abortAfter.cause must be one of/);
  });
});

describe('outcomes', () => {
  test('a thrown non-Error fails the job without retry (NonErrorThrown)', async () => {
    const def = defineJob({
      name: 'throws-string',
      handler: () => {
        throw 'no such user';
      },
    });
    const run = await runAttempt(def, null);
    expect(run).toMatchObject({ outcome: 'failed_final', retryDelayMs: null });
    expect(run.error).toEqual({ name: 'NonErrorThrown', message: 'handler threw a non-Error value (string): no such user' });
  });

  test('a result that cannot be stored fails the job without retry (UnstorableResult)', async () => {
    const def = defineJob({ name: 'cyclic', handler: () => {
      const o: Record<string, unknown> = {};
      o.self = o;
      return o;
    } });
    const run = await runAttempt(def, null);
    expect(run).toMatchObject({ outcome: 'failed_final', result: null, error: { name: 'UnstorableResult', path: '$.self' } });
  });

  test("retries: the definition's backoff for the attempt that failed, final when the attempts are used up", async () => {
    const def = defineJob({
      name: 'flaky',
      maxAttempts: 4,
      backoff: { delayMs: 500, factor: 3, maxDelayMs: 10_000 },
      handler: () => {
        throw Object.assign(new Error('upstream 503'), { code: 'E503' });
      },
    });
    const runs = await Promise.all([1, 2, 3, 4].map((attempt) => runAttempt(def, null, { attempt })));
    expect(runs.map((r) => [r.outcome, r.retryDelayMs])).toEqual([
      ['failed', 500],
      ['failed', 1_500],
      ['failed', 4_500],
      ['failed_final', null],
    ]);
    expect(runs[0].error).toMatchObject({ name: 'Error', message: 'upstream 503', code: 'E503' });
    expect(runs[0].error?.stack).toContain('upstream 503');
    // The job's own maxAttempts wins over the definition's; without either, 25.
    expect((await runAttempt(def, null, { attempt: 2, maxAttempts: 2 })).outcome).toBe('failed_final');
    const plain = defineJob({ name: 'plain', backoff: (attempt: number) => attempt * 10, handler: () => Promise.reject(new Error('x')) });
    expect(await runAttempt(plain, null, { attempt: 24 })).toMatchObject({ outcome: 'failed', retryDelayMs: 240 });
    expect(await runAttempt(plain, null, { attempt: 25 })).toMatchObject({ outcome: 'failed_final', retryDelayMs: null });
    await expect(runAttempt(plain, null, { attempt: 26 })).rejects.toThrow("attempt 26 is past the job's maxAttempts (25): a worker never claims it");
  });

  test("the result as stored; the context's fields, with defaults and as set; the payload as enqueue stores it", async () => {
    const seen: Pick<JobContext, 'jobId' | 'attempt' | 'execution' | 'definition'>[] = [];
    const def = defineJob({
      name: 'echo',
      handler: (p: { at: Date; n?: number }, ctx: JobContext) => {
        seen.push({ jobId: ctx.jobId, attempt: ctx.attempt, execution: ctx.execution, definition: ctx.definition });
        return { p, undef: undefined, when: new Date(0) };
      },
    });
    const run = await runAttempt(def, { at: new Date(1_000), n: undefined });
    expect(run).toMatchObject({ outcome: 'succeeded', error: null, retryDelayMs: null, abortCause: null });
    expect(run.result).toEqual({ p: { at: '1970-01-01T00:00:01.000Z' }, when: '1970-01-01T00:00:00.000Z' });
    await runAttempt(def, { at: new Date(0) }, { jobId: '42', attempt: 3, execution: 5, definitionName: 'echo-v2' });
    expect(seen).toEqual([
      { jobId: '1', attempt: 1, execution: 1, definition: 'echo' },
      { jobId: '42', attempt: 3, execution: 5, definition: 'echo-v2' },
    ]);
    await expect(runAttempt(def, { at: new Date(0), n: 1n as unknown as number })).rejects.toMatchObject({ name: 'InvalidJsonError', path: '$.n' });
  });

  test('ctx.rateLimited ends the attempt rate limited, uncharged, due after its delay, whatever the handler does next; a bad delay fails the job with ConfigError, without retry', async () => {
    const def = defineJob({
      name: 'api',
      handler: async (_: null, ctx: JobContext) => {
        try {
          ctx.rateLimited({ retryAfterMs: 30_000 });
        } catch {
          return 'swallowed'; // the call decided already
        }
      },
    });
    expect(await runAttempt(def, null)).toMatchObject({ outcome: 'rate_limited', retryDelayMs: 30_000, result: null });
    const bad = defineJob({ name: 'bad', handler: (_: null, ctx: JobContext) => ctx.rateLimited({ retryAfterMs: -1 }) });
    expect(await runAttempt(bad, null)).toMatchObject({ outcome: 'failed_final', retryDelayMs: null, error: { name: 'ConfigError' } });
  });

  test('bad input is refused with ConfigError before the handler runs', async () => {
    let ran = false;
    const def = defineJob({ name: 'ok', handler: () => void (ran = true) });
    await expect(runAttempt(def, null, { attempts: 2 } as never)).rejects.toThrow('unknown runAttempt option "attempts"');
    await expect(runAttempt(def, null, { attempt: 0 })).rejects.toThrow(ConfigError);
    await expect(runAttempt(def, null, { attempt: 3, execution: 2 })).rejects.toThrow('execution must be an integer between 3');
    await expect(runAttempt(def, null, { jobId: '' })).rejects.toThrow(ConfigError);
    await expect(runAttempt(def, null, { signal: {} as AbortSignal })).rejects.toThrow('signal must be an AbortSignal');
    await expect(runAttempt({ name: 'x', handler: () => 1, timeoutMs: 0 }, null)).rejects.toThrow('timeoutMs of definition "x"');
    expect(ran).toBe(false);
  });
});

test('ctx.progress: every value reported, in order, as stored (through JSON); a value that cannot be stored, or over 64 KiB, throws InvalidJsonError in the handler', async () => {
  const def = defineJob({
    name: 'progress',
    handler: async (_: null, ctx: JobContext) => {
      ctx.progress(0);
      ctx.progress({ done: 1, at: new Date(0) });
      ctx.progress(undefined);
      const refused: string[] = [];
      for (const bad of [{ n: 1n }, 'x'.repeat(70_000)]) {
        try {
          ctx.progress(bad);
        } catch (err) {
          refused.push(`${(err as Error).name}: ${err instanceof InvalidJsonError}`);
        }
      }
      return refused;
    },
  });
  const run = await runAttempt(def, null);
  expect(run.progress).toEqual([0, { done: 1, at: '1970-01-01T00:00:00.000Z' }, null]);
  expect(run.result).toEqual(['InvalidJsonError: true', 'InvalidJsonError: true']);
});

test("a call ctx refuses (its ConfigError or InvalidJsonError) fails the job without retry, saying why; the same errors from the handler's own code, a step's fn among it, are retried", async () => {
  const cases: Record<string, (ctx: JobContext) => unknown> = {
    reservedStep: (ctx) => ctx.step('acta:x', () => 1),
    badDelay: (ctx) => ctx.rateLimited({ retryAfterMs: -1 }),
    badProgress: (ctx) => ctx.progress({ n: 1n }),
    noLedger: (ctx) => ctx.spawn('kid', {}),
    caughtThenRethrown: async (ctx) => {
      const err = await ctx.step('', () => 1).catch((e: unknown) => e);
      throw err;
    },
    // Not ctx's refusals: the handler's own.
    fromStepFn: (ctx) => ctx.step('s', () => Promise.reject(new ConfigError('the handler\'s own'))),
    ownConfigError: () => {
      throw new ConfigError('the handler\'s own');
    },
    caughtThenOther: async (ctx) => {
      await ctx.step('', () => 1).catch(() => undefined);
      throw new InvalidJsonError('$', 'the handler\'s own');
    },
  };
  const outcomes: Record<string, unknown> = {};
  for (const [name, call] of Object.entries(cases)) {
    const run = await runAttempt(defineJob({ name, handler: async (_: null, ctx: JobContext) => call(ctx) }), null);
    outcomes[name] = [run.outcome, run.error?.name];
    if (run.outcome === 'failed_final') expect(run.logs).toContainEqual(expect.objectContaining({ level: 'error', msg: `ctx refused the handler's call (${run.error?.name}): job fails without retry` }));
  }
  expect(outcomes).toEqual({
    reservedStep: ['failed_final', 'ConfigError'],
    badDelay: ['failed_final', 'ConfigError'],
    badProgress: ['failed_final', 'InvalidJsonError'],
    noLedger: ['failed_final', 'ConfigError'],
    caughtThenRethrown: ['failed_final', 'ConfigError'],
    fromStepFn: ['failed', 'ConfigError'],
    ownConfigError: ['failed', 'ConfigError'],
    caughtThenOther: ['failed', 'InvalidJsonError'],
  });
});

test("ctx works destructured, through a Proxy or Object.create, and a handler's writes to its fields change no decision", async () => {
  const def = defineJob({
    name: 'wrapped',
    maxAttempts: 2,
    handler: async (_: null, ctx: JobContext) => {
      const { progress, signal, step } = ctx;
      progress(1);
      new Proxy(ctx, {}).progress(2);
      const derived = Object.create(ctx) as JobContext;
      derived.progress(3);
      const stepped = await new Proxy(ctx, {}).step('s', () => 'ran');
      const seen = derived.attempt;
      (ctx as { attempt: number }).attempt = 2;
      (ctx as { jobId: string }).jobId = 'other';
      throw new Error(`${signal.aborted} ${typeof step} ${stepped} ${seen}`);
    },
  });
  const run = await runAttempt(def, null, { jobId: '7' });
  expect(run.progress).toEqual([1, 2, 3]);
  expect(run.steps.recorded).toEqual({ s: 'ran' });
  // Attempt 1 of 2 whatever the handler wrote: retried, and logged with the job's own bindings.
  expect(run).toMatchObject({ outcome: 'failed', retryDelayMs: 1_000, error: { message: 'false function ran 1' } });
  expect(run.logs.find((l) => l.msg === 'attempt failed')).toMatchObject({ jobId: '7', attempt: 1 });
});

test("logs: ctx.logger's lines and the worker's own about the attempt, with the job's bindings", async () => {
  const def = defineJob({
    name: 'logs',
    maxAttempts: 2,
    handler: (p: { user: string }, { logger }: JobContext) => {
      logger.debug({ user: p.user }, 'looking up');
      logger.info('found');
      throw new Error('mail server down');
    },
  });
  const first = await runAttempt(def, { user: 'ada' });
  expect(first.logs.map((l) => [l.level, l.msg])).toEqual([
    ['debug', 'looking up'],
    ['info', 'found'],
    ['warn', 'attempt failed'],
  ]);
  expect(first.logs[0]).toEqual({ level: 'debug', component: 'executor', jobId: '1', definition: 'logs', attempt: 1, user: 'ada', msg: 'looking up' });
  expect(first.logs[2]).toMatchObject({ maxAttempts: 2, error: { name: 'Error', message: 'mail server down' } });
  const last = await runAttempt(def, { user: 'ada' }, { attempt: 2 });
  expect(last.logs[2]).toMatchObject({ level: 'error', msg: 'job failed: no attempts left', attempt: 2 });
});
