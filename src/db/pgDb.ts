import { createHash } from 'node:crypto';
import { Client, Pool, type PoolClient, type PoolConfig } from 'pg';
import { intOption, knownKeys, timerDelay } from '../config';
import { ConfigError, DbClosedError, DbUnansweredError } from '../errors';
import type { Db, ListenHandlers, ListenOptions, Queryable } from './Db';
import { endingTx } from './endedTx';
import { listenOnOwnConnection } from './pgListener';

/** Options of a Db on a PostgreSQL server. */
export interface PgDbOptions {
  /** `postgres://user@host:port/db`; or give `pool`. */
  connectionString?: string;
  /** Pool size (default 10; a worker uses at most claim + finalizer + heartbeat + recovery at once). */
  max?: number;
  /** Bring your own pool (it is ended by close() only if `ownsPool`). */
  pool?: Pool;
  ownsPool?: boolean;
  /**
   * Where LISTEN connections go (default: where the pool's do): PostgreSQL itself, or a pooler in
   * session mode, when `connectionString` is a pooler in transaction mode, which does not deliver
   * NOTIFY (docs/operating.md, "Behind PgBouncer").
   */
  listenConnectionString?: string;
}

/** Runs `fn` in a transaction on `client`, a pool's client, and releases it (destroyed when it broke). */
async function inTransaction<T>(client: PoolClient, fn: (tx: Queryable) => Promise<T>): Promise<T> {
  let broken = false;
  // A checked-out client has no pool listener: its connection's loss must fail the call, not the process.
  const onError = () => undefined;
  client.on('error', onError);
  const { tx, end } = endingTx(client);
  try {
    await client.query('begin');
    let value: T;
    try {
      value = await fn(tx);
    } finally {
      end(); // before the commit: a statement sent after it would run outside the transaction
    }
    await client.query('commit');
    return value;
  } catch (err) {
    try {
      await client.query('rollback');
    } catch {
      broken = true;
    }
    throw err;
  } finally {
    end();
    client.release(broken);
    client.removeListener('error', onError);
  }
}

/**
 * Refuses a connection string that `pg` (pg-connection-string) would read as a URL relative to
 * `postgres://base`: it then dialled a host named "base" ("getaddrinfo ENOTFOUND base" for
 * `DATABASE_URL=not-a-url`), or took most of a string whose `//` was forgotten for a database
 * name (`postgres:pw@host/db` connected to database "pw@host/db" and printed it), or a query
 * alone (`?sslmode=disable` dialled "base" too); test/cli.test.ts, "`acta job <id>` prints the
 * job as JSON". Accepted: `scheme://…`,
 * `socket:…`, a socket path (`/folder [database]`), and '' (pg then uses the PG* environment
 * variables). The value is not echoed:
 * it may hold a password. Throws ConfigError.
 */
function checkConnectionString(value: string | undefined, names = 'DATABASE_URL, connect({ url }) or connectionString'): void {
  if (value === undefined || value === '' || /^\/(?!\/)/.test(value) || /^([a-z][a-z0-9+.-]*:\/\/|socket:)/i.test(value)) return;
  throw new ConfigError(`the connection string (${names}) is not a URL: expected postgres://user:password@host:port/database (through a socket folder: postgres://user@/database?host=/var/run/postgresql)`);
}

/**
 * A pool's client that ends its connection when its connect fails. pg leaves the socket of a login
 * it failed itself (a SCRAM server asking for a password the connection string lacks) open, and
 * pg-pool drops the client without ending it: the process then stayed alive until the server gave
 * up on the login (authentication_timeout, 60 s), after the CLI had printed the error
 * (test/faults/noPassword.test.ts). That failure is said plainly, with pg's message after.
 */
