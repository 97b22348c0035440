/**
 * Typed errors of acta. Every error a user can meet has its own class, a stable `code`, and a
 * message that says what to do.
 */
import type { StoredError } from './db/types';
import { ActaError } from './actaError';

export { ActaError, atItem } from './actaError';
export * from './dbErrors';
import { DbUnansweredError, type EmbeddedHolder, holderName, holderStoppedOrBusy } from './dbErrors';

/**
 * A payload or result that cannot be stored as PostgreSQL `jsonb`: not JSON-serialisable
 * (BigInt, a circular reference, a function or undefined at the top), or a string holding
 * `\u0000` or a lone UTF-16 surrogate, which jsonb rejects. `path` locates the bad value
 * (`$.a[2].b`). Thrown by enqueue before anything is written.
 */
export class InvalidJsonError extends ActaError {
  constructor(
    readonly path: string,
    reason: string,
    options?: { cause?: unknown },
  ) {
    super('ACTA_INVALID_JSON', `value at ${path} cannot be stored as jsonb: ${reason}`, options);
  }
}

/** A configuration value out of its allowed range. */
export class ConfigError extends ActaError {
  constructor(message: string) {
    super('ACTA_CONFIG', message);
  }
}

/** A handler ran past its definition's `timeoutMs` or its lease-derived attempt deadline. */
export class AttemptTimeoutError extends ActaError {
  constructor(message: string) {
    super('ACTA_ATTEMPT_TIMEOUT', message);
  }
}

/** The attempt was cancelled: its lease was lost (recovered or fenced) or the worker is stopping. */
export class AttemptCancelledError extends ActaError {
  constructor(message: string) {
    super('ACTA_ATTEMPT_CANCELLED', message);
  }
}

/**
 * The job was cancelled (client.cancel, `acta cancel`): the reason a running handler's attempt is
 * aborted with, and what client.observe / client.result end with for a Cancelled job.
 */
export class JobCancelledError extends ActaError {
  constructor(
    readonly jobId: string,
    message = `job ${jobId} was cancelled`,
  ) {
    super('ACTA_JOB_CANCELLED', message);
  }
}

/** client.observe / client.result of a job that ended Failed: `error` is its stored last error. */
export class JobFailedError extends ActaError {
  constructor(
    readonly jobId: string,
    readonly error: StoredError | null,
  ) {
    super('ACTA_JOB_FAILED', `job ${jobId} failed${error ? `: ${error.name}: ${error.message.slice(0, 500)}` : ''}`);
  }
}

/** client.observe / client.result of a job the namespace does not have (never, or no longer: deleted). */
export class JobNotFoundError extends ActaError {
  constructor(
    readonly jobId: string,
    message = `the namespace has no job ${jobId}`,
    code = 'ACTA_JOB_NOT_FOUND',
  ) {
    super(code, message);
  }
}

/**
 * client.observe / client.result of a job that is gone because it was deleted (a JobNotFoundError,
 * code ACTA_JOB_DELETED), docs/retention.md, "Retention zero". `reason`: `'whileFollowed'` the
 * follower had found the job, and it was deleted before its outcome was read (sys.retention's
 * pass, client.deleteJobs); `'retentionZero'` it never found it, in a namespace that deletes a job
 * at its success, under an id the database had issued: most likely it succeeded and was deleted
 * before observe / result first reached the database (a job is watched from then on, not from its
 * enqueue). Either way its outcome cannot be read any more.
 */
export class JobDeletedError extends JobNotFoundError {
  constructor(
    jobId: string,
    readonly reason: 'whileFollowed' | 'retentionZero',
  ) {
    super(
      jobId,
      reason === 'whileFollowed'
        ? `job ${jobId} was deleted (by sys.retention or client.deleteJobs) before its outcome was read`
        : `the namespace has no job ${jobId}: it deletes a job at its success (retention zero: sys.retention's succeededMs 0), so the job most likely succeeded and was deleted before observe / result first reached the database; a namespace whose clients read results keeps succeededMs above 0 (docs/retention.md)`,
      'ACTA_JOB_DELETED',
    );
  }
}

/** client.result's `timeoutMs` passed before the job ended; the job itself is not changed. */
export class ResultTimeoutError extends ActaError {
  constructor(
    readonly jobId: string,
    readonly timeoutMs: number,
  ) {
    super('ACTA_RESULT_TIMEOUT', `job ${jobId} did not end within ${timeoutMs} ms`);
  }
}

/**
 * A claim reached its worker only after the attempt's deadline (2.5 H after the claim's start)
 * once more after the job's uncharged returns were used up (PIPELINE.unchargedReturnsMax): the
 * handler never ran, and this return costs an attempt. Usually H is too short for the time the
 * claim takes to arrive (a very large payload, a saturated worker).
 */
