// The hooks' contract in virtual time (docs/DESIGN.md, "The Rx surface"; src/worker/hooks.ts): the
// pipeline of src/worker/pipeline.ts as worker.ts composes it (claimer, permits, the hook points, the
// executors, the real Finalizer), with scripted claims, executors that take `runMs` and a write
// that takes 1 ms. Hooks are written against the public types only.
import pino from 'pino';
import { delay, EMPTY, filter, identity, map, merge, NEVER, Observable, of, Subject, switchMap, take, tap, timeout, timer } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { perTenantThrottle } from '../examples/throttle';
import type { Span } from '../examples/tracing';
import { type Attempt, type AttemptCompletion, ConfigError, createWorker, type Db, defineJob, type WorkerHooks } from '../src';
import type { ClaimedRow, CompletionAck, CompletionOutcome } from '../src/db/types';
import { HookFailedError } from '../src/errors';
import { type Completion, handBackCompletion } from '../src/worker/executor';
import { Finalizer } from '../src/worker/finalizer';
import { Permits } from '../src/worker/permits';
import { pipeline } from '../src/worker/pipeline';
import { type Entry, Registry } from '../src/worker/registry';

const newScheduler = () => new TestScheduler((actual, expected) => expect(actual).toEqual(expected));

/** A job of the script: its id (its first letter is its tenant), how long its handler runs, how it ends. */
interface Job {
  id: string;
  runMs?: number;
  outcome?: CompletionOutcome;
}

interface Options {
  permits: number;
  jobs: Job[];
  hooks?: WorkerHooks;
  /** The hold limit (the worker: 2.5 H). */
  holdLimitMs?: number;
}

const tenantOf = (attempt: Attempt) => attempt.jobId[0];

