import { Observable, type SchedulerLike, type Subscriber } from 'rxjs';
import type { Logger } from 'pino';
import { PIPELINE } from '../config';
import { type CompletionRow, INT4_MAX, type JobId } from '../db/types';
import { backoffMs, type Definition, type JobContext } from '../definition';
import { ChildFailedError, ChildInParentLaneError, ClaimExpiredError, ConfigError, JobCancelledError, RateLimitedError, SignalTimeoutError, UnstorableStepResultError } from '../errors';
import { toJsonText } from '../json';
import { fireDecision } from '../recurring/schedules';
import { progressJson } from './progress';
import { abortedError, type Entry, type Registry } from './registry';
import type { Step } from './steps';
import type { Workflow } from '../workflows/workflow';
import { waitResultJson } from '../workflows/wait';
import { isError, isInstance, loggedError, storedError, storedErrorText } from './storedError';
import { isRefusedCall, refusedCall } from './refusals';
import type { Timeouts } from './timeouts';

/** ctx.rateLimited's delay when none is given, ms. */
const DEFAULT_RETRY_AFTER_MS = 1_000;

/** A completion record: what the finalizer writes for one attempt, and the entry it settles. */
export interface Completion {
  entry: Entry;
  row: CompletionRow;
  /** Result plus error size in UTF-8 bytes (the finalizer's 4 MiB bound). */
  bytes: number;
}

export interface ExecutorDeps {
  definitions: ReadonlyMap<string, Definition>;
  registry: Registry;
  logger: Logger;
  scheduler: SchedulerLike;
  /** The worker's execution timeouts (src/worker/timeouts.ts), on `scheduler`. */
  timeouts: Timeouts;
  /** Builds the attempt's `ctx.step` (src/worker/steps.ts); called on the handler's first use of it. */
  stepFor: (entry: Entry) => Step;
  /** Builds the attempt's waits and spawns (src/workflows/workflow.ts); called on the handler's first use of one. */
  workflowFor?: (entry: Entry) => Workflow;
  /**
   * Called once when the returned Observable ends: completed (after its completion went
   * downstream), errored, or unsubscribed (the worker returns the entry's permit here).
   * runEntry's third argument, when given, takes its place.
   */
  settled?: () => void;
  /** The handler is about to start (state Executing): events and hooks record the time (src/worker/events.ts). */
  onStart?: (entry: Entry) => void;
  /** The attempt's completion is about to go downstream (state Finalizing). */
  onEnd?: (entry: Entry) => void;
  /** ctx.progress (src/worker/progress.ts); absent: progress is checked and dropped. */
  progress?: (entry: Entry, value: unknown) => void;
  /** The attempt ended: a promise while its last progress value is still being sent (ProgressReporter.settle), which the completion waits for. */
  settleProgress?: (entry: Entry) => Promise<void> | undefined;
}

/**
 * Runs one entry (docs/DESIGN.md, "Executor"): skips it if its deadline already fired (the row
 * goes back uncharged), runs the handler with an AbortSignal and the definition's timeout, and
 * emits the completion record (state Finalizing), then completes. An entry superseded meanwhile
 * by a new claim of its job emits nothing: the new attempt owns the row (Registry.addClaimed).
 * Never errors for a job's own failure: per job, errors are values. `settled` runs when it
 * ends, i.e. only after the completion went on to the finalizer. (One Observable per job, not
 * defer + from(promise) + finalize: each layer is per-job allocation on the hot path.)
 */
export function runEntry(entry: Entry, deps: ExecutorDeps, settled = deps.settled): Observable<Completion> {
  return new Observable<Completion>((subscriber) => {
    entry.taken = true;
    execute(entry, deps).then(
      (completion) => {
        // Only an attempt that reported progress not sent yet waits (one call): the rest go on at once.
        const sending = deps.settleProgress?.(entry);
        if (sending) void sending.then(() => handOn(subscriber, entry, deps, completion));
        else handOn(subscriber, entry, deps, completion);
      },
      (err: unknown) => subscriber.error(err),
    );
    return settled;
  });
}

