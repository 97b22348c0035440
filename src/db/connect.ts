import * as path from 'node:path';
import { intOption, knownKeys, timerDelay } from '../config';
import { ConfigError, DataDirLockedError, DbClosedError, DbUnansweredError, type EmbeddedHolder, EmbeddedShareClosedError } from '../errors';
import type { CallOptions, Db, ListenHandlers, ListenOptions } from './Db';
import { connectShared, EMBEDDED_HOLDER, embeddedHolder, type HolderAware } from './connectShared';
import { socketPathFor } from './embeddedShare';
import { createPgDb, MAX_POOL_SIZE } from './pgDb';
import { DEFAULT_PROBE_TIMEOUT_MS } from './pgListener';
import { isAlive, LOCK_NAME, readLock, unsharedPath } from './dataDirLock';
import { LOCK_FILE, UNSHARED_MARK } from './sideFiles';
import { createPgliteDb } from './pgliteDb';

/** Where the embedded default keeps its data when nothing else is said: `./.acta/data`. */
export const DEFAULT_DATA_DIR = path.join('.acta', 'data');

/**
 * Which database a process was pointed at, most explicit first: `options.url`, then
 * `options.dataDir` (an explicit folder is the embedded default even when DATABASE_URL is set),
 * then `DATABASE_URL`, then `ACTA_DATA_DIR`, then `./.acta/data`.
 */
const absolute = (dataDir: string) => (dataDir.startsWith('memory://') ? dataDir : path.resolve(dataDir));

function resolveTarget(options: { url?: string; dataDir?: string }): { url: string } | { dataDir: string } {
  if (options.url) return { url: options.url };
  // Resolved once, here: a later process.chdir() must not make a reopen (followHolder) or the lock's
  // release look at another folder.
  if (options.dataDir) return { dataDir: absolute(options.dataDir) };
  if (process.env.DATABASE_URL) return { url: process.env.DATABASE_URL };
  return { dataDir: absolute(process.env.ACTA_DATA_DIR || DEFAULT_DATA_DIR) };
}

/** The keys of connect's options: any other is refused. */
const CONNECT_OPTION_KEYS = ['url', 'dataDir', 'max', 'listenUrl'];

/**
 * Opens the database a process was pointed at (see resolveTarget: `url`, else `dataDir`, else
 * `DATABASE_URL` selects a PostgreSQL server, else the embedded PGlite default in
 * `ACTA_DATA_DIR` or `./.acta/data`). A data folder another live process holds is used through
 * the socket that process serves it on (embeddedShare.ts); DataDirLockedError only when it does not
 * serve it. On a server, LISTEN connections go to `listenUrl`, or with `DATABASE_URL` to
 * `ACTA_LISTEN_URL` when set (PgDbOptions.listenConnectionString). Throws ConfigError for an
 * unknown option, and for `listenUrl` without a server.
 */
export async function connect(options: { url?: string; dataDir?: string; max?: number; listenUrl?: string } = {}): Promise<Db> {
  // A misspelt option (`uri`), or the URL given bare, would otherwise be ignored: the process would
  // connect to DATABASE_URL or the embedded default instead (test/connectOptions.spec.ts).
  if (options === null) options = {};
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw new ConfigError(`connect takes options { url?, dataDir?, max?, listenUrl? }${typeof options === 'string' ? ': give a connection string as connect({ url })' : ''}, got ${typeof options === 'string' ? 'a string' : String(options).slice(0, 80)}`);
  }
  knownKeys('connect option', options, CONNECT_OPTION_KEYS);
  // Given empty (an environment variable set empty), each opened the fallback as if left out: the
  // process wrote to DATABASE_URL's database or to an embedded one (test/connectOptions.spec.ts).
  if (options.url === '') throw new ConfigError("connect's url is empty: give a connection string (postgres://...), or leave url out for DATABASE_URL (else the embedded database)");
  if (options.dataDir === '') throw new ConfigError("connect's dataDir is empty: give a folder, or leave dataDir out for DATABASE_URL (else ACTA_DATA_DIR, else ./.acta/data)");
  if (options.max !== undefined) intOption('max', options.max, 1, MAX_POOL_SIZE);
  const target = resolveTarget(options);
  if ('url' in target) {
    // ACTA_LISTEN_URL pairs with DATABASE_URL: a url given in code takes its listenUrl in code too.
    const listenUrl = options.listenUrl ?? (options.url ? undefined : process.env.ACTA_LISTEN_URL || undefined);
    return createPgDb({ connectionString: target.url, max: options.max, listenConnectionString: listenUrl });
  }
  if (options.listenUrl !== undefined) throw new ConfigError(`connect's listenUrl is for a PostgreSQL server's LISTEN connections; this opens PGlite at ${target.dataDir} (give url, or DATABASE_URL, as well)`);
  let lost = () => undefined as void;
  const first = await openEmbedded(target.dataDir, () => lost());
  if (!first.shared) return first.db;
  const following = followHolder(target.dataDir, first.db);
  lost = following.lost;
  return following.db;
}