/** The pipeline in virtual time; every log is [time, ...]. */
function harness(scheduler: TestScheduler, options: Options) {
  const now = () => scheduler.now();
  const registry = new Registry();
  const permits = new Permits(options.permits);
  const jobs = new Map(options.jobs.map((j) => [j.id, j]));
  const queue = [...options.jobs];
  const claims: [number, number, number][] = [];
  const starts: [number, string][] = [];
  const writes: [number, string[]][] = [];
  const released: number[] = [];
  permits.released$.subscribe(() => released.push(now()));
  const logs: { level: number; msg: string; reason?: string; err?: { name?: string } }[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => logs.push(JSON.parse(line)) });
  const failures: [number, unknown][] = [];
  const handBacks = new Subject<Completion>();
  const stopClaiming = new Subject<void>();
  let executorsDone: number | undefined;

  const claim = (n: number) => {
    const rows: ClaimedRow[] = queue.splice(0, n).map((j) => ({ id: j.id, definition: 'd', payload: { tenant: j.id[0] }, execution: 1, attempts: 0, maxAttempts: null, unchargedReturns: 0, priority: 0 }));
    claims.push([now(), n, rows.length]);
    return timer(2, scheduler).pipe(map(() => ({ rows: registry.addClaimed(rows, Number.MAX_SAFE_INTEGER, now()), nextDueInMs: null })));
  };
  const completion = (entry: Entry, outcome: CompletionOutcome): Completion => {
    const failed = outcome === 'failed' || outcome === 'failed_final';
    return {
      entry,
      row: { id: entry.row.id, execution: entry.row.execution, outcome, result: outcome === 'succeeded' ? 'null' : null, error: failed ? JSON.stringify({ name: 'Error', message: `${entry.row.id} failed` }) : null, retryDelayMs: outcome === 'failed' ? 1000 : 0 },
      bytes: 0,
    };
  };
  /** An executor as runEntry is one: an aborted entry is handed back without running; `settled` when it ends. */
  const run = (entry: Entry, settled?: () => void) =>
    new Observable<Completion>((subscriber) => {
      entry.taken = true;
      const aborted = entry.aborted;
      if (!aborted) {
        entry.state = 'executing';
        entry.startedAt = now();
        starts.push([now(), entry.row.id]);
      }
      const job = jobs.get(entry.row.id)!;
      const action = scheduler.schedule(
        () => {
          if (registry.isCurrent(entry)) {
            entry.state = 'finalizing';
            entry.endedAt = now();
            subscriber.next(aborted ? handBackCompletion(entry) : completion(entry, job.outcome ?? 'succeeded'));
          }
          subscriber.complete();
        },
        aborted ? 0 : (job.runMs ?? 3),
      );
      return () => {
        action.unsubscribe();
        settled?.();
      };
    });
  const finalizer = new Finalizer({
    executors: options.permits,
    logger,
    scheduler,
    moreComing$: of(false),
    write: (rows) => {
      writes.push([now(), rows.map((r) => `${r.id}:${r.outcome}`)]);
      const acks: CompletionAck[] = rows.map((r) => ({ id: r.id, execution: r.execution, status: r.outcome === 'succeeded' ? 'succeeded' : r.outcome === 'failed_final' ? 'failed' : 'ready' }));
      return timer(1, scheduler).pipe(map(() => acks));
    },
    onWritten: (batch) => batch.forEach((c) => registry.remove(c.entry)),
  });
  const handBack = (entry: Entry) => {
    if (entry.state === 'finalizing' || !registry.isCurrent(entry)) return false;
    entry.state = 'finalizing';
    handBacks.next(handBackCompletion(entry));
    return true;
  };
  const written$ = pipeline({
    claimer: { permits, wakeup$: NEVER, intakeOpen$: finalizer.intakeOpen$, claim, safetyPollMs: 1_000, pollFloorMs: 50, jitterMs: 0, random: () => 0, scheduler },
    stopClaiming$: stopClaiming,
    executors: options.permits,
    run,
    release: () => permits.release(1),
    handBack,
    handBacks$: handBacks,
    finalizer,
    hooks: options.hooks && { hooks: options.hooks, scheduler, logger, holdLimitMs: options.holdLimitMs ?? 100, onFailure: (err) => failures.push([now(), err]) },
    onExecutorsDone: () => (executorsDone = now()),
  });
  const errors: unknown[] = [];
  /** Subscribes the pipeline (the worker's subscription); unsubscribe it before the assertions. */
  const start = () => written$.subscribe({ error: (err: unknown) => errors.push(err) });
  return {
    start,
    claims,
    starts,
    writes,
    released,
    permits,
    registry,
    logs,
    failures,
    errors,
    stopClaiming: () => stopClaiming.next(),
    get executorsDone() {
      return executorsDone;
    },
    /** Log lines at `level` (30 info, 40 warn, 50 error) whose message contains `text`. */
    logged: (level: number, text: string) => logs.filter((l) => l.level === level && l.msg.includes(text)),
  };
}

/** Runs `body` with a harness in virtual time to `untilMs`, then unsubscribes: every permit must be back, nothing errored. */
function scenario(options: Options, untilMs: number, body?: (h: ReturnType<typeof harness>, scheduler: TestScheduler) => void) {
  const scheduler = newScheduler();
  let h!: ReturnType<typeof harness>;
  scheduler.run(({ flush }) => {
    h = harness(scheduler, options);
    body?.(h, scheduler);
    const subscription = h.start();
    scheduler.schedule(() => subscription.unsubscribe(), untilMs);
    flush();
  });
  expect(h.errors).toEqual([]);
  return h;
}

const FOUR_JOBS: Job[] = [{ id: 'a0' }, { id: 'a1' }, { id: 'a2' }, { id: 'b3' }];

/**
 * Jobs x0, a1, a2 on 2 permits, x0 handed back by a hook as the claim is answered (at 2): written at
 * once, its permit brings a claim a tick later, which takes a2 (started at 4); logged at `level` with `reason`.
 */
