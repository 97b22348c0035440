/**
 * The typed errors about the database itself: its schema, the embedded folder and its sharing, and
 * a connection that does not answer or was closed. Exported with the rest by src/errors.ts.
 */
import { ActaError } from './actaError';

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

/**
 * An embedded (PGlite) data directory already open in another live process (`pid`), or, with
 * `pid` -1, whose lock file could not be taken in 50 tries though no live process holds it.
 * `unshared`: that process does not serve it to others (connect.ts). `elsewhere`: that process is
 * of another pid namespace (another container with the folder mounted), where `pid` is its own:
 * its liveness socket said it runs (src/db/holderLiveness.ts).
 */
export class DataDirLockedError extends ActaError {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
    readonly unshared = false,
    readonly elsewhere = false,
  ) {
    super('ACTA_DATA_DIR_LOCKED', lockedMessage(dataDir, pid, unshared, elsewhere));
  }
}

function lockedMessage(dataDir: string, pid: number, unshared: boolean, elsewhere: boolean): string {
  const lock = `${dataDir}/acta.lock`;
  if (pid <= 0) return `the data directory ${dataDir}: its lock file (acta.lock) could not be taken, and no live process holds it; remove acta.lock* there if no process uses the folder`;
  const who = elsewhere ? `process ${pid} of another pid namespace (another container with this folder mounted, whose pid ${pid} it is)` : `process ${pid}`;
  if (unshared) return `the data directory ${dataDir} is in use by ${who}, which does not serve it to other processes (opened with share: false, or its socket could not be bound); one process per data directory`;
  if (elsewhere) return `the data directory ${dataDir} is in use by ${who}, named in its lock file ${lock}, and that process runs (its liveness socket answers); one process per data directory: stop it first (connect() uses the folder through it while it serves it)`;
  if (pid === process.pid) {
    return `the data directory ${dataDir} is locked with this process's pid (${pid}): it is open in this process already (open it once per process and share that Db), or the lock was left by an earlier process with the same pid that recorded no start time to tell it apart (no /proc here: then remove ${lock})`;
  }
  return `the data directory ${dataDir} is in use by process ${pid}, named in its lock file ${lock}; one process per data directory: stop that process first (connect() uses the folder through it while it serves it). If process ${pid} is not acta (a pid reused since an acta left the lock), remove ${lock}`;
}

/**
 * An embedded (PGlite) data directory this process cannot use: not writable by its user (owned by
 * another, or its mode), on a read-only file system, or a path that is not a folder (a file is
 * there), or where the name of one of acta's files beside the database (`acta.lock`, `acta.sock`,
 * `acta.unshared`, the liveness socket) is taken by a folder (EISDIR) or by a FIFO, a socket or a
 * device (EFTYPE: src/db/sideFiles.ts). `reason` is the file system's code (EACCES, EPERM, EROFS,
 * EEXIST, ENOTDIR, EISDIR, EFTYPE), `cause` its error;
 * `fix`, when given, the advice instead of the default. Nothing was written (src/db/pgliteDb.ts,
 * createPgliteDb).
 */