class EndedOnFailedConnect extends Client {
  /**
   * A connect not answered within `connectionTimeoutMillis` (set here, not on the pool, whose
   * option would also bound the wait for a free client) fails with pg's "Connection terminated
   * due to connection timeout", a transient error; without it a server that takes the TCP
   * connection and never answers (stopped, overloaded, a silent network) held a CLI command, and
   * `acta worker` after its start timeout, for good (test/faults/unresponsive.test.ts). The
   * pool's options are copied with their descriptors: pg-pool keeps the password non-enumerable.
   */
  constructor(config?: PoolConfig & { connects?: { pending: number } }) {
    const own = Object.defineProperties({}, Object.getOwnPropertyDescriptors(config ?? {})) as PoolConfig;
    if (own.connectionTimeoutMillis === undefined) own.connectionTimeoutMillis = connectTimeoutMs(own.connectionString);
    super(own);
    this.timeoutMs = own.connectionTimeoutMillis;
    this.connects = config?.connects;
  }

  private readonly timeoutMs: number;
  /** Its Db's count of connects not answered yet (DB_WAITING). */
  private readonly connects: { pending: number } | undefined;

  override connect(): Promise<Client>;
  override connect(callback: (err: Error | null, client?: Client) => void): void;
  override connect(callback?: (err: Error | null, client?: Client) => void): Promise<Client> | void {
    if (!callback) return new Promise<Client>((resolve, reject) => this.connect((err) => (err ? reject(err) : resolve(this))));
    const connects = this.connects;
    if (connects) connects.pending++;
    super.connect((err: Error | null) => {
      if (connects) connects.pending--;
      if (err) this.end().catch(() => undefined);
      callback(clearer(err, this, this.timeoutMs), this);
    });
  }
}

/** How long a connect may take when the connection string says nothing (`connect_timeout`): 10 s. */
export const CONNECT_TIMEOUT_MS = 10_000;

/**
 * The connect timeout of `connectionString`, ms: its `connect_timeout` parameter in seconds, as
 * libpq reads it (0 or less: no limit), else CONNECT_TIMEOUT_MS. A value that is not a number is
 * refused (ConfigError) rather than read as no limit.
 */