function expectHandedBackAtOnce(h: ReturnType<typeof harness>, level: number, reason: string) {
  expect(h.starts).toEqual([
    [2, 'a1'],
    [4, 'a2'],
  ]);
  expect(h.writes).toEqual([
    [2, ['x0:handed_back']],
    [5, ['a1:succeeded']],
    [7, ['a2:succeeded']],
  ]);
  expect(h.claims.slice(0, 2)).toEqual([
    [0, 2, 2],
    [2, 1, 1],
  ]);
  expect(h.logged(level, 'attempt handed back by a hook')[0].reason).toBe(reason);
  expect(h.permits.available).toBe(2);
}

describe('hooks: beforeExecution', () => {
  it('a per-tenant throttle (examples/throttle.ts) spaces one tenant\'s starts, and the finalizer\'s batches show it', () => {
    const throttled = scenario({ permits: 4, jobs: FOUR_JOBS, hooks: { beforeExecution: (attempts, { scheduler }) => attempts.pipe(perTenantThrottle(10, tenantOf, scheduler)) } }, 2_000);
    expect(throttled.starts).toEqual([
      [2, 'a0'],
      [2, 'b3'], // tenant b is not held up by tenant a
      [12, 'a1'],
      [22, 'a2'],
    ]);
    expect(throttled.writes).toEqual([
      [5, ['a0:succeeded']],
      [6, ['b3:succeeded']],
      [15, ['a1:succeeded']],
      [25, ['a2:succeeded']],
    ]);
    // A held attempt keeps its permit: the claimer claims again only for what came back.
    expect(throttled.claims).toEqual([
      [0, 4, 4],
      [5, 2, 0],
      [1_007, 4, 0], // the empty claim answered at 7: one safety poll
    ]);
    expect(throttled.permits.available).toBe(4);

    // The same jobs without the hook: every attempt starts at once, three completions in one batch.
    const plain = scenario({ permits: 4, jobs: FOUR_JOBS }, 2_000);
    expect(plain.starts.map(([at]) => at)).toEqual([2, 2, 2, 2]);
    expect(plain.writes).toEqual([
      [5, ['a0:succeeded']],
      [6, ['a1:succeeded', 'a2:succeeded', 'b3:succeeded']],
    ]);
  });

  it('an attempt the operator drops (filter) is handed back after the hold limit, logged at warn, and its permit comes back', () => {
    const h = scenario({ permits: 2, jobs: [{ id: 'x0' }, { id: 'a1' }], holdLimitMs: 100, hooks: { beforeExecution: (attempts) => attempts.pipe(filter((a) => tenantOf(a) !== 'x')) } }, 2_000);
    expect(h.starts).toEqual([[2, 'a1']]);
    expect(h.writes).toEqual([
      [5, ['a1:succeeded']],
      [102, ['x0:handed_back']], // held since 2: the hold limit passed at 102
    ]);
    expect(h.logged(40, 'attempt handed back by a hook')).toHaveLength(1);
    expect(h.logged(40, 'attempt handed back by a hook')[0].reason).toMatch(/held by beforeExecution for 100 ms/);
    // After the empty claim answered at 7 the claimer sleeps a safety poll; it then asks for BOTH permits: none leaked.
    expect(h.claims).toEqual([
      [0, 2, 2],
      [5, 1, 0],
      [1_007, 2, 0],
    ]);
    expect(h.permits.available).toBe(2);
  });

  it('tools.handBack hands an attempt back at once; the claimer claims again for its permit; a later emission of it is ignored', () => {
    const h = scenario(
      {
        permits: 2,
        jobs: [{ id: 'x0' }, { id: 'a1' }, { id: 'a2' }],
        hooks: {
          beforeExecution: (attempts, { handBack, scheduler }) =>
            merge(
              attempts.pipe(filter((a) => tenantOf(a) !== 'x' || !handBack(a, 'tenant x is paused'))),
              // The handed-back attempt emitted again later: not run.
              attempts.pipe(filter((a) => tenantOf(a) === 'x'), delay(20, scheduler)),
            ),
        },
      },
      2_000,
    );
    expectHandedBackAtOnce(h, 20, 'tenant x is paused');
  });

  it('an operator that errors: what it holds is handed back, the worker is told (HookFailedError), running attempts finish and are written', () => {
    const h = scenario(
      {
        permits: 4,
        jobs: FOUR_JOBS,
        hooks: {
          beforeExecution: (attempts, { scheduler }) =>
            attempts.pipe(
              perTenantThrottle(10, tenantOf, scheduler),
              tap((a) => {
                if (a.jobId === 'a1') throw new Error('tracing backend down');
              }),
            ),
        },
      },
      2_000,
    );
    expect(h.starts).toEqual([
      [2, 'a0'],
      [2, 'b3'],
    ]);
    expect(h.writes).toEqual([
      [5, ['a0:succeeded']],
      [6, ['b3:succeeded']],
      [12, ['a1:handed_back']], // both handed back at 12: a lone completion is written at once, the next after it
      [13, ['a2:handed_back']],
    ]);
    expect(h.failures).toHaveLength(1);
    const [at, err] = h.failures[0];
    expect(at).toBe(12);
    expect(err).toBeInstanceOf(HookFailedError);
    expect((err as HookFailedError).cause).toEqual(new Error('tracing backend down'));
    expect(h.logged(50, 'beforeExecution hook errored')).toHaveLength(1);
    // Claiming ended with the hook (no claim after it failed); the executors' stream completed.
    expect(h.claims).toEqual([
      [0, 4, 4],
      [5, 2, 0],
    ]);
    expect(h.executorsDone).toBe(12);
    expect(h.permits.available).toBe(4);
  });

  it('an operator that completes while the worker claims fails like one that errors', () => {
    const h = scenario({ permits: 2, jobs: [{ id: 'a0' }, { id: 'a1' }, { id: 'a2' }], hooks: { beforeExecution: (attempts, { scheduler }) => attempts.pipe(delay(1, scheduler), take(1)) } }, 2_000);
    expect(h.starts).toEqual([[3, 'a0']]);
    expect(h.writes).toEqual([
      [3, ['a1:handed_back']], // held when the hook completed
      [6, ['a0:succeeded']],
    ]);
    expect(h.failures.map(([at, err]) => [at, (err as Error).message])).toEqual([[3, expect.stringContaining('completed while the worker was claiming')]]);
    expect(h.claims).toEqual([[0, 2, 2]]); // claiming ended with the hook
    expect(h.permits.available).toBe(2);
  });

  it('an operator that throws when called fails at once, before any claim', () => {
    const h = scenario(
      {
        permits: 2,
        jobs: [{ id: 'a0' }],
        hooks: {
          beforeExecution: () => {
            throw new Error('bad hook');
          },
        },
      },
      2_000,
    );
    expect(h.claims).toEqual([]);
    expect(h.failures.map(([at, err]) => [at, (err as Error).message])).toEqual([[0, expect.stringContaining('threw when called')]]);
    expect(h.executorsDone).toBe(0);
  });

  it('an attempt cancelled while held (a client\'s cancel, a lost lease: aborted) leaves the hook at once, and the run ends it without its handler', () => {
    // The operator delays every attempt 10 s; a0's job is cancelled at 10. Was: it stayed held, its
    // permit with it, until the delay ran out (10,002), and only then did the run write its end.
    const h = scenario({ permits: 2, jobs: [{ id: 'a0' }, { id: 'a1' }], holdLimitMs: 60_000, hooks: { beforeExecution: (attempts, { scheduler }) => attempts.pipe(delay(10_000, scheduler)) } }, 20_000, (h, scheduler) => {
      scheduler.schedule(() => h.registry.abort(h.registry.get('a0')!, 'cancelled'), 10);
    });
    expect(h.starts).toEqual([[10_002, 'a1']]); // a0's handler never ran
    expect(h.writes).toEqual([
      [10, ['a0:handed_back']], // this harness's run hands every aborted entry back (the worker's writes the cancel's end)
      [10_005, ['a1:succeeded']],
    ]);
    expect(h.released[0]).toBe(10);
    expect(h.permits.available).toBe(2);
  });

  it('claiming stops (a graceful stop): what the throttle holds is handed back at once, as shutdown', () => {
    const h = scenario({ permits: 4, jobs: FOUR_JOBS, hooks: { beforeExecution: (attempts, { scheduler }) => attempts.pipe(perTenantThrottle(10, tenantOf, scheduler)) } }, 2_000, (h, scheduler) => {
      scheduler.schedule(() => h.stopClaiming(), 4);
    });
    expect(h.writes).toEqual([
      [4, ['a1:handed_back']],
      [5, ['a2:handed_back', 'a0:succeeded', 'b3:succeeded']],
    ]);
    expect(h.registry.size).toBe(0);
    expect(h.failures).toEqual([]);
    expect(h.executorsDone).toBe(5);
    expect(h.permits.available).toBe(4);
  });
});