/** The attempt's completion goes downstream (state Finalizing), unless its entry was superseded or the run unsubscribed; then the run completes. */
function handOn(subscriber: Subscriber<Completion>, entry: Entry, deps: ExecutorDeps, completion: Completion): void {
  if (!subscriber.closed && deps.registry.isCurrent(entry)) {
    entry.state = 'finalizing';
    entry.completion = completion;
    deps.onEnd?.(entry);
    subscriber.next(completion);
  }
  subscriber.complete();
}

/** An attempt's state: what its ctx hands out, built on first use, and what its calls leave for the completion. */
interface AttemptState {
  readonly entry: Entry;
  readonly deps: ExecutorDeps;
  /** This attempt's number: the executor's copy, whatever a handler writes to ctx.attempt. */
  readonly attempt: number;
  logger: Logger | undefined;
  step: Step | undefined;
  progress: JobContext['progress'] | undefined;
  rateLimited: JobContext['rateLimited'] | undefined;
  workflow: Workflow | undefined;
  /** Set by the handler's first ctx.rateLimited call: the attempt's outcome, whatever follows. */
  rateLimitedMs: number | undefined;
  /** The handler returned, threw or was aborted: ctx.progress stores nothing more. */
  ended: boolean;
  toldEnded: boolean;
}

const ATTEMPT = Symbol('acta.attempt');

/**
 * The handler's ctx (JobContext): its getters on the prototype, over one state object, and the
 * functions they hand out (bound, so a handler may destructure them) built on first use. Two
 * objects per attempt where an object literal of getters made ten closures more: allocation on the
 * path every job takes. The state sits under a symbol, not in #private fields, so a Proxy or an
 * Object.create of ctx still reads it.
 */
class AttemptContext implements JobContext {
  readonly jobId: JobId;
  readonly attempt: number;
  readonly execution: number;
  readonly definition: string;
  readonly scheduledAt: Date | undefined;
  readonly [ATTEMPT]: AttemptState;

  constructor(state: AttemptState) {
    const { row } = state.entry;
    this.jobId = row.id;
    this.attempt = state.attempt;
    this.execution = row.execution;
    this.definition = row.definition;
    this.scheduledAt = row.schedule?.at;
    this[ATTEMPT] = state;
  }

  get signal(): AbortSignal {
    return this[ATTEMPT].entry.controller.signal;
  }

  get logger(): Logger {
    return jobLogger(this[ATTEMPT]);
  }

  get step(): Step {
    const a = this[ATTEMPT];
    return (a.step ??= a.deps.stepFor(a.entry));
  }

  get progress(): JobContext['progress'] {
    const a = this[ATTEMPT];
    return (a.progress ??= (value: unknown) => {
      // After the attempt ended nothing of it is stored: said once per attempt, not dropped
      // silently (test/testing/virtualWorker.spec.ts, "ctx.progress after the attempt ended").
      if (a.ended) {
        if (!a.toldEnded) safeLog(() => jobLogger(a).warn('ctx.progress after the attempt ended: the value is not stored (report progress before the handler returns)'));
        a.toldEnded = true;
        return;
      }
      try {
        if (a.deps.progress) a.deps.progress(a.entry, value);
        else progressJson(value);
      } catch (err) {
        throw refusedCall(err);
      }
    });
  }

  get rateLimited(): JobContext['rateLimited'] {
    const a = this[ATTEMPT];
    return (a.rateLimited ??= (options?: { retryAfterMs?: number }): never => {
      const ms = options?.retryAfterMs ?? DEFAULT_RETRY_AFTER_MS;
      if (!Number.isInteger(ms) || ms < 0 || ms > INT4_MAX) throw refusedCall(new ConfigError(`ctx.rateLimited: retryAfterMs must be an integer between 0 and ${INT4_MAX} (ms), got ${ms}`));
      a.rateLimitedMs ??= ms;
      throw new RateLimitedError(ms);
    });
  }

  get waitForSignal(): JobContext['waitForSignal'] {
    return flow(this[ATTEMPT]).waitForSignal;
  }

  get spawn(): JobContext['spawn'] {
    return flow(this[ATTEMPT]).spawn;
  }

  get spawnMany(): JobContext['spawnMany'] {
    return flow(this[ATTEMPT]).spawnMany;
  }

