import { type MonoTypeOperatorFunction, Observable, type SchedulerLike, Subject, type Subscriber, type Subscription, take } from 'rxjs';
import type { Logger } from 'pino';
import type { CompletionOutcome, JobId } from '../db/types';
import { HookFailedError } from '../errors';
import type { Completion } from './executor';
import type { Entry } from './registry';
import { storedErrorSummary } from './storedError';

/** One attempt as a hook sees it: a readonly view of a claimed job (docs/DESIGN.md, "The Rx surface"). */
export interface Attempt {
  readonly jobId: JobId;
  readonly definition: string;
  /** 1-based: the attempts charged so far + 1 (the handler's `ctx.attempt`). */
  readonly attempt: number;
  /** The fence: how many times the job has been claimed (`ctx.execution`). */
  readonly execution: number;
  readonly priority: number;
  /** The job's payload: the object the handler gets, not a copy. Read it; changing it changes what the handler sees. */
  readonly payload: unknown;
}

/** An attempt's completion as a hook sees it, before it is written. */
export interface AttemptCompletion {
  readonly attempt: Attempt;
  /**
   * `succeeded`; `failed` (retried after `retryDelayMs`, unless the job's own limit makes it
   * final when written); `failed_final`; `handed_back` (back to Ready uncharged, the handler did
   * not run or was stopped); `expired` (the claim reached its worker after its deadline; uncharged);
   * `rate_limited` (the handler called `ctx.rateLimited`: uncharged, due after `retryDelayMs`).
   */
  readonly outcome: CompletionOutcome;
  /** The handler's run time, ms (on the worker's scheduler); null when it did not run. */
  readonly durationMs: number | null;
  /** The stored error's name and message, for `failed` and `failed_final`. */
  readonly error?: { readonly name: string; readonly message: string };
  /** `failed`, `rate_limited`: ms until the retry is due. */
  readonly retryDelayMs?: number;
}

/** What a hook gets besides its stream. */
export interface HookTools {
  /**
   * Hands an attempt back uncharged: its row is Ready again at once (the `handed_back`
   * completion, written like any other), and its executor permit comes back. For an attempt
   * `beforeExecution` holds, or one whose run `aroundHandler` has not started; returns false and
   * does nothing for any other (running, ended, or not an attempt). A hand-back makes the job due
   * at once: handing the same job back again and again is a busy loop.
   */
  handBack(attempt: Attempt, reason: string): boolean;
  /** The worker's scheduler: time operators on it run in virtual time under a TestScheduler. */
  readonly scheduler: SchedulerLike;
  /** The worker's logger, `{ component: 'hooks' }`. */
  readonly logger: Logger;
}

/**
 * Your operators at the pipeline's named points (docs/DESIGN.md, "The Rx surface";
 * docs/rx.md). None of them can leak an executor permit or get past the completed channel's
 * bound: an attempt that enters a hook either comes out or is handed back.
 */
export interface WorkerHooks {
  /**
   * Before execution, after admission: an operator over the attempts, subscribed once per
   * worker. It may delay them (a throttle: a delayed attempt keeps its permit, so claiming slows
   * with it), tap them, or hand them back (`tools.handBack`). Emit the Attempt objects it was
   * given; anything else is ignored. An attempt it holds for a whole attempt deadline (2.5 H:
   * a dropped one, e.g. by `filter`, cannot be told from a delayed one sooner) is handed back and
   * logged at warn; what it holds when the worker stops is handed back at once, and one aborted
   * while held (its job cancelled, its lease lost) leaves at once for the run to end it without
   * calling the handler. If it errors,
   * throws, or completes while the worker still claims, what it holds is handed back and the
   * worker stops gracefully with `HookFailedError` (`done` rejects): running without it would
   * break the rule it enforces (a throttle that protects a service).
   */
  beforeExecution?: (attempts: Observable<Attempt>, tools: HookTools) => Observable<Attempt>;
  /**
   * Around the handler: called per attempt with `run`, which runs the handler when subscribed
   * (once, however often it is subscribed) and emits the attempt's one completion. Return `run`
   * piped through your operators (time it, trace it); the completion goes on to the write when
   * your Observable emits it or ends. Rules: a run once started always ends and its completion is
   * written as it ended, even if your Observable swallows it (logged at error: a result dropped
   * here would otherwise run the job again); an attempt whose run you never start is handed back
   * uncharged; if your Observable errors (or the call throws) before starting the run, the run
   * starts without it; errors are logged at error, per attempt, and the worker goes on. A
   * completion held past an attempt deadline after its run ended is written anyway, and so is one
   * held when a stop's shutdown timeout passes (the hook is unsubscribed).
   */
  aroundHandler?: (attempt: Attempt, run: Observable<AttemptCompletion>, tools: HookTools) => Observable<AttemptCompletion>;
  /**
   * On completions, before the write: an operator that sees every completion (hand-backs too) as
   * it enters the finalizer's channel, for taps and sampling; what it emits is ignored, and it
   * cannot hold or drop a completion. If it errors it is detached, logged at error, and the
   * writes go on.
   */
  beforeWrite?: (completions: Observable<AttemptCompletion>, tools: HookTools) => Observable<unknown>;
}