export class DataDirUnusableError extends ActaError {
  constructor(
    readonly dataDir: string,
    readonly reason: string,
    problem: string,
    options?: { cause?: unknown; fix?: string },
  ) {
    super(
      'ACTA_DATA_DIR_UNUSABLE',
      `the data directory ${dataDir} cannot be used for the embedded database: ${problem}. ` +
        (options?.fix ?? 'Give it a folder this user can write (the dataDir option of connect() or createPgliteDb, or ACTA_DATA_DIR), or use PostgreSQL (DATABASE_URL)'),
      options && { cause: options.cause },
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
 * `notTaken`: the holder closed cleanly and said it never started this call, so it did not run and
 * may be sent again (a Db from connect() does so itself); else it may have run (a kill).
 */
export class EmbeddedShareClosedError extends ActaError {
  readonly notTaken: boolean;

  constructor(socketPath: string, options?: { cause?: unknown; notTaken?: boolean }) {
    super(
      'ACTA_EMBEDDED_SHARE_CLOSED',
      `the process serving the embedded database (socket ${socketPath}) closed it or exited${options?.notTaken ? ' before it started this call' : ''}: a Db from connect() opens the data folder again at its next call (this process takes it if it is free)`,
      options,
    );
    this.notTaken = options?.notTaken === true;
  }
}

/**
 * A statement was not answered within its deadline (a worker's own calls: one heartbeat interval,
 * at least 5 s; the CLI's: 30 s, `acta sql`'s and `acta migrate`'s their `--deadline`). Transient
 * (src/db/transient.ts); a worker repeats it (test/faults/partition.test.ts).
 * On a PostgreSQL server its connection was destroyed so the pool replaces it: a silent network (a
 * NAT that dropped the flow, a cable pulled) neither answers nor closes a connection; the statement
 * may have run, as after any lost answer.
 * Through the socket of the process holding an embedded folder (`holder` set: that process is
 * stopped or busy), the holder never starts it once the deadline has passed: it ran only if the
 * holder had taken it before (src/db/embeddedShare.ts; test/faults/embeddedHolder.test.ts).
 */
export class DbUnansweredError extends ActaError {
  /** The embedded holder the call went to (its socket, and its pid when known); undefined for a server. */
  readonly holder?: EmbeddedHolder;
  /** On a server: the backend process of the dropped connection, when it had been made (pg_stat_activity's pid). */
  readonly backendPid?: number;
  /**
   * True when the server was asked afterwards, on a new connection, and its backend was still
   * running the statement: the server was reached and the statement was slow, not the network
   * silent (the CLI's `--deadline`: src/ops/cli/deadline.ts; test/cli.test.ts).
   */
  readonly stillRunning?: boolean;
  /**
   * With stillRunning: true when the statement was then cancelled on the server and its backend
   * was seen no longer running it, so nothing of it committed (its transaction rolled back); absent
   * when the cancel was not confirmed, and the statement may still finish there.
   */
  readonly cancelled?: boolean;

  /** `advice`: what to do next, in the caller's words (the CLI's `--deadline`), after the message. */
  constructor(
    readonly deadlineMs: number,
    advice?: string,
    options?: { cause?: unknown; holder?: EmbeddedHolder; backendPid?: number; stillRunning?: boolean; cancelled?: boolean },
  ) {
    const what = options?.stillRunning ? stillRunningMessage(deadlineMs, options.cancelled === true) : unanswered(deadlineMs, options?.holder);
    super('ACTA_DB_UNANSWERED', `${what}${advice ? `; ${advice}` : ''}`, options && { cause: options.cause });
    if (options?.holder !== undefined) this.holder = options.holder;
    if (options?.backendPid !== undefined) this.backendPid = options.backendPid;
    if (options?.stillRunning) this.stillRunning = true;
    if (options?.stillRunning && options.cancelled) this.cancelled = true;
  }
}

function stillRunningMessage(deadlineMs: number, cancelled: boolean): string {
  const then = cancelled ? 'it was cancelled there (nothing of it committed)' : 'its cancel there was not confirmed: the statement may still finish there';
  return `the statement was still running on the database after ${deadlineMs} ms: its connection was dropped, and ${then}`;
}

/** The process holding an embedded folder, as a follower reaches it (src/db/embeddedShare.ts). */
export interface EmbeddedHolder {
  socketPath: string;
  pid?: number;
}

function unanswered(deadlineMs: number, holder: EmbeddedHolder | undefined): string {
  if (holder === undefined) {
    return `the database did not answer within ${deadlineMs} ms: its connection was dropped (a silent network or a server that stopped answering; the statement may have run)`;
  }
  return (
    `the process holding the embedded database (${holderName(holder)}) did not answer within ${deadlineMs} ms: ${holderStoppedOrBusy(holder)}; ` +
    'the statement ran only if that process had taken it before, and it will not start it now'
  );
}

/** An embedded folder's holder as messages name it: `pid <pid>, socket <path>`, the pid when known. */
export function holderName(holder: EmbeddedHolder): string {
  return `${holder.pid === undefined ? '' : `pid ${holder.pid}, `}socket ${holder.socketPath}`;
}

/** Why a holder does not answer, and what lets it go on (DbUnansweredError, StartTimeoutError). */
export function holderStoppedOrBusy(holder: EmbeddedHolder): string {
  const pid = holder.pid === undefined ? '<its pid>' : String(holder.pid);
  return (
    `it is stopped (Ctrl-Z, SIGSTOP, a debugger: \`kill -CONT ${pid}\` or \`fg\` in its terminal lets it go on) or busy ` +
    "(another process's long statement or transaction holds its one session)"
  );
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