  get waitForChildren(): JobContext['waitForChildren'] {
    return flow(this[ATTEMPT]).waitForChildren;
  }
}

/** The attempt's pino child `{ jobId, definition, attempt }`, from its row: built on first use only (most handlers never log, and a child per job is not free). */
function jobLogger(a: AttemptState): Logger {
  return (a.logger ??= a.deps.logger.child({ jobId: a.entry.row.id, definition: a.entry.row.definition, attempt: a.attempt }));
}

function flow(a: AttemptState): Workflow {
  if (!a.deps.workflowFor) throw refusedCall(new ConfigError('workflows (waitForSignal, spawn, waitForChildren) need a worker with a ledger'));
  return (a.workflow ??= a.deps.workflowFor(a.entry));
}

/** The rate-limited completion (docs/DESIGN.md, "Policies": uncharged, due after the delay, the meter held shut), if the handler asked for one. */
function rateLimitedCompletion(a: AttemptState): Completion | undefined {
  const ms = a.rateLimitedMs;
  if (ms === undefined) return undefined;
  safeLog(() => jobLogger(a).info({ retryAfterMs: ms }, 'attempt rate limited: due again after retryAfterMs, uncharged'));
  return complete(a.entry, 'rate_limited', null, null, ms);
}

/** The wait the handler asked for: the attempt parks (docs/workflows.md), whatever it did next. */
function parked(a: AttemptState): Completion | undefined {
  const wait = a.workflow?.parked();
  return wait && complete(a.entry, wait.outcome, waitResultJson(wait), null, 0);
}

