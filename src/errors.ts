/**
 * Typed errors of acta. Every error a user can meet has its own class, a stable `code`, and a
 * message that says what to do.
 */
import type { StoredError } from './db/types';

/** Base class: `code` is stable and safe to switch on. */
export class ActaError extends Error {
  /** Thrown by enqueueMany about one of its items: that item's index (0-based), also named at the start of the message. */
  item?: number;

  constructor(
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * Marks `err`, thrown about one of the items of an enqueueMany (or `call`: publishMany) call, as
 * that item's: `item` is set and the message (and the stack's first line) starts with
 * "<call> item <index>: ".
 * Returns `err`.
 */
export function atItem<E extends ActaError>(err: E, index: number, call = 'enqueueMany'): E {
  // One that is marked already (an instance of the caller's own, thrown again) or frozen stays as
  // it is: marked again it read "enqueueMany item 0: enqueueMany item 0: ..."; frozen, the marking
  // threw a TypeError in its place.
  if (err.item !== undefined || !Object.isExtensible(err)) return err;
  try {
    const before = err.message;
    const stack = err.stack; // formatted now, with the message as it was
    err.item = index;
    err.message = `${call} item ${index}: ${before}`;
    if (typeof stack === 'string') err.stack = stack.replace(before, () => err.message);
  } catch {
    /* a property that cannot be written: the error goes out as far as it was marked */
  }
  return err;
}

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

/** The database has not been migrated to the schema this build of acta needs. */
export class SchemaNotMigratedError extends ActaError {
  constructor(detail: string, options?: { cause?: unknown }) {
    super('ACTA_SCHEMA_NOT_MIGRATED', `the acta schema is not migrated (${detail}): run \`npx acta migrate\` (or \`migrate(db)\`) first`, options);
  }
}

/**
 * The database's acta schema is newer than this acta: it records migrations this version does not
 * know, or SQL functions of a higher revision (sql/functions.lock). An older acta's migrate would
 * put back its own (older) function files under the newer tables and indexes, and the newer
 * workers would then refuse to start until migrated again (a rolling upgrade would go back and
 * forth so), so both migrate and a starting worker refuse instead, and change nothing
 * (test/db/migrator.test.ts, "an older acta refuses a schema a newer one migrated").
 */
export class SchemaNewerError extends ActaError {
  constructor(unknown: string[]) {
    super(
      'ACTA_SCHEMA_NEWER',
      `the acta schema is newer than this acta (the database has ${unknown.join(', ')}, which this version does not know): run the newer acta (its workers, its \`acta migrate\`); nothing was changed`,
    );
  }
}

/** A configuration value out of its allowed range. */
export class ConfigError extends ActaError {
  constructor(message: string) {
    super('ACTA_CONFIG', message);
  }
}

/**
 * An embedded (PGlite) data directory already open in another live process (`pid`), or, with
 * `pid` -1, whose lock file could not be taken in 50 tries though no live process holds it.
 * `unshared`: that process does not serve it to others (connect.ts).
 */
export class DataDirLockedError extends ActaError {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
    readonly unshared = false,
  ) {
    super(
      'ACTA_DATA_DIR_LOCKED',
      pid === process.pid
        ? `the data directory ${dataDir} is locked with this process's pid (${pid}): it is open in this process already (open it once per process and share that Db), or the lock was left by an earlier process with the same pid that recorded no start time to tell it apart (no /proc here: then remove ${dataDir}/acta.lock)`
        : pid > 0 && unshared
        ? `the data directory ${dataDir} is in use by process ${pid}, which does not serve it to other processes (opened with share: false, or its socket could not be bound); one process per data directory`
        : pid > 0
        ? `the data directory ${dataDir} is in use by process ${pid}; one process per data directory`
        : `the data directory ${dataDir}: its lock file (acta.lock) could not be taken, and no live process holds it; remove acta.lock* there if no process uses the folder`,
    );
  }
}

/**
 * An embedded (PGlite) data directory this process cannot use: not writable by its user (owned by
 * another, or its mode), on a read-only file system, or a path that is not a folder (a file is
 * there). `reason` is the file system's code (EACCES, EPERM, EROFS, EEXIST, ENOTDIR), `cause` its
 * error. Nothing was written (src/db/pgliteDb.ts, createPgliteDb).
 */
export class DataDirUnusableError extends ActaError {
  constructor(
    readonly dataDir: string,
    readonly reason: string,
    problem: string,
    options?: { cause?: unknown },
  ) {
    super(
      'ACTA_DATA_DIR_UNUSABLE',
      `the data directory ${dataDir} cannot be used for the embedded database: ${problem}. ` +
        'Give it a folder this user can write (the dataDir option of connect() or createPgliteDb, or ACTA_DATA_DIR), or use PostgreSQL (DATABASE_URL)',
      options,
    );
  }
}