describe('hooks: aroundHandler', () => {
  it('a span around the handler (examples/tracing.ts) sees its start, its end and its outcome', async () => {
    const { spanAroundHandler } = await import('../examples/tracing');
    const spans: Span[] = [];
    let scheduler!: TestScheduler;
    const h = scenario({ permits: 2, jobs: [{ id: 'a0', runMs: 3 }, { id: 'a1', runMs: 7, outcome: 'failed' }] }, 2_000, (_, s) => (scheduler = s));
    expect(h.writes).toHaveLength(2); // the plain run: what the hook must not change
    const traced = scenario({ permits: 2, jobs: [{ id: 'a0', runMs: 3 }, { id: 'a1', runMs: 7, outcome: 'failed' }], hooks: { aroundHandler: spanAroundHandler(spans, () => scheduler.now()) } }, 2_000, (_, s) => (scheduler = s));
    expect(spans).toEqual([
      { name: 'job d', attributes: { 'job.id': 'a0', 'job.attempt': 1 }, startMs: 2, endMs: 5, status: 'ok' },
      { name: 'job d', attributes: { 'job.id': 'a1', 'job.attempt': 1 }, startMs: 2, endMs: 9, status: 'error: failed a1 failed' },
    ]);
    expect(traced.writes).toEqual(h.writes);
    expect(traced.permits.available).toBe(2);
  });

  it('an attempt whose run the hook never starts (EMPTY) is handed back at once; its permit comes back and the claimer claims again', () => {
    const h = scenario({ permits: 2, jobs: [{ id: 'x0' }, { id: 'a1' }, { id: 'a2' }], hooks: { aroundHandler: (a, run) => (tenantOf(a) === 'x' ? EMPTY : run) } }, 2_000);
    expectHandedBackAtOnce(h, 40, 'aroundHandler ended without running the attempt');
  });

  it('an attempt whose run the hook neither starts nor ends (NEVER) is handed back after the hold limit, logged at warn, and its permit comes back', () => {
    const h = scenario({ permits: 1, jobs: [{ id: 'x0' }, { id: 'a1' }], holdLimitMs: 100, hooks: { aroundHandler: (a, run) => (tenantOf(a) === 'x' ? NEVER : run) } }, 2_000);
    // Was: x0 kept the one permit for good, a1 never ran, and nothing was logged.
    expect(h.writes).toEqual([
      [102, ['x0:handed_back']], // taken at 2: the hold limit passed at 102
      [107, ['a1:succeeded']],
    ]);
    expect(h.starts).toEqual([[104, 'a1']]);
    expect(h.logged(40, 'attempt handed back by a hook')[0].reason).toMatch(/aroundHandler did not start the run within 100 ms/);
    expect(h.permits.available).toBe(1);
  });

  it('a completion the hook swallows after its run is written as it ended (logged at error), and the permit comes back after it', () => {
    const h = scenario({ permits: 1, jobs: [{ id: 'a0' }, { id: 'a1' }], hooks: { aroundHandler: (_, run) => run.pipe(filter(() => false)) } }, 2_000);
    expect(h.writes).toEqual([
      [5, ['a0:succeeded']],
      [10, ['a1:succeeded']],
    ]);
    expect(h.released).toEqual([5, 10]);
    expect(h.logged(50, 'aroundHandler swallowed the completion')).toHaveLength(2);
    expect(h.permits.available).toBe(1);
  });

  it('a completion the hook delays goes on when the hook emits it; the permit is held until then', () => {
    const h = scenario({ permits: 1, jobs: [{ id: 'a0' }, { id: 'a1' }], hooks: { aroundHandler: (_, run, { scheduler }) => run.pipe(delay(10, scheduler)) } }, 2_000);
    expect(h.writes).toEqual([
      [15, ['a0:succeeded']],
      [30, ['a1:succeeded']], // claimed at 15, started at 17, ended at 20, passed on at 30
    ]);
    expect(h.released).toEqual([15, 30]);
    expect(h.claims.slice(0, 2)).toEqual([
      [0, 1, 1],
      [15, 1, 1],
    ]);
  });

  it('run subscribed twice runs the handler once, and its completion is written once', () => {
    const seen: AttemptCompletion[] = [];
    const h = scenario({ permits: 1, jobs: [{ id: 'a0' }], hooks: { aroundHandler: (_, run) => merge(run, run.pipe(tap((c) => seen.push(c)))) } }, 2_000);
    expect(h.starts).toEqual([[2, 'a0']]);
    expect(h.writes).toEqual([[5, ['a0:succeeded']]]);
    expect(seen.map((c) => [c.attempt.jobId, c.outcome, c.durationMs])).toEqual([['a0', 'succeeded', 3]]);
  });

  it('a hook that errors before starting the run: the attempt runs without it (logged at error), the worker goes on', () => {
    const h = scenario(
      {
        permits: 1,
        jobs: [{ id: 'a0' }],
        hooks: {
          aroundHandler: () => {
            throw new Error('span exporter missing');
          },
        },
      },
      2_000,
    );
    expect(h.starts).toEqual([[2, 'a0']]);
    expect(h.writes).toEqual([[5, ['a0:succeeded']]]);
    expect(h.logs.filter((l) => l.level >= 50).map((l) => l.msg)).toEqual(['aroundHandler threw when called: the attempt runs without it']);
    expect(h.failures).toEqual([]);
  });

  it('a hook that errors after starting the run (a timeout): one error for the attempt, with its reason; the run is written as it ends', () => {
    const h = scenario({ permits: 1, jobs: [{ id: 'a0', runMs: 20 }], hooks: { aroundHandler: (_, run, { scheduler }) => run.pipe(timeout({ each: 5, scheduler })) } }, 2_000);
    expect(h.starts).toEqual([[2, 'a0']]);
    expect(h.writes).toEqual([[22, ['a0:succeeded']]]);
    expect(h.released).toEqual([22]);
    const errors = h.logs.filter((l) => l.level >= 50);
    expect(errors.map((l) => [l.msg, l.err?.name])).toEqual([['aroundHandler errored: the run goes on and is written as it ends', 'TimeoutError']]);
    expect(h.permits.available).toBe(1);
  });

  it('an attempt aborted before the hook started its run (a stop) is run by the pipeline, which hands it back', () => {
    const h = scenario({ permits: 1, jobs: [{ id: 'a0' }], hooks: { aroundHandler: (_, run, { scheduler }) => timer(50, scheduler).pipe(switchMap(() => run)) } }, 2_000, (h, scheduler) => {
      scheduler.schedule(() => h.registry.abort(h.registry.get('a0')!, 'shutdown'), 10);
    });
    expect(h.starts).toEqual([]);
    expect(h.writes).toEqual([[10, ['a0:handed_back']]]);
    expect(h.released).toEqual([10]);
  });
});

