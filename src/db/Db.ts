/**
 * The database access seam (docs/DESIGN.md, "Storage"): the rest of acta sees only this, and
 * is blind to whether a PostgreSQL server or embedded PGlite is behind it.
 */
import { ConfigError } from '../errors';

/** Anything that runs one parameterised statement: a Db, a transaction, or a caller's `pg` client. */
export interface Queryable {
  query<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<{ rows: R[] }>;
}

/** Callbacks of a LISTEN subscription. */
export interface ListenHandlers {
  /** A NOTIFY arrived on the channel, with its payload. */
  onNotify(payload: string): void;
  /**
   * The listening connection was (re)established and LISTEN is in effect: notifications sent
   * while it was down are lost, so catch up (a catch-up made before LISTEN took effect could miss
   * one sent in between).
   */
  onConnect?(): void;
  /**
   * The listening connection was lost (or its first attempt failed): once per loss, not per
   * failed reconnect. It reconnects by itself and never gives up; `onConnect` follows.
   */
  onDown?(err: Error): void;
  /**
   * A NOTIFY sent on another connection did not reach this one with LISTEN in effect
   * (ListenUndeliveredError: a pooler in transaction mode). Called once, instead of `onDown`; the
   * LISTEN has then ended for good. Checked on a server when the LISTEN connection goes through a
   * pooler or has a connection string of its own (src/db/pgListener.ts).
   */
  onUndelivered?(err: Error): void;
  /**
   * The Db was closed (`db.close()`) while this LISTEN was open: it has ended for good, and every
   * later statement on the Db throws DbClosedError. Called once, before close() resolves.
   */
  onClosed?(): void;
}

/**
 * Settings of a LISTEN connection to a server (an in-process database ignores them). Through another
 * process's embedded folder (connect()), `probeTimeoutMs` is the deadline of each LISTEN sent to it.
 */
export interface ListenOptions {
  /** How often the listening session is probed, ms (default 10 000). */
  probeIntervalMs?: number;
  /** A probe not answered within this is a lost connection, ms (default 5 000). */
  probeTimeoutMs?: number;
}

/**
 * Options of one call on a Db. `deadlineMs`: the call is answered within it, else it rejects with
 * DbUnansweredError (transient: the statement may have run) and its connection is destroyed, so a
 * silent network holds no call, and no pooled connection, for good (test/faults/partition.test.ts).
 * Ignored by PGlite in its own process (nothing to go silent); kept through another process's
 * embedded folder (connect(): a holder stopped or busy; src/db/embeddedShare.ts). See withDeadline.
 */
export interface CallOptions {
  deadlineMs?: number;
}

export interface Db extends Queryable {
  readonly kind: 'postgres' | 'pglite';
  query<R = Record<string, unknown>>(text: string, params?: unknown[], options?: CallOptions): Promise<{ rows: R[] }>;
  /**
   * Runs `text` as the prepared statement `name` (a server parses and plans it once per
   * connection; PGlite runs it as `query`). For the worker's own calls that repeat with one text
   * (the claim, the completion batch: see pgDb.ts). `name` must always come with the same text.
   * Optional: a Db without it has those calls run by `query`. A wrapper that watches or changes
   * statements (`{ ...db, query: traced }`) must wrap `prepared` as well, or leave it out.
   */
  prepared?<R = Record<string, unknown>>(name: string, text: string, params: unknown[], options?: CallOptions): Promise<{ rows: R[] }>;
  /** Runs `fn` inside BEGIN/COMMIT on one connection; ROLLBACK and rethrow if it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>, options?: CallOptions): Promise<T>;
  /**
   * LISTEN on `channel` until the returned function is called; resolves once LISTEN is in effect
   * or its first attempt failed (it keeps trying).
   */
  listen(channel: string, handlers: ListenHandlers, options?: ListenOptions): Promise<() => Promise<void>>;
  /**
   * Closes every connection (and, for PGlite, the instance and its lock file); open LISTENs hear
   * `onClosed`. Afterwards query, prepared, transaction and listen reject with DbClosedError.
   */
  close(): Promise<void>;
}

/**
 * `db` with every query, prepared and transaction call made with `{ deadlineMs: ms }` (CallOptions):
 * a worker's own calls (LeaseClock.callDeadlineMs) and the CLI's client commands. Each call goes
 * through `db` itself, so a wrapper of it (`{ ...db, query: traced }`, a Proxy) still sees every
 * call; the deadline reaches the database when the wrapper passes the third argument on
 * (test/db/core.test.ts's Proxy passes two: its calls run without one).
 */
export function withDeadline(db: Db, ms: number): Db {
  // NaN, 0 or a negative deadline fired at once: every call failed as unanswered.
  if (typeof ms !== 'number' || !(ms > 0)) throw new ConfigError(`withDeadline: ms must be a number of milliseconds above 0, got ${typeof ms === 'number' ? ms : typeof ms}`);
  const call: CallOptions = { deadlineMs: ms };
  return {
    kind: db.kind,
    query: (text, params) => db.query(text, params, call),
    prepared: db.prepared === undefined ? undefined : (name, text, params) => db.prepared!(name, text, params, call),
    transaction: (fn) => db.transaction(fn, call),
    listen: (channel, handlers, options) => db.listen(channel, handlers, options),
    close: () => db.close(),
  };
}