export class ClaimExpiredError extends ActaError {
  constructor(unchargedReturns: number) {
    super(
      'ACTA_CLAIM_EXPIRED',
      `the claim reached the worker after its attempt deadline, and the job has had ${unchargedReturns} uncharged returns already: this return costs an attempt (raise heartbeatIntervalMs above the time a claim takes to arrive)`,
    );
  }
}

/**
 * Thrown by `ctx.rateLimited()` to end the attempt: the job is due again after `retryAfterMs`,
 * uncharged, and its rate meter is held shut for the fleet until then (docs/DESIGN.md,
 * "Policies"). A handler that catches it changes nothing: the call itself decided the outcome.
 */
export class RateLimitedError extends ActaError {
  constructor(readonly retryAfterMs: number) {
    super('ACTA_RATE_LIMITED', `the handler reported being rate limited: the job is due again in ${retryAfterMs} ms, uncharged`);
  }
}

/**
 * worker.start() gave up: the worker has not reached the database since it started, for
 * `startTimeoutMs` (WorkerOptions; default 30 s). `cause` is the last error (e.g. connect
 * ECONNREFUSED); when none came yet, `unanswered` says what was still waiting, if the Db could tell
 * (a connect not answered before its connect_timeout: test/faults/unresponsive.test.ts). `holder`:
 * the Db reaches an embedded folder through the socket of the process holding it, which the message
 * then names, with what to do if it is stopped, instead of the server's address
 * (test/faults/embeddedHolder.test.ts). `testScheduler`: the worker's scheduler is an rxjs
 * TestScheduler and no answer came; the message then points to VirtualClock instead. Nothing was
 * registered; start a new worker once the database answers.
 */
export class StartTimeoutError extends ActaError {
  constructor(
    readonly startTimeoutMs: number,
    cause: unknown,
    unanswered?: string,
    holder?: EmbeddedHolder,
    testScheduler = false,
  ) {
    const last =
      cause !== undefined
        ? `last error: ${cause instanceof Error ? cause.message : String(cause)}`
        : unanswered !== undefined
          ? `no error yet: ${unanswered}`
          : holder !== undefined
            ? `no error yet: the process holding the embedded database (${holderName(holder)}) has not answered: ${holderStoppedOrBusy(holder)}`
            : 'last error: no answer yet';
    // The message above says what to do with a holder that does not answer; any other error of the holder's, to look at it.
    const advice =
      holder === undefined
        ? 'check the database address (DATABASE_URL) and that the server is up'
        : cause === undefined || (cause instanceof DbUnansweredError && cause.holder !== undefined)
          ? 'start the worker again once that process answers'
          : `check that the process holding the embedded database (${holderName(holder)}) runs and answers`;
    // A TestScheduler's one synchronous flush fires the timeout before any answer's promise can
    // settle: no database is at fault (test/startTimeout.spec.ts, "an rxjs TestScheduler").
    const message =
      testScheduler && cause === undefined
        ? `the worker's start got no answer within ${startTimeoutMs} virtual ms: its scheduler is an rxjs TestScheduler, which runs every action in one synchronous flush, so an answer (a promise) settles only after the start's timeout has fired; run the worker on a VirtualClock's clock.scheduler (acta/testing; docs/rx.md, "Testing in virtual time")`
        : `the worker could not reach the database within ${startTimeoutMs} ms of its start (${last}); ${advice}, or raise startTimeoutMs`;
    super('ACTA_START_TIMEOUT', message, { cause });
  }
}

/** Why enqueue refused a job by the namespace's stored definitions (src/policies/enqueueRule.ts). */
export interface EnqueueRefusal {
  namespace: string;
  /** The definition name refused. */
  name: string;
  /** The policies declared for it whose key the job lacks; empty: no worker declared the name in the namespace. */
  missing: ('concurrency' | 'rate' | 'lane')[];
  /** The concurrency and rate keys the job gives for policies the definition does not declare (they would limit nothing of its own). */
  unused: ('concurrency' | 'rate')[];
  /** The names declared in the namespace (up to 21; for the message); null: not read (a client on a ledger without a database). */
  declaredHere: string[] | null;
  /** Other namespaces where the name is declared (up to 6; for the message). */
  elsewhere: string[];
}

/**
 * Enqueue refused a job that would never run or run unlimited, by what the namespace's workers
 * declared (acta.definitions): code ACTA_UNKNOWN_DEFINITION when no worker declared its name there
 * (nothing would ever claim it), ACTA_POLICY_KEY_MISSING when its definition declares a
 * concurrency, rate or lane policy and the job has no key for it (it would run unlimited). Nothing
 * is written. The message names the fix. `refusal` holds the facts.
 */
