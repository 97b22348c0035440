import { identity, merge, mergeMap, type Observable, takeUntil, tap } from 'rxjs';
import { claimer, type ClaimerConfig } from './claimer';
import type { Completion } from './executor';
import type { Finalizer, WrittenBatch } from './finalizer';
import { type HookStagesConfig, hookStages } from './hooks';
import type { Entry } from './registry';

/** The stages of one worker's pipeline, built by worker.ts. */
export interface PipelineConfig {
  /** The claimer's inputs: permits, wakeups, intake, and a claim that registers what it claims. */
  claimer: ClaimerConfig<Entry>;
  /** Ends claiming (shutdown, fatal); the executors and the finalizer run on until their work is done. */
  stopClaiming$: Observable<unknown>;
  /** Executor count N: attempts run at once. */
  executors: number;
  /** One attempt: emits its completion, then completes, then calls `settled` (executor.ts, runEntry). */
  run: (entry: Entry, settled?: () => void) => Observable<Completion>;
  /** Returns one executor permit: called once per entry, after its completion (or hand-back) entered the finalizer's channel. */
  release: () => void;
  /** Hands an entry back uncharged into `handBacks$`; false when it is not (already handed back, no longer held, the worker gave up). */
  handBack: (entry: Entry) => boolean;
  /** Completions that no executor makes: entries handed back (shutdown, hooks); complete it to close the finalizer. */
  handBacks$: Observable<Completion>;
  finalizer: Finalizer;
  /** The user's operators at the named points, and what they need (hooks.ts). */
  hooks?: HookStagesConfig;
  /** Every executor has ended (claiming stopped and the last attempt handed over). */
  onExecutorsDone?: () => void;
}

/**
 * One worker's pipeline as one stream (docs/DESIGN.md, "The pipeline inside one worker"):
 * ```
 * claimer ──entries──▶ beforeExecution ──▶ mergeMap(aroundHandler(run), N) ─┐
 *                        hand-backs (shutdown, hooks) ──────────────────────┴▶ beforeWrite ──▶ finalizer.write ──▶ batches written
 * ```
 * Permits bound the claims (an executor returns its permit after its completion entered the
 * finalizer's channel); the channel's 128 + N bound closes the claimer's intake. The hook points
 * are identity without hooks; with them, hooks.ts keeps that contract (test/hooks.spec.ts).
 * Emits each written batch; completes once claiming stopped, every attempt was handed over, the
 * hand-backs completed and everything was written; errors only with a fatal error of a stage.
 */
export function pipeline(config: PipelineConfig): Observable<WrittenBatch> {
  const stages = config.hooks ? hookStages(config.hooks, { handBack: config.handBack, release: config.release, run: (entry) => config.run(entry) }) : {};
  const around = stages.aroundHandler;
  const executed$ = claimer(config.claimer).pipe(
    takeUntil(config.stopClaiming$),
    mergeMap((entries) => entries),
    stages.beforeExecution ?? identity,
    mergeMap((entry) => (around ? around(entry) : config.run(entry, config.release)), config.executors),
    tap({ complete: config.onExecutorsDone }),
  );
  return merge(executed$, config.handBacks$).pipe(stages.beforeWrite ?? identity, config.finalizer.write);
}