async function execute(entry: Entry, deps: ExecutorDeps): Promise<Completion> {
  const { row } = entry;
  const definition = deps.definitions.get(row.definition);
  const a: AttemptState = { entry, deps, attempt: row.attempts + 1, logger: undefined, step: undefined, progress: undefined, rateLimited: undefined, workflow: undefined, rateLimitedMs: undefined, ended: false, toldEnded: false };
  if (definition && (entry.abortCause === 'deadline' || (!entry.aborted && deps.scheduler.now() >= entry.deadlineAt))) {
    // The attempt deadline passed before the handler could start (the claim reached this worker
    // late, or waited for an executor past it): the handler never runs. Back to Ready uncharged
    // while the job has uncharged returns left (recovery's bound); after that it costs an
    // attempt, so a claim that always arrives late (a huge payload at a short H) ends Failed
    // instead of looping forever.
    if (row.unchargedReturns < PIPELINE.unchargedReturnsMax) return complete(entry, 'expired', null, null, 0);
    const stored = storedError(new ClaimExpiredError(row.unchargedReturns));
    return failure(a, definition, stored, () => stored);
  }
  if (!definition || entry.aborted) {
    // Cancelled by a client before it started: the job ends Cancelled.
    if (entry.abortCause === 'cancelled') return cancelled(entry);
    // Never started (the worker is stopping, or the lease was found lost): back to Ready,
    // uncharged (an unknown definition cannot happen: the claim asks only for the worker's own
    // definitions).
    return complete(entry, 'handed_back', null, null, 0);
  }
  // A schedule's fire missed by its catch-up policy ends skipped, its handler not run (docs/schedules.md).
  if (row.schedule && nextFire(entry).skip) {
    safeLog(() => jobLogger(a).info({ schedule: row.schedule?.name, scheduledAt: row.schedule?.at }, 'schedule fire missed: skipped by its catch-up policy'));
    return complete(entry, 'skipped', null, null, 0);
  }
  entry.state = 'executing';
  deps.onStart?.(entry);
  const timeoutMs = definition.timeoutMs ?? PIPELINE.executionTimeoutMs;
  const timeout = deps.timeouts.start(timeoutMs, () => deps.registry.abort(entry, 'timeout'));
  try {
    const value = await untilAborted(
      Promise.resolve().then(() => definition.handler(row.payload, new AttemptContext(a))),
      entry,
    );
    const after = rateLimitedCompletion(a) ?? parked(a);
    if (after) return after;
    let text: string;
    try {
      text = value === undefined || value === null ? 'null' : toJsonText(value);
    } catch (err) {
      // A result that cannot be stored fails its job without retry: another attempt would return
      // it again (test/faults/completion.test.ts, "poisoned outcomes next to clean ones").
      return failFinal(a, storedError(err, 'UnstorableResult'), 'result cannot be stored');
    }
    return complete(entry, 'succeeded', text, null, 0);
  } catch (err) {
    // Stopping gracefully, or giving up: the row goes back uncharged (test/faults/shutdown.test.ts,
    // "SIGTERM: running jobs get the shutdown timeout, then go back uncharged").
    if (entry.abortCause === 'shutdown' || entry.abortCause === 'fatal') return complete(entry, 'handed_back', null, null, 0);
    if (entry.abortCause === 'cancelled') return cancelled(entry);
    const limited = rateLimitedCompletion(a);
    if (limited) return limited;
    const wait = parked(a);
    if (wait && !entry.aborted) return wait;
    const aborted = entry.abortCause === undefined ? undefined : abortedError(entry, timeoutMs);
    if (!aborted && !isError(err)) {
      // A thrown non-Error carries no name, message or stack to store: the job fails without
      // retry, with a readable error describing the value (test/faults/completion.test.ts,
      // "poisoned outcomes next to clean ones").
      return failFinal(a, storedError(err), 'handler threw a non-Error value');
    }
    if (!aborted && isInstance(err, ChildFailedError)) return failFinal(a, storedError(err), 'a fail-parent child did not succeed');
    if (!aborted && isInstance(err, ChildInParentLaneError)) return failFinal(a, storedError(err), "a wait for a child in a lane the parent or an ancestor holds");
    // The timeout is the wait's recorded step: every retry's replay would throw it again at once,
    // up to hours of backoff for nothing (test/db/signalTimeout.test.ts).
    if (!aborted && isInstance(err, SignalTimeoutError)) return failFinal(a, storedError(err), 'a signal wait timed out and the handler let SignalTimeoutError through');
    if (!aborted && isInstance(err, UnstorableStepResultError)) {
      return failFinal(a, storedError(err), 'step result cannot be stored');
    }
    // A call ctx refused (src/worker/refusals.ts) is refused again on every attempt: retrying it
    // would only delay the failure, by up to hours of backoff.
    if (!aborted && isRefusedCall(err)) return failFinal(a, storedError(err), `ctx refused the handler's call (${(err as Error).name})`);
    // Logged as stored plus the error's own simple fields, under `error`: bounded, where pino's
    // `err` serialiser would write all of it, every element of an AggregateError included
    // (test/faults/completion.test.ts, "an error's cause chain and an AggregateError's errors").
    const stored = storedError(aborted ?? err);
    return failure(a, definition, stored, () => loggedError(aborted ?? err, stored));
  } finally {
    a.ended = true;
    timeout.cancel();
  }
}

/** Ends the job Failed without retry, logging its error as stored (its cause may be the user's own error). */
function failFinal(a: AttemptState, stored: Record<string, unknown>, what: string): Completion {
  safeLog(() => jobLogger(a).error({ error: stored }, `${what}: job fails without retry`));
  return complete(a.entry, 'failed_final', null, storedErrorText(stored), 0);
}

/**
 * The completion of a charged failed attempt: retried after the definition's backoff while the
 * job has attempts left, else final. A job's limit is its own maxAttempts, else its definition's,
 * else 25 (PIPELINE.maxAttempts; migration 0004): the rule acta.complete_executions applies to a
 * 'failed' outcome, from the same row. Logged with `logged()` (the error as logged) and the limit:
 * a retried attempt at warn, "attempt failed", with `retryDelayMs` (its backoff); the last one at
 * error, "job failed: no attempts left" (test/faults/completion.test.ts holds both).
 */