export class EnqueueRefusedError extends ActaError {
  constructor(
    readonly refusal: EnqueueRefusal,
    message: string,
  ) {
    super(refusal.missing.length > 0 ? 'ACTA_POLICY_KEY_MISSING' : refusal.unused.length > 0 ? 'ACTA_POLICY_KEY_UNUSED' : 'ACTA_UNKNOWN_DEFINITION', message);
  }
}

/** An unknown definition name at enqueue time, when the client was given its definitions. */
export class UnknownDefinitionError extends ActaError {
  /** `known`: the names there are (listed in the message, up to 20). */
  constructor(name: string, known: string[] = []) {
    const list = known.length === 0 ? '' : `; known: ${known.slice(0, 20).map((k) => `"${k}"`).join(', ')}${known.length > 20 ? `, and ${known.length - 20} more` : ''}`;
    super('ACTA_UNKNOWN_DEFINITION', `no job definition named "${name}"${list}`);
  }
}

/**
 * `ctx.step(name, fn)`: `fn` ran, but its result cannot be stored as jsonb (the cause, an
 * InvalidJsonError, says where). The job fails without retry: a later attempt would run `fn`
 * again, repeating its effects, and its result still could not be stored (the same rule as a
 * handler's unstorable result; test/db/steps.test.ts, "a step whose result cannot be stored").
 */
export class UnstorableStepResultError extends ActaError {
  constructor(
    readonly step: string,
    cause: InvalidJsonError,
  ) {
    super('ACTA_UNSTORABLE_STEP_RESULT', `step "${step}" ran but its result cannot be stored (${cause.message}): the job fails without retry`, { cause });
  }
}

/**
 * A worker's `beforeExecution` hook failed: its operator errored (or threw when called), or it
 * completed while the worker was still claiming. The worker hands back what the hook held, stops
 * gracefully (running attempts finish and are written) and `done` rejects with this error;
 * `cause` is the hook's own error (docs/reference.md, "Hooks").
 */
export class HookFailedError extends ActaError {
  constructor(
    readonly hook: 'beforeExecution',
    reason: string,
    options?: { cause?: unknown },
  ) {
    super('ACTA_HOOK_FAILED', `the ${hook} hook ${reason}: the worker stops (what the hook held was handed back uncharged)`, options);
  }
}

/**
 * `ctx.waitForSignal(names, { timeoutMs })`: no signal of those names arrived within `timeoutMs`
 * (a durable due time, honoured within one heartbeat interval: docs/workflows.md). The handler may
 * catch it; uncaught, the attempt fails as any error does.
 */
export class SignalTimeoutError extends ActaError {
  constructor(
    readonly names: string[],
    readonly timeoutMs: number,
  ) {
    super('ACTA_SIGNAL_TIMEOUT', `no signal ${names.map((n) => `"${n}"`).join(' or ')} arrived within ${timeoutMs} ms`);
  }
}

/**
 * `ctx.waitForChildren()`: a child spawned with `onChildFailure: 'fail-parent'` failed for good,
 * was cancelled or was deleted. The parent fails without retry (docs/workflows.md); `child` is its
 * outcome.
 */
export class ChildFailedError extends ActaError {
  constructor(readonly child: { id: string; status: string; error?: unknown }) {
    super('ACTA_CHILD_FAILED', `child job ${child.id} ended ${child.status}, and it was spawned with onChildFailure 'fail-parent'`);
  }
}

/**
 * `ctx.waitForChildren()` with a child that has not ended in the lane of the parent, or of an
 * ancestor that had not ended when the child was spawned: the parked parent (or that ancestor,
 * which waits for the parent or may) holds the lane, so the child cannot start before it ends and
 * the wait would never end. The parent fails without retry; the child runs after the lane's holder
 * (docs/workflows.md, "Child jobs").
 */
export class ChildInParentLaneError extends ActaError {
  constructor(readonly childId: string, readonly lane: string) {
    super('ACTA_CHILD_IN_PARENT_LANE', `waitForChildren: child job ${childId} is in lane "${lane}", which the parent or an ancestor that has not ended holds, so it cannot start before that job ends and the wait would never end; give children you wait for a lane no ancestor holds, or none`);
  }
}

/**
 * The dashboard was asked to listen on an address other than the loopback without a token or basic
 * auth, or given a malformed one: refused at start, nothing listens (docs/dashboard.md, "Security").
 */
export class DashboardSecurityError extends ActaError {
  constructor(message: string) {
    super('ACTA_DASHBOARD_UNSAFE', message);
  }
}