export function connectTimeoutMs(connectionString: string | undefined): number {
  const m = connectionString === undefined ? null : /[?&]connect_timeout=([^&#]*)/i.exec(connectionString);
  if (!m) return CONNECT_TIMEOUT_MS;
  const seconds = Number(decodeURIComponent(m[1]));
  if (m[1] === '' || !Number.isFinite(seconds)) throw new ConfigError(`connect_timeout in the connection string is a number of seconds (0: no limit), got "${decodeURIComponent(m[1])}"`);
  return seconds <= 0 ? 0 : Math.round(seconds * 1000);
}

/** pg's own words when a server asks for a password and it has none (SCRAM: pg's lib/crypto/sasl.js). */
const NO_PASSWORD = /client password must be a (non-empty )?string/;

/**
 * A connect's failure in plain words where pg's are cryptic or leave the fix out (a missing password,
 * the connect timeout, a database the server does not have), pg's error as the cause. The missing
 * database keeps its SQLSTATE (3D000: not transient, so `acta worker` stops at once, not at its start
 * timeout; a name the server lacks does not come by waiting) and names the server and the fix
 * (test/faults/noDatabase.test.ts).
 */
function clearer(err: Error | null, client: { user?: string; host?: string; port?: number; database?: string }, timeoutMs: number): Error | null {
  if (err && NO_PASSWORD.test(err.message)) return new Error(`the server asks user ${client.user} for a password, and none was given (in the connection string, PGPASSWORD or ~/.pgpass): ${err.message}`, { cause: err });
  if (err && (err as { code?: unknown }).code === '3D000') {
    const name = client.database ?? '';
    const quoted = /^[a-z_][a-z0-9_]*$/.test(name) ? name : `'${name.replace(/'/g, "'\\''")}'`;
    return Object.assign(
      new Error(`database "${name}" does not exist on the server at ${client.host}:${client.port}: create it (createdb ${quoted}, or CREATE DATABASE), then run acta migrate; or correct the database name in the connection string (DATABASE_URL)`, { cause: err }),
      { code: '3D000' },
    );
  }
  if (err?.message === 'timeout expired') return new Error(`the server did not answer the connect within ${timeoutMs} ms (connect_timeout in the connection string sets it): timeout expired`, { cause: err });
  return err;
}

/**
 * A Db on a PostgreSQL server through `pg.Pool` (TCP keepalive on); LISTEN on a connection of
 * its own that is probed, never gives up reconnecting, and calls `onConnect` once LISTEN is in
 * effect after every (re)connect, for a catch-up claim (pgListener.ts). Throws ConfigError for a
 * connection string that is not a URL (checkConnectionString).
 */
/** The largest pool `max` accepted (far above what a server's max_connections allows). */
export const MAX_POOL_SIZE = 10_000;

export function createPgDb(options: PgDbOptions): Db {
  // Called bare or with a string it failed as a TypeError, or with a number as a raw 28000; an
  // unknown key (a misspelt `connectionstring`) was ignored and the pool went to PG* defaults.
  if (options === null || typeof options !== 'object' || Array.isArray(options)) throw new ConfigError(`createPgDb takes options: { connectionString } or { pool } (connect({ url }) takes a URL), got ${options === undefined ? 'nothing' : options === null ? 'null' : typeof options}`);
  knownKeys('createPgDb option', options, ['connectionString', 'max', 'pool', 'ownsPool', 'listenConnectionString']);
  // pg's pool with max below 1 never hands out a connection: every statement waited for good.
  if (options.max !== undefined) intOption('max', options.max, 1, MAX_POOL_SIZE);
  checkConnectionString(options.connectionString);
  connectTimeoutMs(options.connectionString); // a bad connect_timeout is refused here, before any connect
  checkConnectionString(options.listenConnectionString, 'ACTA_LISTEN_URL, connect({ listenUrl }) or listenConnectionString');
  connectTimeoutMs(options.listenConnectionString);
  // Keepalive probes from KEEPALIVE_IDLE_MS of silence on (the OS default waits 2 hours): on a real
  // network a pooled connection whose path died is then found by the kernel. A query already sent
  // is bounded only by a deadline (withDeadline below).
  const connects = { pending: 0 };
  const poolConfig: PoolConfig & { connects: typeof connects } = { connectionString: options.connectionString, max: options.max ?? 10, keepAlive: true, keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS, Client: EndedOnFailedConnect, connects };
  const pool = options.pool ?? new Pool(poolConfig);
  const ownsPool = options.pool ? options.ownsPool === true : true;
  // An idle client that loses its connection emits 'error' on the pool; without a listener that
  // would crash the process. The next query on the pool reconnects.
  pool.on('error', () => undefined);
  /** Open LISTENs, with their handlers (close tells each). */
  const listeners = new Map<() => Promise<void>, ListenHandlers>();
  /** Set by close(): from then on every call rejects with DbClosedError. */
  let closed: Promise<void> | undefined;
  /** A call on an open Db; one that fails because close() came meanwhile fails with DbClosedError. */
  const guarded = async <T>(call: () => Promise<T>): Promise<T> => {
    if (closed) throw new DbClosedError();
    try {
      return await call();
    } catch (err) {
      throw closed ? new DbClosedError({ cause: err }) : err;
    }
  };
  // Db.prepared: a named statement, parsed and planned once per connection, not at every call of
  // the worker's hot statements (docs/decisions/2026-12-01-prepared-statements.md). Three errors
  // leave a connection's statement unusable; all come at Parse or Bind, before anything ran, so
  // the call is repeated once unnamed (pool.query has already closed that connection). 26000, the
  // statement is gone, and 42P05, another client's statement of that name is there: a pooler in
  // transaction mode that does not track prepared statements (PgBouncer before 1.21, or with
  // max_prepared_statements = 0) gave the call another server connection (or DISCARD ALL ran);
  // after either, this Db names nothing. And 0A000 "cached plan must not change result type": a
  // newer acta replaced the function with another result type during a rolling upgrade; the next
  // connection prepares it anew (test/db/prepared.test.ts). Each is prepared under wireName.
  let named = true;
  /** One statement on a pool's client, within `deadlineMs` when given (Db.CallOptions). */
  const statement = <R>(config: string | { name: string; text: string; values: unknown[] }, params: unknown[] | undefined, deadlineMs: number | undefined): Promise<R> =>
    deadlineMs === undefined ? (pool.query(config as never, params as never) as Promise<R>) : onClientWithin(pool, deadlineMs, (client) => client.query(config as never, params as never) as Promise<R>, true);
  const prepared = async <R>(name: string, text: string, params: unknown[], deadlineMs?: number): Promise<{ rows: R[] }> => {
    if (named) {
      try {
        return await statement<{ rows: R[] }>({ name: wireName(name, text), text, values: params }, undefined, deadlineMs);
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        if (code !== '26000' && code !== '42P05' && code !== '0A000') throw err;
        if (code !== '0A000') named = false;
      }
    }
    return statement<{ rows: R[] }>(text, params, deadlineMs);
  };
  const db: Db = {
    kind: 'postgres',
    // Text of several statements (no parameters: the simple protocol) comes back from node-postgres
    // as an array of results; the Db contract, as on PGlite, is the last statement's rows
    // (test/cli.test.ts, "`acta sql` prints each row as a JSON line").
    query: (text, params, call) =>
      guarded(async () => {
        const result = await statement<unknown>(text, params as unknown[], call?.deadlineMs);
        return (Array.isArray(result) ? result[result.length - 1] : result) as never;
      }),
    prepared: (name, text, params, call) => guarded(() => prepared(name, text, params, call?.deadlineMs)),
    transaction: (fn, call) =>
      guarded(() =>
        call?.deadlineMs === undefined ? pool.connect().then((client) => inTransaction(client, fn)) : onClientWithin(pool, call.deadlineMs, (client) => inTransaction(client, fn), false),
      ),
    async listen(channel: string, handlers: ListenHandlers, listenOptions?: ListenOptions) {
      if (closed) throw new DbClosedError();
      // The pool's own settings when it was given: it may have been built from fields (host,
      // database, ...) rather than a connection string. pg-pool keeps the password as a
      // non-enumerable property, which a spread leaves out (test/db/wakeups.test.ts).
      const poolOptions = (pool as unknown as { options: PoolConfig }).options;
      const connectionString = options.listenConnectionString ?? options.connectionString;
      const config = connectionString !== undefined ? { connectionString } : { ...poolOptions, password: poolOptions.password };
      // Delivery is checked through the pool (pgListener.ts): behind a pooler, or whenever LISTEN
      // has a connection string of its own.
      const delivery = { notify: (check: string) => pool.query('select pg_notify($1, $2)', [check, '']), always: options.listenConnectionString !== undefined };
      const stop = await listenOnOwnConnection(config, channel, handlers, listenOptions, delivery);
      if (closed) {
        // Closed while the first attempt ran: its connection must not go on reconnecting.
        await stop();
        throw new DbClosedError();
      }
      listeners.set(stop, handlers);
      return async () => {
        if (listeners.delete(stop)) await stop();
      };
    },
    close() {
      closed ??= (async () => {
        const open = [...listeners];
        listeners.clear();
        await Promise.all(open.map(([stop]) => stop().catch(() => undefined)));
        for (const [, handlers] of open) {
          try {
            handlers.onClosed?.();
          } catch {
            /* a listener's own error: the close goes on */
          }
        }
        if (ownsPool) await pool.end();
      })();
      return closed;
    },
  };
  // DB_WAITING: on the Db's own pool only (a given pool's connects are not counted).
  if (!options.pool) {
    const limitMs = connectTimeoutMs(options.connectionString);
    (db as { [DB_WAITING]?: () => string | undefined })[DB_WAITING] = () => {
      if (connects.pending > 0) {
        return `the connect had no answer in that time; it fails only ${limitMs > 0 ? `at connect_timeout, ${limitMs} ms here, set in the connection string` : 'never: connect_timeout=0 in the connection string'}`;
      }
      if (pool.totalCount > pool.idleCount) return 'the server took the connection but did not answer its statement in that time';
      return undefined;
    };
  }
  return db;
}

/**
 * The key of a server Db's own account of what its calls wait on now (a connect not answered yet, a
 * statement sent and not answered), or undefined: for a message when a caller stops waiting before
 * any error came (a worker's start timeout below connect_timeout: StartTimeoutError,
 * test/faults/unresponsive.test.ts). A spread wrapper copies it; the worker asks the Db it was given.
 */
export const DB_WAITING = Symbol('acta.dbWaiting');

/** What `db`'s calls wait on now, in words (DB_WAITING), or undefined when it cannot say. */
export function dbWaiting(db: unknown): string | undefined {
  const waiting = db !== null && typeof db === 'object' ? (db as { [DB_WAITING]?: unknown })[DB_WAITING] : undefined;
  return typeof waiting === 'function' ? (waiting as () => string | undefined)() : undefined;
}

/** wireName's last answer per name (a name comes with one text: Db.prepared). */
const wireNames = new Map<string, { text: string; wire: string }>();

/**
 * The name a statement of Db.prepared is prepared under: `name`, then 8 hex digits of its text's
 * SHA-1. Behind a pooler in transaction mode that does not track prepared statements, a call that
 * sends only Bind can land on a server connection where another client prepared the same name: an
 * acta version whose text under that name differs (a rolling upgrade; the completion batch once
 * gained a parameter) then ran its text with this call's arguments. Under the digest the name is
 * missing there instead (26000): repeated unnamed (test/db/prepared.test.ts, "another text").
 */
export function wireName(name: string, text: string): string {
  const known = wireNames.get(name);
  if (known?.text === text) return known.wire;
  const wire = `${name}_${createHash('sha1').update(text).digest('hex').slice(0, 8)}`;
  wireNames.set(name, { text, wire });
  return wire;
}

/** Keepalive probes of the pool's connections start after this much silence, ms. */
const KEEPALIVE_IDLE_MS = 10_000;

/**
 * `fn` on a client of `pool`, answered within `ms` of the call, or a DbUnansweredError then. A
 * silent network (a NAT that dropped the flow, a cable pulled) neither answers nor closes a
 * connection, and nothing else bounds a query: the connection whose answer is late is destroyed
 * (its query fails, and the pool replaces it), so no call waits, and no pool connection stays
 * stuck, past the deadline (test/faults/partition.test.ts). A statement the server ran may have
 * committed all the same: the caller treats the error as a lost answer (transient). The verdict
 * waits one turn of the event loop past the timer, so an answer already read off the socket while
 * the process was busy is not taken for silence. The wait for a client counts too: one that comes
 * after the deadline goes back unused. How the client goes back after `fn` failed:
 * destroyed (`releaseHere`, as pool.query does), or as `fn` released it (inTransaction does).
 */
function onClientWithin<T>(pool: Pool, ms: number, fn: (client: PoolClient) => Promise<T>, releaseHere: boolean): Promise<T> {
  const waitMs = timerDelay(ms);
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    let client: PoolClient | undefined;
    const timer = setTimeout(
      () =>
        setImmediate(() => {
          if (settled) return;
          settled = true;
          // The backend's pid lets a caller ask the server whether it still runs the statement (src/db/backendProbe.ts).
          const backendPid = (client as { processID?: number | null } | undefined)?.processID ?? undefined;
          reject(new DbUnansweredError(ms, undefined, { backendPid }));
          if (client) destroyConnection(client);
        }),
      waitMs,
    );
    const settle = (ok: boolean, value: unknown) => {
      clearTimeout(timer);
      if (settled) return;
      settled = true;
      if (ok) resolve(value as T);
      else reject(value);
    };
    pool.connect().then(
      (c) => {
        if (settled) return c.release();
        client = c;
        // A checked-out client has no pool listener: its destroyed connection fails the call, not the process.
        const onError = () => undefined;
        c.on('error', onError);
        fn(c).then(
          (value) => {
            if (releaseHere) c.release();
            c.removeListener('error', onError);
            settle(true, value);
          },
          (err: unknown) => {
            if (releaseHere) c.release(err instanceof Error ? err : true);
            c.removeListener('error', onError);
            settle(false, err);
          },
        );
      },
      (err: unknown) => settle(false, err),
    );
  });
}

/** Destroys a client's socket without waiting on its server: its query in flight fails at once. */
function destroyConnection(client: PoolClient): void {
  (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
}