/** How long a process whose holder went away tries to find the folder's next holder (or to open it). */
const FOLLOW_TRIES = 30;
const FOLLOW_PAUSE_MS = 100;
/**
 * How long a process waits for the socket of a live holder that has just taken the folder: PGlite
 * starting, which takes 6-15 s for a new folder on 2 cores (test/embeddedShare.test.ts).
 */
const SOCKET_WAIT_MS = 20_000;
const pause = () => new Promise((r) => setTimeout(r, FOLLOW_PAUSE_MS));

/**
 * The folder opened by this process (which then serves it), else the database the live process
 * holding it serves on its socket (embeddedShare.ts), waited for while that process starts;
 * DataDirLockedError when it does not serve it. `onHolder` hears of that process as soon as its
 * lock names it, before its socket answers.
 */
async function openEmbedded(dataDir: string, onLost: () => void, onHolder?: (holder: EmbeddedHolder) => void): Promise<{ db: Db; shared: boolean }> {
  try {
    return { db: await createPgliteDb({ dataDir }), shared: false };
  } catch (err) {
    if (!(err instanceof DataDirLockedError) || err.pid <= 0 || (err.pid === process.pid && !err.elsewhere)) throw err;
    const holder: EmbeddedHolder = { socketPath: socketPathFor(dataDir), pid: err.elsewhere ? undefined : err.pid };
    onHolder?.(holder);
    const deadline = Date.now() + SOCKET_WAIT_MS;
    for (;;) {
      const shared = await connectShared(holder.socketPath, { onLost, holderPid: holder.pid }).catch(() => undefined);
      if (shared) return { db: shared, shared: true };
      // The holder died before serving (killed while PGlite started): its lock is stale, the folder
      // free. (A holder of another pid namespace is not seen here by its pid: its socket is waited for.)
      if (!err.elsewhere && !isAlive(err.pid)) return openEmbedded(dataDir, onLost, onHolder);
      // The holder does not serve it: no socket will come.
      if (readLock(unsharedPath(dataDir), UNSHARED_MARK) === String(err.pid)) throw new DataDirLockedError(dataDir, err.pid, true, err.elsewhere);
      await pause();
      // It closed the folder and lives on (a program after db.close()): the folder is free, or another's.
      if (readLock(path.join(dataDir, LOCK_NAME), LOCK_FILE) !== String(err.pid)) return openEmbedded(dataDir, onLost, onHolder);
      if (Date.now() >= deadline) throw err;
    }
  }
}

/** A LISTEN a followHolder Db keeps: done again on each new holder, and on one that did not answer it. */
interface Listening {
  channel: string;
  handlers: ListenHandlers;
  options?: ListenOptions;
  /** The attempt on a Db, the one under way or the one that took: one per Db. */
  attempt?: { on: Db; done: Promise<void> };
  unlisten?: () => Promise<void>;
  /** onDown was said, and onConnect not since. */
  down?: boolean;
  retry?: NodeJS.Timeout;
}

/** A LISTEN attempt's failure that the LISTEN outlives: the holder did not answer it, or went away (then the next holder's reopen listens). */
const keepsTrying = (err: unknown): err is Error => err instanceof DbUnansweredError || err instanceof EmbeddedShareClosedError;

