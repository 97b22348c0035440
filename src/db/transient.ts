/**
 * Classifies database errors (test/faults/transient.spec.ts): a transient one — the
 * database went away for a while (connection loss, server restart or failover, too many
 * connections) or a transaction lost a race (serialization failure, deadlock) — is logged and
 * retried with back-off; any other stops the operation.
 *
 * Sources: PostgreSQL docs, Appendix A "PostgreSQL Error Codes" (SQLSTATE), and the errors node
 * `pg` and `net` raise when a connection cannot be made or drops (they carry no SQLSTATE).
 */

/** SQLSTATE classes that are transient as a whole: 08 connection exception. */
const TRANSIENT_SQLSTATE_CLASSES = new Set(['08']);

/** Single transient SQLSTATEs. */
const TRANSIENT_SQLSTATES = new Set([
  '40001', // serialization_failure
  '40P01', // deadlock_detected
  '53000', // insufficient_resources
  '53200', // out_of_memory
  '53300', // too_many_connections
  '53400', // configuration_limit_exceeded
  '55P03', // lock_not_available (lock_timeout)
  '57014', // query_canceled (statement_timeout)
  '57P01', // admin_shutdown (server stopping, pg_terminate_backend)
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, in recovery, failing over)
  '57P05', // idle_session_timeout
  '25006', // read_only_sql_transaction (a failover's old primary, still answering)
]);

/** Socket-level error codes of node's `net`/`dns`. */
const TRANSIENT_NODE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** Messages of `pg` errors that carry no code. */
const TRANSIENT_MESSAGES = [
  /Connection terminated/i, // "Connection terminated unexpectedly", "... due to connection timeout"
  /not queryable/i, // "Client has encountered a connection error and is not queryable"
  /timeout exceeded when trying to connect/i,
  /^timeout expired$/, // pg's connectionTimeoutMillis (src/db/pgDb.ts, CONNECT_TIMEOUT_MS)
  /Query read timeout/i,
  /terminating connection/i,
  /the database system is (starting up|shutting down|in recovery mode)/i,
];

/** SQLSTATEs that mean the acta schema (or one of its functions) is missing or out of date. */
const SCHEMA_SQLSTATES = new Set([
  '3F000', // invalid_schema_name
  '42P01', // undefined_table
  '42883', // undefined_function
  '42703', // undefined_column
]);

/** The SQLSTATE (or node error code) of `err`, if it has one. */
export function errorCode(err: unknown): string | undefined {
  if (!err || typeof err !== 'object') return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * True when `err` is a database error worth retrying (see the module doc): an outage, a restart
 * or failover, a lost connection, too many connections, a serialization failure or deadlock.
 * Exported from the package root for users (docs/reference.md, "Errors"): acta does not wrap the
 * driver's errors, so `code` stays the errno or SQLSTATE. An AggregateError (node's connect over
 * several addresses) is transient when any of its errors is; a wrapped error is judged by its
 * `cause`. One argument only, so `errors.some(isTransientDbError)` does not pass an index as depth.
 */
export function isTransientDbError(err: unknown): boolean {
  return transient(err, 0);
}

function transient(err: unknown, depth: number): boolean {
  if (!err || typeof err !== 'object' || depth > 4) return false;
  const code = errorCode(err);
  if (code === 'ACTA_DB_CLOSED') return false; // closed for good (DbClosedError), whatever its cause
  if (code === 'ACTA_EMBEDDED_SHARE_CLOSED') return true; // the folder's holder went away: connect() follows the next one
  if (code === 'ACTA_DB_UNANSWERED') return true; // a deadline dropped a silent connection (DbUnansweredError): the next call gets another
  if (code !== undefined) {
    if (TRANSIENT_SQLSTATES.has(code) || TRANSIENT_NODE_CODES.has(code)) return true;
    // A server's Unix socket is gone while it restarts (it removes .s.PGSQL.<port> at shutdown).
    if (code === 'ENOENT' && (err as { syscall?: unknown }).syscall === 'connect' && /\.s\.PGSQL\.\d+$/.test(String((err as { address?: unknown }).address ?? ''))) return true;
    if (/^[0-9A-Z]{5}$/.test(code)) return TRANSIENT_SQLSTATE_CLASSES.has(code.slice(0, 2));
  }
  const inner = (err as { errors?: unknown }).errors;
  if (Array.isArray(inner) && inner.some((e) => transient(e, depth + 1))) return true;
  const message = (err as { message?: unknown }).message;
  if (typeof message === 'string' && TRANSIENT_MESSAGES.some((re) => re.test(message))) return true;
  const cause = (err as { cause?: unknown }).cause;
  return cause !== undefined && cause !== err && transient(cause, depth + 1);
}

/** Transient SQLSTATEs of a statement that lost a race or ran too long on a server that answered. */
const ANSWERED_SQLSTATES = new Set(['40001', '40P01', '55P03', '57014', '25006']);

/**
 * True when `err` is transient because the server was not reached or the connection was lost
 * (not a statement that lost a race): the CLI then names the database it tried (src/ops/cli/main.ts).
 */
export function isUnreachableError(err: unknown): boolean {
  const code = errorCode(err);
  return isTransientDbError(err) && (code === undefined || !ANSWERED_SQLSTATES.has(code));
}

/** True when `err` says the acta schema is missing or out of date (run `acta migrate`). */
export function isSchemaError(err: unknown): boolean {
  const code = errorCode(err);
  return code !== undefined && SCHEMA_SQLSTATES.has(code);
}