/** The hook keys createWorker accepts. */
export const HOOK_KEYS = ['beforeExecution', 'aroundHandler', 'beforeWrite'] as const;

/** What the hook stages need from the pipeline (pipeline.ts) and the worker (worker.ts). */
export interface HookStagesConfig {
  hooks: WorkerHooks;
  scheduler: SchedulerLike;
  logger: Logger;
  /** How long an attempt may stay in `beforeExecution`, or a completion in `aroundHandler` after its run, ms (the worker: its attempt deadline, 2.5 H). */
  holdLimitMs: number;
  /** `beforeExecution` failed (a HookFailedError): the worker stops. */
  onFailure: (err: HookFailedError) => void;
  /**
   * Emits when a stop's shutdown timeout has passed (shutdown.ts): every completion `aroundHandler`
   * holds after its run ended goes on to the write at once, and none is held from then on.
   */
  releaseHeld$?: Observable<unknown>;
}

/** The pipeline's own parts the stages use. */
export interface HookStagesDeps {
  /** Hands an entry back uncharged through the finalizer; false when it is not (already handed back, no longer held, the worker gave up). */
  handBack: (entry: Entry) => boolean;
  /** Returns one executor permit. */
  release: () => void;
  /** One attempt's run (executor.ts, runEntry), without returning the permit. */
  run: (entry: Entry) => Observable<Completion>;
}

/** The stages the pipeline composes in place of its identity points. */
export interface HookStages {
  beforeExecution?: MonoTypeOperatorFunction<Entry>;
  /** One attempt, run around `aroundHandler`; returns the entry's permit when it ends, as runEntry does. */
  aroundHandler?: (entry: Entry) => Observable<Completion>;
  beforeWrite?: MonoTypeOperatorFunction<Completion>;
}

const viewOfEntry = new WeakMap<Entry, Attempt>();
const entryOfView = new WeakMap<object, Entry>();
const viewOfCompletion = new WeakMap<Completion, AttemptCompletion>();

/** The Attempt view of an entry (one per entry: hooks can compare them by identity). */
export function attemptOf(entry: Entry): Attempt {
  let view = viewOfEntry.get(entry);
  if (view === undefined) {
    const { row } = entry;
    view = Object.freeze({ jobId: row.id, definition: row.definition, attempt: row.attempts + 1, execution: row.execution, priority: row.priority, payload: row.payload });
    viewOfEntry.set(entry, view);
    entryOfView.set(view, entry);
  }
  return view;
}

/** The AttemptCompletion view of a completion (one per completion). */
export function completionOf(completion: Completion): AttemptCompletion {
  let view = viewOfCompletion.get(completion);
  if (view === undefined) {
    const { entry, row } = completion;
    const failed = row.outcome === 'failed' || row.outcome === 'failed_final';
    view = Object.freeze({
      attempt: attemptOf(entry),
      outcome: row.outcome,
      durationMs: entry.startedAt >= 0 && entry.endedAt >= 0 ? entry.endedAt - entry.startedAt : null,
      ...(failed ? { error: storedErrorSummary(row.error) } : {}),
      ...(row.outcome === 'failed' || row.outcome === 'rate_limited' ? { retryDelayMs: row.retryDelayMs } : {}),
    });
    viewOfCompletion.set(completion, view);
  }
  return view;
}

/**
 * The stages of the hooks given (docs/DESIGN.md, "The Rx surface"; test/hooks.spec.ts). Each
 * keeps the pipeline's contract: every entry that enters comes out to the executors or is handed
 * back, its permit comes back exactly once and only after its completion (or hand-back) entered
 * the finalizer's channel.
 */