/**
 * An embedded (PGlite) data directory made by a PGlite of another PostgreSQL major version (its
 * `PG_VERSION` file): PostgreSQL does not open a data folder of another major version, and
 * PGlite's own failure says only "PGlite failed to initialize properly". `found` is the folder's
 * major version, `expected` the one this acta's PGlite runs (an older or a newer acta's folder). Nothing was changed
 * (src/db/pgliteDb.ts, checkDataDirVersion; docs/upgrading.md, "The embedded database").
 */
export class DataDirVersionError extends ActaError {
  constructor(
    readonly dataDir: string,
    readonly found: string,
    readonly expected: number,
  ) {
    super(
      'ACTA_DATA_DIR_VERSION',
      `the data directory ${dataDir} holds a PostgreSQL ${found} database, made by another acta version's embedded PGlite; this acta's PGlite runs PostgreSQL ${expected}, which cannot open it (a data folder does not carry across PostgreSQL major versions). Nothing was changed. ` +
        `Use the acta version that made it, or move its data over (docs/upgrading.md, "The embedded database"), or move the folder aside (mv ${dataDir} ${dataDir}.pg${found}) to start with an empty one`,
    );
  }
}

/**
 * The process serving the embedded database to this one (src/db/embeddedShare.ts) closed it or
 * exited. Transient (src/db/transient.ts): a Db from connect() opens the folder again at its next call.
 */
export class EmbeddedShareClosedError extends ActaError {
  constructor(socketPath: string, options?: { cause?: unknown }) {
    super(
      'ACTA_EMBEDDED_SHARE_CLOSED',
      `the process serving the embedded database (socket ${socketPath}) closed it or exited: a Db from connect() opens the data folder again at its next call (this process takes it if it is free)`,
      options,
    );
  }
}

/**
 * A statement on a PostgreSQL server was not answered within its deadline (a worker's own calls:
 * one heartbeat interval, at least 5 s; the CLI's: 30 s, `acta sql`'s and `acta migrate`'s their
 * `--deadline`), and its connection was destroyed so the
 * pool replaces it: a silent network (a NAT that dropped the flow, a cable pulled) neither answers
 * nor closes a connection. Transient (src/db/transient.ts): the statement may have run, as after
 * any lost answer; a worker repeats it (test/faults/partition.test.ts).
 */
export class DbUnansweredError extends ActaError {
  /** `advice`: what to do next, in the caller's words (the CLI's `--deadline`), after the message. */
  constructor(
    readonly deadlineMs: number,
    advice?: string,
    options?: { cause?: unknown },
  ) {
    super('ACTA_DB_UNANSWERED', `the database did not answer within ${deadlineMs} ms: its connection was dropped (a silent network or a server that stopped answering; the statement may have run)${advice ? `; ${advice}` : ''}`, options);
  }
}

/**
 * A NOTIFY committed on the Db's own connections did not reach its LISTEN connection within the
 * probe timeout (`timeoutMs`): a pooler in transaction or statement mode between acta and
 * PostgreSQL, whose server connection, holding the LISTEN, serves other clients between
 * statements; or a listen URL naming another database. The LISTEN has ended for good; the safety
 * poll (and Redis wakeups) claim.
 * Fix: a direct connection for LISTEN (ACTA_LISTEN_URL, `connect({ listenUrl })`; docs/operating.md,
 * "Behind PgBouncer").
 */
export class ListenUndeliveredError extends ActaError {
  constructor(readonly timeoutMs: number) {
    super(
      'ACTA_LISTEN_UNDELIVERED',
      `a NOTIFY did not reach the LISTEN connection within ${timeoutMs} ms: a pooler in transaction mode between acta and PostgreSQL, or a listen URL naming another database? Give LISTEN a direct connection to this database (ACTA_LISTEN_URL, or connect({ listenUrl })); until then wakeups come from the safety poll (and Redis)`,
    );
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
  constructor(readonly jobId: string) {
    super('ACTA_JOB_NOT_FOUND', `the namespace has no job ${jobId}`);
  }
}

/**
 * The Db was closed (`db.close()`): a statement or LISTEN asked of it afterwards, and what an open
 * client.observe / client.result ends with when its Db closes under it (docs/reference.md,
 * "observe").
 */
export class DbClosedError extends ActaError {
  constructor(options?: { cause?: unknown }) {
    super('ACTA_DB_CLOSED', 'the database connection was closed (db.close()): open a new Db to go on', options);
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
 * (a connect not answered before its connect_timeout: test/faults/unresponsive.test.ts). Nothing
 * was registered; start a new worker once the database answers.
 */
export class StartTimeoutError extends ActaError {
  constructor(
    readonly startTimeoutMs: number,
    cause: unknown,
    unanswered?: string,
  ) {
    const last = cause !== undefined ? `last error: ${cause instanceof Error ? cause.message : String(cause)}` : unanswered !== undefined ? `no error yet: ${unanswered}` : 'last error: no answer yet';
    super(
      'ACTA_START_TIMEOUT',
      `the worker could not reach the database within ${startTimeoutMs} ms of its start (${last}); check the database address (DATABASE_URL) and that the server is up, or raise startTimeoutMs`,
      { cause },
    );
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
