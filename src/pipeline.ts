import { identity, merge, mergeMap, type MonoTypeOperatorFunction, type Observable, takeUntil, tap } from 'rxjs';
import { claimer, type ClaimerConfig } from './claimer';
import type { Completion } from './executor';
import type { Finalizer, WrittenBatch } from './finalizer';
import type { Entry } from './registry';

/**
 * The points where an operator plugs into the pipeline. Each one keeps the pipeline's contract:
 * every attempt that enters comes out (or is handed back); none holds a permit past its attempt,
 * and none bypasses the completed channel's bound (docs/DESIGN.md, "The Rx surface").
 */
export interface PipelineHooks {
  /** Before execution, after admission: may delay (throttle) or tap entries. */
  beforeExecution?: MonoTypeOperatorFunction<Entry>;
  /** Around the handler: wraps one attempt's run, which emits its one completion. */
  aroundHandler?: (entry: Entry, run: Observable<Completion>) => Observable<Completion>;
  /** On completions, before the finalizer writes them: may tap or sample. */
  beforeWrite?: MonoTypeOperatorFunction<Completion>;
}

/** The stages of one worker's pipeline, built by worker.ts. */
export interface PipelineConfig {
  /** The claimer's inputs: permits, wakeups, intake, and a claim that registers what it claims. */
  claimer: ClaimerConfig<Entry>;
  /** Ends claiming (shutdown, fatal); the executors and the finalizer run on until their work is done. */
  stopClaiming$: Observable<unknown>;
  /** Admission (admission.ts). */
  admit: MonoTypeOperatorFunction<Entry>;
  /** Executor count N: attempts run at once. */
  executors: number;
  /** One attempt: emits its completion, then completes (executor.ts, runEntry). */
  run: (entry: Entry) => Observable<Completion>;
  /** Completions that no executor makes: entries handed back at shutdown; complete it to close the finalizer. */
  handBacks$: Observable<Completion>;
  finalizer: Finalizer;
  hooks?: PipelineHooks;
  /** Every executor has ended (claiming stopped and the last attempt handed over). */
  onExecutorsDone?: () => void;
}

/**
 * One worker's pipeline as one stream (docs/DESIGN.md, "The pipeline inside one worker"):
 * ```
 * claimer ──entries──▶ admit ──▶ beforeExecution ──▶ mergeMap(aroundHandler(run), N) ──▶ beforeWrite ─┐
 *                                                                     hand-backs (shutdown) ──────────┴▶ finalizer.write ──▶ batches written
 * ```
 * Permits bound the claims (an executor returns its permit after its completion entered the
 * finalizer's channel); the channel's 128 + N bound closes the claimer's intake. Emits each
 * written batch; completes once claiming stopped, every attempt was handed over, the hand-backs
 * completed and everything was written; errors only with a fatal error of a stage.
 */
export function pipeline(config: PipelineConfig): Observable<WrittenBatch> {
  const hooks = config.hooks ?? {};
  const around = hooks.aroundHandler;
  const executed$ = claimer(config.claimer).pipe(
    takeUntil(config.stopClaiming$),
    mergeMap((entries) => entries),
    config.admit,
    hooks.beforeExecution ?? identity,
    mergeMap((entry) => (around ? around(entry, config.run(entry)) : config.run(entry)), config.executors),
    hooks.beforeWrite ?? identity,
    tap({ complete: config.onExecutorsDone }),
  );
  return merge(executed$, config.handBacks$).pipe(config.finalizer.write);
}