describe('hooks: beforeWrite', () => {
  it('sees every completion (hand-backs too) as a view, before the write; what it emits changes nothing', () => {
    const seen: [number, string, string, number | null, string | undefined][] = [];
    let scheduler!: TestScheduler;
    const h = scenario(
      {
        permits: 3,
        jobs: [{ id: 'x0' }, { id: 'a1', runMs: 4, outcome: 'failed' }, { id: 'a2' }],
        hooks: {
          aroundHandler: (a, run) => (tenantOf(a) === 'x' ? EMPTY : run),
          beforeWrite: (completions) =>
            completions.pipe(
              tap((c) => seen.push([scheduler.now(), c.attempt.jobId, c.outcome, c.durationMs, c.error?.message])),
              filter(() => false),
            ),
        },
      },
      2_000,
      (_, s) => (scheduler = s),
    );
    expect(seen).toEqual([
      [2, 'x0', 'handed_back', null, undefined],
      [5, 'a2', 'succeeded', 3, undefined],
      [6, 'a1', 'failed', 4, 'a1 failed'],
    ]);
    expect(h.writes).toEqual([
      [2, ['x0:handed_back']],
      [5, ['a2:succeeded']],
      [6, ['a1:failed']],
    ]);
  });

  it('a hook that errors is detached (logged at error) and every completion is still written', () => {
    let calls = 0;
    const h = scenario(
      {
        permits: 2,
        jobs: [{ id: 'a0' }, { id: 'a1', runMs: 5 }, { id: 'a2' }],
        hooks: {
          beforeWrite: (completions) =>
            completions.pipe(
              tap(() => {
                calls++;
                throw new Error('log sink closed');
              }),
            ),
        },
      },
      2_000,
    );
    expect(calls).toBe(1);
    expect(h.writes.flatMap(([, ids]) => ids).sort()).toEqual(['a0:succeeded', 'a1:succeeded', 'a2:succeeded']);
    expect(h.logged(50, 'beforeWrite failed: detached')).toHaveLength(1);
    expect(h.permits.available).toBe(2);
  });
});