export function hookStages(config: HookStagesConfig, deps: HookStagesDeps): HookStages {
  const { hooks, scheduler, holdLimitMs } = config;
  const logger = config.logger;
  /** Who can hand back an attempt right now: beforeExecution for what it holds, aroundHandler for a run not started. */
  const handBacks = new Map<Entry, (reason: string) => void>();
  const tools: HookTools = {
    handBack(attempt, reason) {
      const entry = entryOfView.get(attempt);
      const handBack = entry && handBacks.get(entry);
      if (!handBack) return false;
      handBack(String(reason));
      return true;
    },
    scheduler,
    logger,
  };
  /** Completions aroundHandler holds after their runs ended, each with what passes it on now. */
  const heldCompletions = new Set<() => void>();
  /** The stop's shutdown timeout passed: nothing is held any more (docs/rx.md, "Around the handler"). */
  let releasing = false;
  config.releaseHeld$?.pipe(take(1)).subscribe(() => {
    releasing = true;
    for (const release of [...heldCompletions]) release();
  });
  /** Hands an entry back (if the worker still can) and logs it. */
  const giveBack = (entry: Entry, reason: string, level: 'debug' | 'warn' | 'error') => {
    if (deps.handBack(entry)) logger[level]({ jobId: entry.row.id, execution: entry.row.execution, reason }, 'attempt handed back by a hook');
  };
  return {
    beforeExecution: hooks.beforeExecution && beforeExecutionStage(hooks.beforeExecution),
    aroundHandler: hooks.aroundHandler && aroundHandlerStage(hooks.aroundHandler),
    beforeWrite: hooks.beforeWrite && beforeWriteStage(hooks.beforeWrite),
  };

  function beforeExecutionStage(hook: NonNullable<WorkerHooks['beforeExecution']>): MonoTypeOperatorFunction<Entry> {
    return (source) =>
      new Observable<Entry>((subscriber) => {
        /** What the hook holds, oldest first, with the scheduler time it came in. */
        const held = new Map<Entry, number>();
        const attempts = new Subject<Attempt>();
        let ended = false;
        let sourceDone = false;
        let warnedForeign = false;
        let timer: Subscription | null = null;
        let sourceSub: Subscription | undefined;
        let hookSub: Subscription | undefined;

        /** Each held entry's abort callback (Entry.onAbort), while the hook holds it. */
        const aborts = new Map<Entry, () => void>();
        /** Takes `entry` out of what the hook holds, with its hand-back and abort callbacks. */
        const takeOut = (entry: Entry) => {
          held.delete(entry);
          handBacks.delete(entry);
          const onAbort = aborts.get(entry);
          aborts.delete(entry);
          if (onAbort !== undefined && entry.onAbort === onAbort) entry.onAbort = undefined;
        };
        /** On to the executors; one handed back by a stop meanwhile (worker.ts, shutdown) does not run: its permit comes back here. */
        const pass = (entry: Entry) => {
          if (entry.state === 'finalizing') deps.release();
          else subscriber.next(entry);
        };
        /** Takes `entry` out of the hook: handed back, its permit returned. */
        const letGo = (entry: Entry, reason: string, level: 'debug' | 'warn' | 'error') => {
          takeOut(entry);
          giveBack(entry, reason, level);
          deps.release();
        };
        /** One timer, for the oldest held attempt's hold limit (a Map iterates in insertion order). */
        const arm = () => {
          if (timer !== null || ended) return;
          const oldest = held.values().next();
          if (oldest.done) return;
          timer = scheduler.schedule(
            () => {
              timer = null;
              const now = scheduler.now();
              for (const [entry, since] of held) {
                if (now - since < holdLimitMs) break;
                letGo(entry, `held by beforeExecution for ${holdLimitMs} ms (dropped, or delayed past an attempt deadline)`, 'warn');
              }
              arm();
            },
            Math.max(0, oldest.value + holdLimitMs - scheduler.now()),
          );
        };
        const end = (failure?: HookFailedError) => {
          if (ended) return;
          ended = true;
          timer?.unsubscribe();
          sourceSub?.unsubscribe();
          hookSub?.unsubscribe();
          const reason = failure ? failure.message : 'the worker stopped claiming';
          for (const entry of [...held.keys()]) {
            if (!failure) entry.abort('shutdown'); // as shutdown.ts does to every unstarted attempt
            letGo(entry, reason, failure ? 'error' : 'debug');
          }
          if (failure) {
            logger.error({ err: failure.cause ?? failure }, failure.message);
            config.onFailure(failure);
          }
          subscriber.complete();
        };

        try {
          hookSub = hook(attempts.asObservable(), tools).subscribe({
            next: (attempt) => {
              const entry = entryOfView.get(attempt);
              if (entry === undefined) {
                if (!warnedForeign) logger.warn('beforeExecution emitted a value that is not an attempt it was given: ignored (emit the Attempt objects themselves)');
                warnedForeign = true;
                return;
              }
              if (!held.has(entry)) return; // handed back already, or emitted twice
              takeOut(entry);
              pass(entry);
            },
            error: (err: unknown) => end(new HookFailedError('beforeExecution', 'errored', { cause: err })),
            complete: () => end(sourceDone ? undefined : new HookFailedError('beforeExecution', 'completed while the worker was claiming')),
          });
        } catch (err) {
          end(new HookFailedError('beforeExecution', 'threw when called', { cause: err }));
        }
        if (ended) return undefined;
        sourceSub = source.subscribe({
          next: (entry) => {
            held.set(entry, scheduler.now());
            handBacks.set(entry, (reason) => held.has(entry) && letGo(entry, reason, 'debug'));
            // Aborted while held (a client's cancel, a lost lease, its deadline): its outcome is
            // decided, so it leaves the hook at once and the run makes that completion without
            // calling the handler (executor.ts), as aroundHandler's does, instead of waiting out
            // the hook's delay with its permit (test/hooks.spec.ts, "an attempt cancelled while held").
            const onAbort = () => {
              if (ended || !held.has(entry)) return;
              takeOut(entry);
              pass(entry);
            };
            aborts.set(entry, onAbort);
            entry.onAbort = onAbort;
            attempts.next(attemptOf(entry));
            arm();
          },
          error: (err: unknown) => {
            ended = true;
            hookSub?.unsubscribe();
            subscriber.error(err);
          },
          // Claiming stopped: what the hook holds goes back at once (shutdown.ts: unstarted rows are handed back).
          complete: () => {
            sourceDone = true;
            end();
          },
        });
        return () => {
          // Unsubscribed (the worker's teardown): the worker's stop or fatal path answers for the rows.
          ended = true;
          timer?.unsubscribe();
          sourceSub?.unsubscribe();
          hookSub?.unsubscribe();
          for (const entry of [...held.keys()]) takeOut(entry);
        };
      });
  }

  function aroundHandlerStage(hook: NonNullable<WorkerHooks['aroundHandler']>): (entry: Entry) => Observable<Completion> {
    return (entry) =>
      new Observable<Completion>((subscriber) => {
        // Held by an executor from here: a stop aborts it (below) instead of handing it back itself.
        entry.taken = true;
        const attempt = attemptOf(entry);
        /** Subscribers of `run` waiting for the completion. */
        const watchers = new Set<Subscriber<AttemptCompletion>>();
        let runSub: Subscription | undefined;
        let hookSub: Subscription | undefined;
        let timer: Subscription | null = null;
        let completion: Completion | undefined;
        let runEnded = false;
        let hookEnded = false;
        /**
         * The hook's silence is not a swallow: we cut it off (an abort before the run started), or
         * its error was logged already (one error per attempt: test/hooks.spec.ts, "a hook that
         * errors after starting the run").
         */
        let excused = false;
        let handedBack = false;
        let passed = false;
        let finished = false;
        /** The run's completion is being handed to every subscriber of `run`: the attempt ends after. */
        let delivering = false;

        const finish = () => {
          if (finished) return;
          finished = true;
          heldCompletions.delete(release);
          subscriber.complete();
        };
        /** The shutdown timeout passed while the hook holds the completion: it goes on now. */
        const release = () => settle();
        const pass = () => {
          if (passed || completion === undefined) return;
          passed = true;
          subscriber.next(completion);
        };
        /** The run has ended: the completion goes on once the hook passed it or ended (or the hold limit passed). */
        const settle = () => {
          if (finished || !runEnded || delivering) return;
          if (completion === undefined || passed) return finish();
          if (!hookEnded && !releasing) {
            timer ??= scheduler.schedule(() => {
              logger.error({ jobId: entry.row.id, execution: entry.row.execution, outcome: completion?.row.outcome, holdLimitMs }, 'aroundHandler held the completion too long: written as it ended');
              pass();
              finish();
            }, holdLimitMs);
            heldCompletions.add(release);
            return;
          }
          if (!hookEnded) {
            // A stop's shutdown timeout passed (test/testing/virtualWorker.spec.ts, "a completion aroundHandler holds at a stop").
            logger.error({ jobId: entry.row.id, execution: entry.row.execution, outcome: completion.row.outcome }, 'aroundHandler held the completion past the shutdown timeout: written as it ended');
            excused = true;
            hookEnded = true;
            hookSub?.unsubscribe();
          }
          if (!excused) logger.error({ jobId: entry.row.id, execution: entry.row.execution, outcome: completion.row.outcome }, 'aroundHandler swallowed the completion: written as it ended');
          pass();
          finish();
        };
        const startRun = () => {
          if (runSub !== undefined || handedBack) return;
          handBacks.delete(entry);
          if (entry.onAbort === onAbort) entry.onAbort = undefined;
          runSub = deps.run(entry).subscribe({
            next: (c) => {
              completion = c;
            },
            error: (err: unknown) => subscriber.error(err),
            complete: () => {
              runEnded = true;
              const view = completion && completionOf(completion);
              delivering = true;
              for (const watcher of [...watchers]) {
                if (view) watcher.next(view);
                watcher.complete();
              }
              delivering = false;
              settle();
            },
          });
        };
        const handBack = (reason: string, level: 'debug' | 'warn') => {
          if (runSub !== undefined || handedBack) return;
          handedBack = true;
          handBacks.delete(entry);
          if (entry.onAbort === onAbort) entry.onAbort = undefined;
          giveBack(entry, reason, level);
          finish();
        };
        /** Aborted before its run started (a stop, a deadline, a lost lease): the run decides, without the hook (executor.ts: it runs no handler for an aborted entry). */
        const onAbort = () => {
          if (runSub !== undefined || handedBack || finished) return;
          excused = true;
          hookEnded = true;
          hookSub?.unsubscribe();
          startRun();
        };
        entry.onAbort = onAbort;
        handBacks.set(entry, (reason) => handBack(reason, 'debug'));

        const run = new Observable<AttemptCompletion>((watcher) => {
          if (handedBack || finished) return watcher.complete();
          if (runEnded) {
            if (completion) watcher.next(completionOf(completion));
            return watcher.complete();
          }
          watchers.add(watcher);
          startRun();
          return () => watchers.delete(watcher);
        });
        const hookFailed = (err: unknown, what: string) => {
          logger.error({ err, jobId: entry.row.id, execution: entry.row.execution }, `aroundHandler ${what}${runSub ? ': the run goes on and is written as it ends' : ': the attempt runs without it'}`);
          excused = true;
          hookEnded = true;
          if (runSub === undefined) startRun();
          else settle();
        };
        try {
          hookSub = hook(attempt, run, tools).subscribe({
            next: (value) => {
              if (completion !== undefined && value === viewOfCompletion.get(completion)) {
                pass();
                settle();
              }
            },
            error: (err: unknown) => hookFailed(err, 'errored'),
            complete: () => {
              hookEnded = true;
              if (runSub === undefined) handBack('aroundHandler ended without running the attempt', 'warn');
              else settle();
            },
          });
        } catch (err) {
          hookFailed(err, 'threw when called');
        }
        if (finished) hookSub?.unsubscribe();
        return () => {
          finished = true;
          heldCompletions.delete(release);
          hookSub?.unsubscribe();
          runSub?.unsubscribe();
          timer?.unsubscribe();
          handBacks.delete(entry);
          if (entry.onAbort === onAbort) entry.onAbort = undefined;
          deps.release();
        };
      });
  }

  function beforeWriteStage(hook: NonNullable<WorkerHooks['beforeWrite']>): MonoTypeOperatorFunction<Completion> {
    return (source) =>
      new Observable<Completion>((subscriber) => {
        const completions = new Subject<AttemptCompletion>();
        let attached = true;
        const detach = (err: unknown) => {
          if (!attached) return;
          attached = false;
          logger.error({ err }, 'beforeWrite failed: detached (completions are written as before)');
        };
        let hookSub: Subscription | undefined;
        try {
          hookSub = hook(completions.asObservable(), tools).subscribe({ error: detach, complete: () => (attached = false) });
        } catch (err) {
          detach(err);
        }
        const sourceSub = source.subscribe({
          next: (completion) => {
            if (attached) {
              try {
                completions.next(completionOf(completion));
              } catch (err) {
                detach(err);
              }
            }
            subscriber.next(completion);
          },
          error: (err: unknown) => subscriber.error(err),
          complete: () => {
            completions.complete();
            subscriber.complete();
          },
        });
        return () => {
          sourceSub.unsubscribe();
          hookSub?.unsubscribe();
        };
      });
  }
}
