/**
 * Classifies database errors: a transient one (the database went away for a while, or a
 * transaction lost a race) is retried with back-off; any other stops the operation.
 * Source: PostgreSQL docs, Appendix A "PostgreSQL Error Codes" (SQLSTATE), and the network
 * errors node `pg` raises when a connection drops.
 */

const TRANSIENT_SQLSTATE_CLASSES = ['08']; // connection exception
const TRANSIENT_SQLSTATES = new Set([
  '53300', // too_many_connections
  '53400', // configuration_limit_exceeded
  '57P01', // admin_shutdown (server stopping, pg_terminate_backend)
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, recovery, failover)
  '40001', // serialization_failure
  '40P01', // deadlock_detected
  '55P03', // lock_not_available
  '25006', // read_only_sql_transaction (a failover's old primary)
]);
const TRANSIENT_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ECONNABORTED']);
const TRANSIENT_MESSAGES = [/Connection terminated/i, /not queryable/i, /timeout exceeded when trying to connect/i, /Client was closed/i, /terminating connection/i];

/** True when `err` is a database error worth retrying (see module doc). */
export function isTransientDbError(err: unknown): boolean {
  if (!err || typeof err !== 'object') return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (TRANSIENT_SQLSTATES.has(code) || TRANSIENT_NODE_CODES.has(code)) return true;
    if (code.length === 5 && TRANSIENT_SQLSTATE_CLASSES.includes(code.slice(0, 2))) return true;
  }
  const message = (err as { message?: unknown }).message;
  return typeof message === 'string' && TRANSIENT_MESSAGES.some((re) => re.test(message));
}
