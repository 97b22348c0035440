import { SchemaNewerError, SchemaNotMigratedError } from '../errors';
import type { Db } from './Db';
import { assertMigrated } from './migrator';

/*
 * What a "does not exist" error of a client's statement on acta's schema means, as the migrator
 * (./migrator.ts, assertMigrated) judges the database: not migrated, newer than this build, or
 * current (the error is the caller's own). Held by test/db/enqueue.test.ts (missing, older, newer,
 * in a caller's transaction), test/db/jobs.test.ts (getJob; shared verdicts copied per caller) and
 * test/pglite.test.ts (inside PGlite's one session).
 */

/** "does not exist" errors: a schema (3F000), a function or procedure (42883), a table (42P01). */
const DOES_NOT_EXIST = new Set(['3F000', '42883', '42P01']);

/**
 * Of those, the ones naming acta's own schema, the enqueue's functions, or the tables getJob and
 * cancel read, as a server with English messages prints them (`lc_messages`). Only consulted
 * when the migrator could not be asked (see schemaError).
 */
const MISSING_SCHEMA_OBJECT = /^(schema "acta" does not exist|(function|procedure) acta\.(enqueue_jobs|enqueue_jobs_wake_early|wal_message_allowed)\(|relation "acta\.(jobs|executions|all_jobs|all_executions|succeeded_jobs)" does not exist)/;

/**
 * How long a "does not exist" error inside a caller's transaction waits for the migrator's
 * verdict, in ms, before the error's message decides: the caller's transaction may hold the
 * pool's last connection until it ends. acta's own bound.
 */
const VERDICT_IN_TX_WAIT_MS = 1_000;

/**
 * The migrator's verdict on `db`: 'current', or the error assertMigrated threw. One question at
 * a time per Db, shared by the failures that wait for it (a burst of failing enqueues asks once:
 * each question reads and hashes the SQL files and makes two queries).
 */
const verdicts = new WeakMap<Db, Promise<unknown>>();
function verdictOf(db: Db): Promise<unknown> {
  let pending = verdicts.get(db);
  if (!pending) {
    pending = assertMigrated(db).then(
      () => 'current',
      (e: unknown) => e,
    );
    verdicts.set(db, pending);
    void pending.then(() => verdicts.delete(db));
  }
  return pending;
}

/**
 * The error to throw for `err`, which a statement of the client on acta's schema raised: for a
 * "does not exist" error the migrator's verdict on the client's own Db when the schema is missing
 * or older than this client (SchemaNotMigratedError: migrate) or newer (SchemaNewerError: upgrade
 * the client), with `err` as the cause; `err` itself for anything else, and when the migrator
 * finds the schema current (e.g. a user's trigger on acta.jobs that calls a missing function of
 * its own: test/db/jobs.test.ts, "a user's trigger whose table is missing keeps its own error").
 * Inside a caller's transaction the verdict is waited for at most VERDICT_IN_TX_WAIT_MS, and on
 * PGlite not asked at all: that transaction may hold the pool's last connection or PGlite's one
 * session, and the question would wait for it forever (test/pglite.test.ts, "a failed query
 * leaves the one session usable"); then
 * `err`'s message decides (MISSING_SCHEMA_OBJECT: English messages).
 */
export async function schemaError(db: Db, err: unknown, inCallersTx: boolean): Promise<unknown> {
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code !== 'string' || !DOES_NOT_EXIST.has(code)) return err;
  let verdict: unknown = 'unknown';
  if (!inCallersTx) verdict = await verdictOf(db);
  else if (db.kind !== 'pglite') {
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<unknown>((resolve) => (timer = setTimeout(resolve, VERDICT_IN_TX_WAIT_MS, 'unknown')));
    timer?.unref();
    verdict = await Promise.race([verdictOf(db), waited]);
    clearTimeout(timer);
  }
  if (verdict instanceof SchemaNewerError || verdict instanceof SchemaNotMigratedError) {
    // A copy per caller, with that caller's error as the cause: the verdict is shared
    // (test/db/jobs.test.ts, "on a database without the acta schema getJob says to migrate").
    // A native error of the verdict's class (structuredClone, util.types.isNativeError and, from
    // Node 21, `stack` need one), with its fields and its stack.
    const own = Reflect.construct(Error, [verdict.message, { cause: err }], verdict.constructor) as Error;
    for (const [key, descriptor] of Object.entries(Object.getOwnPropertyDescriptors(verdict))) {
      if (key !== 'message' && key !== 'cause' && key !== 'stack') Object.defineProperty(own, key, descriptor);
    }
    own.stack = verdict.stack;
    return own;
  }
  if (verdict === 'current') return err;
  // Not known (not asked, not answered in time, or the question failed): the message decides.
  return typeof message === 'string' && MISSING_SCHEMA_OBJECT.test(message) ? new SchemaNotMigratedError(message, { cause: err }) : err;
}