function failure(a: AttemptState, definition: Definition, stored: Record<string, unknown>, logged: () => Record<string, unknown>): Completion {
  const { entry, attempt } = a;
  const maxAttempts = entry.row.maxAttempts ?? definition.maxAttempts ?? PIPELINE.maxAttempts;
  const lastAttempt = attempt >= maxAttempts;
  let delayMs = 0;
  if (!lastAttempt) {
    try {
      delayMs = backoffMs(definition.backoff, attempt);
    } catch (backoffErr) {
      // A definition's backoff function that throws: its default backoff instead (the job is
      // still retried; the worker goes on).
      delayMs = backoffMs(undefined, attempt);
      safeLog(() => jobLogger(a).error({ error: storedError(backoffErr), delayMs }, 'backoff function threw: retrying after the default backoff'));
    }
  }
  // `attempt` is a binding of the job's logger already; a retried one says when it runs again. An
  // attempt the heartbeat aborted (its deadline passed, its lease lost: an outage, a stall) was
  // named in the heartbeat's one line for all of them: its own line goes at debug, or an outage
  // said a warning per held attempt (test/faults/outageLog.test.ts).
  if (lastAttempt) safeLog(() => jobLogger(a).error({ error: logged(), maxAttempts }, 'job failed: no attempts left'));
  else if (entry.abortCause === 'deadline' || entry.abortCause === 'lost') safeLog(() => jobLogger(a).debug({ error: logged(), maxAttempts, retryDelayMs: delayMs }, 'attempt failed'));
  else safeLog(() => jobLogger(a).warn({ error: logged(), maxAttempts, retryDelayMs: delayMs }, 'attempt failed'));
  return complete(entry, lastAttempt ? 'failed_final' : 'failed', null, storedErrorText(stored), delayMs);
}

/** Runs a log call; if it throws (a user's error whose fields throw when read), runs `fallback`, and swallows what that throws. */
function safeLog(log: () => void, fallback?: () => void): void {
  try {
    log();
  } catch {
    try {
      fallback?.();
    } catch {
      /* nothing left to log it with */
    }
  }
}

/** The completion of an attempt whose job a client cancelled while it ran: the job ends Cancelled (acta.complete_executions). */
function cancelled(entry: Entry): Completion {
  return complete(entry, 'cancelled', null, storedErrorText(storedError(new JobCancelledError(entry.row.id, 'job cancelled while it ran (client.cancel)'))), 0);
}

/** The `handed_back` completion of an entry that never reached a handler (Ready at once, uncharged). */
export function handBackCompletion(entry: Entry): Completion {
  return complete(entry, 'handed_back', null, null, 0);
}

/** A schedule's fire: skipped or run, and the instant its end arms (src/recurring/schedules.ts); none if the stored cron cannot be read here. */
function nextFire(entry: Entry): { skip: boolean; nextFireAt: Date | null } {
  try {
    return entry.row.schedule ? fireDecision(entry.row.schedule, entry.row.attempts === 0) : { skip: false, nextFireAt: null };
  } catch {
    return { skip: false, nextFireAt: null };
  }
}

function complete(entry: Entry, outcome: CompletionRow['outcome'], result: string | null, error: string | null, retryDelayMs: number): Completion {
  const nextFireAt = entry.row.schedule ? nextFire(entry).nextFireAt : undefined;
  return {
    entry,
    row: nextFireAt === undefined ? { id: entry.row.id, execution: entry.row.execution, outcome, result, error, retryDelayMs } : { id: entry.row.id, execution: entry.row.execution, outcome, result, error, retryDelayMs, nextFireAt },
    // UTF-8 bytes, as the bound is: string length counts UTF-16 units, a third of the bytes of
    // CJK text (test/faults/completion.test.ts, "the finalizer's 4 MiB bound counts UTF-8 bytes").
    bytes: (result === null ? 0 : Buffer.byteLength(result, 'utf8')) + (error === null ? 0 : Buffer.byteLength(error, 'utf8')),
  };
}

/** Resolves or rejects with `work`, or rejects with the cause as soon as `entry` is aborted (a handler that ignores its signal is not waited for; its late write is fenced out). */
function untilAborted<T>(work: Promise<T>, entry: Entry): Promise<T> {
  if (entry.abortCause !== undefined) return Promise.reject(entry.abortCause);
  return new Promise<T>((resolve, reject) => {
    entry.onAbort = reject;
    work.then(
      (v) => {
        entry.onAbort = undefined;
        resolve(v);
      },
      (e) => {
        entry.onAbort = undefined;
        reject(e);
      },
    );
  });
}