/**
 * A Db on the embedded database served by another process, that outlives that process
 * (docs/operating.md, "Which database"). When the holder goes away, the calls in flight reject
 * with EmbeddedShareClosedError (transient: src/db/transient.ts; a statement in flight may have
 * run, so it is not repeated here) but those it said it did not take (`notTaken`: it closed
 * cleanly), which are sent again to the next holder; the next call, or at once an open LISTEN, opens the folder
 * again: this process takes it (and serves it) if it is free, else uses the new holder's socket.
 * Open LISTENs hear onDown, then onConnect once listening again; calls do not wait for them.
 * A call's deadline (CallOptions) holds for the whole call, that reopening included: a stopped
 * holder fails it with DbUnansweredError then (test/faults/embeddedHolder.test.ts). So does a
 * LISTEN's, ListenOptions.probeTimeoutMs (default 5 s): past it, listen() resolves, its handlers
 * hear onDown with that DbUnansweredError, and it is tried again until it takes (onConnect), as a
 * server's LISTEN connection reconnects (Db.listen).
 */
function followHolder(dataDir: string, first: Db): { db: Db; lost: () => void } {
  let current: Db | undefined = first;
  /** While none is current: the folder's next holder, once its lock named it (openEmbedded). */
  let next: EmbeddedHolder | undefined;
  let closed = false;
  let reopening: Promise<Db> | undefined;
  const listens = new Set<Listening>();
  /**
   * The holder as this Db's messages name it (EMBEDDED_HOLDER, and a deadline passed while it looks
   * for one): the current one; between holders the next one, its pid once its lock names it; none
   * once this process took the folder.
   */
  const holderNow = (): EmbeddedHolder | undefined => (current === undefined ? (next ?? { socketPath: socketPathFor(dataDir) }) : embeddedHolder(current));

  /** Says onDown once per loss (test/faults/embeddedHolder.test.ts, "a follower worker's LISTEN"). */
  const down = (entry: Listening, err: Error) => {
    if (entry.down || !listens.has(entry)) return;
    entry.down = true;
    entry.handlers.onDown?.(err);
  };
  /**
   * LISTEN for `entry` on `on`, within `deadlineMs` (else its own probeTimeoutMs); an attempt under
   * way there is not made twice. One `on` did not answer is made again while `on` is the holder.
   */
  const listenOn = (on: Db, entry: Listening, deadlineMs?: number): Promise<void> => {
    if (entry.attempt?.on === on) return entry.attempt.done;
    const attempt = { on } as { on: Db; done: Promise<void> };
    attempt.done = (async () => {
      try {
        const options = deadlineMs === undefined ? entry.options : { ...entry.options, probeTimeoutMs: deadlineMs };
        const handlers: ListenHandlers = {
          ...entry.handlers,
          onConnect: () => {
            entry.down = false;
            entry.handlers.onConnect?.();
          },
          onDown: (err) => down(entry, err),
          onClosed: undefined,
        };
        const unlisten = await on.listen(entry.channel, handlers, options);
        if (listens.has(entry)) entry.unlisten = unlisten;
        else await unlisten().catch(() => undefined); // ended meanwhile
      } catch (err) {
        if (entry.attempt === attempt) entry.attempt = undefined;
        if (err instanceof DbUnansweredError && listens.has(entry)) {
          entry.retry = setTimeout(() => {
            if (listens.has(entry) && current === on) void listenOn(on, entry).catch((e: unknown) => keepsTrying(e) && down(entry, e));
          }, FOLLOW_PAUSE_MS);
        }
        throw err;
      }
    })();
    entry.attempt = attempt;
    return attempt.done;
  };
  const reopen = (): Promise<Db> =>
    (reopening ??= (async () => {
      for (let i = 1; ; i++) {
        if (closed) throw new DbClosedError();
        try {
          next = undefined;
          const opened = await openEmbedded(dataDir, lost, (holder) => (next = holder));
          if (closed) {
            await opened.db.close();
            throw new DbClosedError();
          }
          current = opened.db;
          next = undefined;
          // Not awaited: a LISTEN that hangs (a stopped holder) must not hold the calls waiting here.
          for (const entry of listens) void listenOn(opened.db, entry).catch((err: unknown) => keepsTrying(err) && down(entry, err));
          return opened.db;
        } catch (err) {
          if (closed || i >= FOLLOW_TRIES) throw err instanceof DbClosedError ? err : new EmbeddedShareClosedError(socketPathFor(dataDir), { cause: err });
          await pause();
        }
      }
    })().finally(() => (reopening = undefined)));
  /** The holder went away: the next call reopens; an open LISTEN reopens now. */
  function lost(): void {
    current = undefined;
    if (listens.size > 0) void reopen().catch(() => undefined);
  }
  const use = async (): Promise<Db> => {
    if (closed) throw new DbClosedError();
    return current ?? (await reopen());
  };
  /**
   * `fn` on the Db in use, within the call's deadline from now (reopening included), on that Db with
   * what is left of it; sent again to the next Db while a holder closing cleanly says it did not
   * take it (test/faults/embeddedHolder.test.ts, "a holder closing cleanly").
   */
  const within = async <T>(call: CallOptions | undefined, fn: (db: Db, call: CallOptions | undefined) => Promise<T>): Promise<T> => {
    const deadlineMs = call?.deadlineMs;
    const at = deadlineMs === undefined ? undefined : Date.now() + deadlineMs;
    for (let i = 1; ; i++) {
      try {
        if (deadlineMs === undefined || at === undefined) return await fn(await use(), call);
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new DbUnansweredError(deadlineMs, undefined, { holder: holderNow() ?? { socketPath: socketPathFor(dataDir) } })), timerDelay(at - Date.now()));
        });
        let db: Db;
        try {
          db = await Promise.race([use(), late]);
        } finally {
          clearTimeout(timer);
        }
        return await fn(db, { deadlineMs: Math.max(1, at - Date.now()) });
      } catch (err) {
        if (err instanceof EmbeddedShareClosedError && err.notTaken && !closed && i < FOLLOW_TRIES) continue;
        // Named by the deadline the caller gave, not by what was left of it.
        throw deadlineMs !== undefined && err instanceof DbUnansweredError && err.deadlineMs !== deadlineMs ? new DbUnansweredError(deadlineMs, undefined, { cause: err, holder: err.holder }) : err;
      }
    }
  };

  const db: HolderAware = {
    kind: 'pglite',
    [EMBEDDED_HOLDER]: holderNow,
    query: ((text: string, params?: unknown[], call?: CallOptions) => within(call, (db, left) => db.query(text, params, left))) as Db['query'],
    transaction: (fn, call) => within(call, (db, left) => db.transaction(fn, left)),
    async listen(channel, handlers, options) {
      const entry: Listening = { channel, handlers, options };
      listens.add(entry);
      try {
        await within({ deadlineMs: options?.probeTimeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS }, (on, left) => listenOn(on, entry, left?.deadlineMs));
      } catch (err) {
        if (!keepsTrying(err) || !listens.has(entry)) {
          listens.delete(entry);
          throw err;
        }
        down(entry, err); // and it is tried again (listenOn, reopen)
      }
      return async () => {
        listens.delete(entry);
        clearTimeout(entry.retry);
        await entry.unlisten?.().catch(() => undefined);
      };
    },
    async close() {
      if (closed) return;
      closed = true;
      for (const entry of listens) {
        clearTimeout(entry.retry);
        entry.handlers.onClosed?.();
      }
      listens.clear();
      await reopening?.catch(() => undefined);
      await current?.close();
    },
  };
  return { db, lost };
}

/** A short description of where a Db keeps its data, for logs (no password). */
export function describeTarget(options: { url?: string; dataDir?: string } = {}): string {
  const target = resolveTarget(options);
  if ('url' in target) return withoutPassword(target.url);
  return target.dataDir.startsWith('memory://') ? `PGlite in memory` : `PGlite at ${path.resolve(target.dataDir)}`;
}

/** `url` with its password masked: in the user info (up to its last '@', as pg reads it) and in a `password` parameter. */
export function withoutPassword(url: string): string {
  const m = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#]*)(.*)$/is.exec(url);
  if (!m) return '(a connection string that is not a URL)';
  let authority = m[2];
  const at = authority.lastIndexOf('@');
  const colon = authority.indexOf(':');
  if (at >= 0 && colon >= 0 && colon < at) authority = `${authority.slice(0, colon)}:***${authority.slice(at)}`;
  return m[1] + authority + m[3].replace(/([?&]password=)[^&#]*/gi, '$1***');
}
