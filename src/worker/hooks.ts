import { type MonoTypeOperatorFunction, type Observable, type SchedulerLike, take } from 'rxjs';
import type { Logger } from 'pino';
import type { CompletionOutcome, JobId } from '../db/types';
import type { HookFailedError } from '../errors';
import { aroundHandlerStage } from './aroundHandlerStage';
import { beforeExecutionStage } from './beforeExecutionStage';
import { beforeWriteStage } from './beforeWriteStage';
import type { Completion } from './executor';
import { entryOfView } from './hookViews';
import type { Entry } from './registry';

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
  /** The worker's scheduler: time operators on it run in virtual time under a test's clock. Its `now()` is monotonic ms by default, not a date: give it durations. */
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
   * your Observable emits it (the object `run` gave: a copy is ignored) or ends. Rules: a run once started always ends and its completion is
   * written as it ended, even if your Observable swallows it (logged at error: a result dropped
   * here would otherwise run the job again); an attempt whose run you never start is handed back
   * uncharged (when your Observable ends, or once it has held the attempt unstarted for an attempt
   * deadline, 2.5 H: logged at warn); if your Observable errors (or the call throws) before starting the run, the run
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

/** What the stages of one worker share (hookStages makes it; the stages: *Stage.ts, the views: hookViews.ts). */
export interface HookContext {
  config: HookStagesConfig;
  deps: HookStagesDeps;
  tools: HookTools;
  /** Who can hand back an attempt right now: beforeExecution for what it holds, aroundHandler for a run not started. */
  handBacks: Map<Entry, (reason: string) => void>;
  /** Completions aroundHandler holds after their runs ended, each with what passes it on now. */
  heldCompletions: Set<() => void>;
  /** The stop's shutdown timeout passed: nothing is held any more (docs/rx.md, "Around the handler"). */
  releasing: boolean;
  /** Hands an entry back (if the worker still can) and logs it. */
  giveBack: (entry: Entry, reason: string, level: 'debug' | 'warn' | 'error') => void;
}

/**
 * The stages of the hooks given (docs/DESIGN.md, "The Rx surface"; test/hooks.spec.ts). Each
 * keeps the pipeline's contract: every entry that enters comes out to the executors or is handed
 * back, its permit comes back exactly once and only after its completion (or hand-back) entered
 * the finalizer's channel.
 */
export function hookStages(config: HookStagesConfig, deps: HookStagesDeps): HookStages {
  const { hooks, scheduler } = config;
  const logger = config.logger;
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
  const heldCompletions = new Set<() => void>();
  const giveBack = (entry: Entry, reason: string, level: 'debug' | 'warn' | 'error') => {
    if (deps.handBack(entry)) logger[level]({ jobId: entry.row.id, execution: entry.row.execution, reason }, 'attempt handed back by a hook');
  };
  const context: HookContext = { config, deps, tools, handBacks, heldCompletions, releasing: false, giveBack };
  config.releaseHeld$?.pipe(take(1)).subscribe(() => {
    context.releasing = true;
    for (const release of [...heldCompletions]) release();
  });
  return {
    beforeExecution: hooks.beforeExecution && beforeExecutionStage(hooks.beforeExecution, context),
    aroundHandler: hooks.aroundHandler && aroundHandlerStage(hooks.aroundHandler, context),
    beforeWrite: hooks.beforeWrite && beforeWriteStage(hooks.beforeWrite, context),
  };
}
