import { defer, firstValueFrom, fromEvent, type SchedulerLike, takeUntil } from 'rxjs';
import { retryBackoff } from '../../operators';
import { PIPELINE } from '../config';
import { isTransientDbError } from '../db/transient';
import type { Ledger } from '../ledger';
import { AttemptCancelledError, ConfigError, InvalidJsonError, UnstorableStepResultError } from '../errors';
import { toJsonText } from '../json';
import type { StepRecord } from '../db/types';
import { type Entry, type Registry, throwIfAborted } from './registry';
import { refusedCall } from './refusals';

/**
 * `ctx.step(name, fn)`: a durable step inside a handler (docs/DESIGN.md, "Delivery";
 * test/db/steps.test.ts).
 *
 * The first time a job reaches step `name`, `fn` runs and its result is recorded in acta.steps
 * by acta.record_step, in the same statement that checks the attempt still owns the job (the
 * `(job, execution)` fence). Any later attempt of the same job gets the recorded result back
 * without running `fn`. Results pass through jsonb, so what comes back is the JSON form
 * (a Date comes back as its ISO string).
 *
 * What "a step ran" means: the step's record committed. What is at-least-once: `fn` itself. If
 * the attempt dies (crash, lost lease, transient database error) after `fn` ran and before its
 * record committed, a later attempt runs `fn` again. So `fn` should be idempotent toward the
 * outside world, or itself use an idempotency key. A step may not rely on a transaction shared
 * with its record (the record is acta's own statement), and must not call another step.
 *
 * `fn` does not run once the attempt's deadline has passed (the worker's scheduler clock against
 * the entry's deadline): the attempt is aborted as by the heartbeat's check. The step's database
 * calls repeat on transient errors (see STEP_RETRY).
 *
 * Throws AttemptCancelledError (and aborts the attempt) when the record is refused because the
 * attempt lost its lease; UnstorableStepResultError when `fn` ran and its result cannot be stored
 * (the job then fails without retry: running `fn` again would repeat its effects); ConfigError on
 * a bad name (empty, or starting with `acta:`, reserved for acta's own waits and spawns), which
 * fails the job without retry (src/worker/refusals.ts). Recorded steps are read once per attempt, at the first `step` call.
 */
export type Step = <T>(name: string, fn: () => Promise<T> | T) => Promise<T>;

/**
 * A step's database calls (reading the recorded steps, recording one) repeat on a transient error
 * (connection loss, server restart: src/db/transient.ts), 250 ms doubling to 5 s, ±25 %, as the
 * recovery pass's do (PIPELINE.callRetry*), for as long as the attempt holds its deadline and is
 * not aborted; then the attempt ends as the heartbeat decides. A database that is away for a
 * moment must not fail and charge an attempt whose handler did not fail. Repeating a record is
 * safe: a record that had committed before its answer was lost comes back as `exists` with this
 * attempt's own result (test/db/steps.test.ts, "a step survives transient database errors").
 */
const STEP_RETRY = { initialMs: PIPELINE.callRetryInitialMs, maxMs: PIPELINE.callRetryMaxMs, jitter: PIPELINE.callRetryJitter };

/**
 * Where a job's steps are kept: acta.steps for a worker (createStep), memory for acta/testing's
 * runAttempt (src/testing/index.ts). The rules of a step are createStepWith's, the same for both.
 */
export interface StepStore {
  /** Every recorded step of the job: name → result as stored. */
  load(): Promise<Map<string, unknown>>;
  /** Records step `name` with `resultJson` (checked JSON text) for this attempt, fenced: its result as stored, or 'stale'. */
  record(name: string, resultJson: string): Promise<StepRecord>;
}

/**
 * An attempt's database call repeated on transient errors by STEP_RETRY's rule: a step's, and a
 * workflow's spawn, wait and children read (src/workflows/workflow.ts, ledgerWorkflowStore).
 */
export function persistentCall(entry: Entry, scheduler: SchedulerLike): <R>(call: () => Promise<R>) => Promise<R> {
  return <R>(call: () => Promise<R>): Promise<R> =>
    firstValueFrom(
      defer(call).pipe(
        retryBackoff<R>({ ...STEP_RETRY, shouldRetry: (err) => isTransientDbError(err) && !entry.aborted && scheduler.now() < entry.deadlineAt, scheduler }),
        takeUntil(fromEvent(entry.controller.signal, 'abort')),
      ),
    ).catch((err: unknown) => {
      throwIfAborted(entry); // aborted while waiting to repeat: the abort's typed error
      throw err;
    });
}