describe('hooks: every hook at once keeps the permit bound', () => {
  it('a throttle, a span and a sampler over 40 jobs: never more running than permits, every job written once, every permit back', () => {
    const jobs: Job[] = Array.from({ length: 40 }, (_, i) => ({ id: `${'abcd'[i % 4]}${i}`, runMs: 1 + (i % 5) }));
    let running = 0;
    let most = 0;
    const h = scenario(
      {
        permits: 4,
        jobs,
        hooks: {
          beforeExecution: (attempts, { scheduler }) => attempts.pipe(perTenantThrottle(7, tenantOf, scheduler)),
          aroundHandler: (_, run) =>
            new Observable<AttemptCompletion>((subscriber) => {
              most = Math.max(most, ++running);
              return run.pipe(tap({ finalize: () => running-- })).subscribe(subscriber);
            }),
          beforeWrite: (completions) => completions.pipe(filter((_, i) => i % 10 === 0)),
        },
      },
      5_000,
    );
    expect(most).toBeLessThanOrEqual(4);
    const written = h.writes.flatMap(([, ids]) => ids);
    expect(written.sort()).toEqual(jobs.map((j) => `${j.id}:succeeded`).sort());
    expect(h.permits.available).toBe(4);
    expect(h.registry.size).toBe(0);
  });
});

describe('hooks and events options', () => {
  it('createWorker refuses hooks that are not functions, unknown hooks and unknown events options, with ConfigError', () => {
    const job = defineJob({ name: 'job', handler: () => undefined });
    const worker = (options: object) => () => createWorker({ db: {} as Db, definitions: [job], logger: pino({ level: 'silent' }), ...options } as never);
    expect(worker({ hooks: { beforeExecution: 1 } })).toThrow(/^hooks\.beforeExecution must be a function, got number$/);
    expect(worker({ hooks: { aroundHandlr: () => EMPTY } })).toThrow(/^unknown hook "aroundHandlr"; known: beforeExecution, aroundHandler, beforeWrite$/);
    expect(worker({ hooks: null })).toThrow(ConfigError);
    expect(worker({ events: { payload: true } })).toThrow(/^unknown events option "payload"; known: payloads$/);
    expect(worker({ events: { payloads: 'yes' } })).toThrow(/^events\.payloads must be a boolean, got string$/);
    expect(worker({ hooks: { beforeWrite: identity }, events: { payloads: true } })).not.toThrow();
    expect(worker({ hooks: {} })).not.toThrow();
  });
});