/** The worker's `ctx.step`: its records in acta.steps, each call repeated on transient errors (STEP_RETRY). */
export function createStep(ledger: Pick<Ledger, 'loadSteps' | 'recordStep'>, workerId: string, entry: Entry, registry: Registry, scheduler: SchedulerLike): Step {
  const persist = persistentCall(entry, scheduler);
  const store: StepStore = {
    load: () => persist(() => ledger.loadSteps(entry.row.id)),
    record: (name, resultJson) => persist(() => ledger.recordStep({ workerId, jobId: entry.row.id, execution: entry.row.execution, name, resultJson })),
  };
  return createStepWith(store, entry, registry, scheduler);
}

/** The prefix of the steps acta records for a handler's waits and spawns (src/workflows/wait.ts, waitStep): no user step may take it. */
export const RESERVED_STEP_PREFIX = 'acta:';

/** `ctx.step` over `store`, with the rules of a step (see Step). */
export function createStepWith(store: StepStore, entry: Entry, registry: Registry, scheduler: SchedulerLike): Step {
  let recorded: Promise<Map<string, unknown>> | undefined;
  /** Steps of this attempt between their start and their record: a second call of the name waits for the first (its fn runs once). */
  const running = new Map<string, Promise<unknown>>();
  const step = async <T>(name: string, fn: () => Promise<T> | T): Promise<T> => {
    // ctx's refusals (src/worker/refusals.ts): the job fails without retry.
    if (typeof name !== 'string' || name.length === 0) throw refusedCall(new ConfigError('a step needs a non-empty name'));
    if (name.startsWith(RESERVED_STEP_PREFIX)) throw refusedCall(new ConfigError(`step names starting with "${RESERVED_STEP_PREFIX}" are acta's own (its waits and spawns: docs/workflows.md), got "${name}"`));
    if (typeof fn !== 'function') throw refusedCall(new ConfigError(`step "${name}" needs a function to run, got ${fn === null ? 'null' : typeof fn}`));
    recorded ??= store.load();
    const steps = await recorded;
    if (steps.has(name)) return steps.get(name) as T;
    // Past the attempt deadline the lease may be gone and another attempt may have recorded this
    // step: `fn` must not run. The heartbeat notices a passed deadline only on its next check, and
    // a process that was paused or whose event loop was blocked (a long GC, a synchronous loop)
    // reaches this line first (test/db/steps.test.ts, "a step reached after the attempt deadline
    // passed unnoticed"). The deadline (2.5 H after the last confirmed renewal) comes 1.5 H before
    // the lease ends (4 H; docs/DESIGN.md, "The lease clock"): no other attempt can exist while it
    // has not passed.
    if (scheduler.now() >= entry.deadlineAt) registry.abort(entry, 'deadline');
    throwIfAborted(entry);
    const value = await fn();
    let resultJson: string;
    try {
      resultJson = toJsonText(value === undefined ? null : value);
    } catch (err) {
      if (err instanceof InvalidJsonError) throw new UnstorableStepResultError(name, err);
      throw err;
    }
    // A superseded attempt (its claim was lost by the server) records nothing.
    throwIfAborted(entry);
    const outcome = await store.record(name, resultJson);
    if (outcome.status === 'stale') {
      registry.abort(entry, 'lost');
      throw new AttemptCancelledError(`step "${name}" could not be recorded: the attempt no longer owns job ${entry.row.id}`);
    }
    steps.set(name, outcome.result);
    return outcome.result as T;
  };
  return <T>(name: string, fn: () => Promise<T> | T): Promise<T> => {
    // The name is the step's identity (docs/reference.md, "Durable steps"), also for calls at once
    // (Promise.all): the one started first runs `fn`, the others get its record or its error
    // (test/db/steps.test.ts, "two calls of one step at once").
    const first = typeof name === 'string' ? running.get(name) : undefined;
    if (first) return first as Promise<T>;
    const run = step(name, fn);
    if (typeof name === 'string') {
      running.set(name, run);
      const forget = () => running.delete(name);
      run.then(forget, forget);
    }
    return run;
  };
}
