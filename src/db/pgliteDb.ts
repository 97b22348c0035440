import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { PGliteInterface } from '@electric-sql/pglite';
import { DataDirUnusableError, DataDirVersionError, DbClosedError } from '../errors';
import { lockDataDir, markUnshared, readLock } from './dataDirLock';
import type { Db, ListenHandlers, Queryable } from './Db';
import { endingTx } from './endedTx';
import { type EmbeddedShare, shareDb, socketPathFor } from './embeddedShare';
import { removeSideFile, SHARE_SOCKET } from './sideFiles';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { prepareValue } = require('pg/lib/utils') as { prepareValue: (value: unknown) => unknown };

/** Options of the embedded default. */
export interface PgliteDbOptions {
  /** Data folder (created if missing), or `memory://` for a throwaway in-memory database. */
  dataDir: string;
  /**
   * Serve the database to other local processes of this user on a Unix socket beside the folder
   * (embeddedShare.ts), which `connect()` in those processes finds and uses. Default true for a
   * data folder; an in-memory database is never shared.
   */
  share?: boolean;
}

/**
 * The PostgreSQL major version of the PGlite acta depends on: 18 in @electric-sql/pglite 0.5 (19 in
 * 0.6: docs/decisions/2026-12-06-pglite-0-6-not-taken.md). Change it with that dependency;
 * test/pglite.test.ts ("EMBEDDED_PG_MAJOR is the major version PGlite runs") fails until it matches.
 */
export const EMBEDDED_PG_MAJOR = 18;

/**
 * Refuses a data folder made by a PGlite of another PostgreSQL major version (its PG_VERSION file)
 * with DataDirVersionError, before PGlite opens it: PostgreSQL cannot open it, and PGlite says only
 * "PGlite failed to initialize properly" (seen with PGlite 0.6.1, PostgreSQL 19, on a folder of 0.5.17, and the other way). A folder without
 * PG_VERSION is new (or empty): PGlite runs initdb there. Held by test/pglite.test.ts, "a data
 * folder of another PostgreSQL major version".
 */
export function checkDataDirVersion(dataDir: string): void {
  const found = readLock(path.join(dataDir, 'PG_VERSION'), "the database's PostgreSQL version (PG_VERSION)")?.trim();
  if (found !== undefined && found !== String(EMBEDDED_PG_MAJOR)) throw new DataDirVersionError(dataDir, found, EMBEDDED_PG_MAJOR);
}

/** int8 and int8[] as decimal strings, as node-postgres returns them (job ids are bigint). */
const INT8 = 20;
const INT8_ARRAY = 1016;

/**
 * Parameters exactly as node-postgres sends them: each value in its text form (pg's own
 * prepareValue: arrays as array literals, Dates as timestamps, objects as JSON) with type OID 0,
 * so the server infers each type from the statement. Passing raw values would let PGlite
 * serialize by type, and JSON text given for a jsonb parameter would be encoded twice.
 */
function asPgParams(params: unknown[] | undefined): { values: (string | null)[]; types: number[] } {
  const values = (params ?? []).map((p) => (p === null || p === undefined ? null : (prepareValue(p) as string | null)));
  return { values, types: values.map(() => 0) };
}

/**
 * The embedded default: PGlite (PostgreSQL in WASM, in-process), through PGlite's own query,
 * transaction and listen API, which serializes every use of its one session. (Its node-postgres
 * adapter was used first; after any failed query it answers later queries with other queries'
 * replies, so it is not used.) `onConnect` fires once: an in-process database never disconnects.
 */
export async function createPgliteDb(options: PgliteDbOptions): Promise<Db> {
  const inMemory = options.dataDir.startsWith('memory://');
  // Resolved once: the lock, its release and the socket name the folder as it was at the open.
  const dataDir = inMemory ? options.dataDir : path.resolve(options.dataDir);
  let unlock: () => void;
  try {
    unlock = inMemory ? () => undefined : lockDataDir(dataDir);
  } catch (err) {
    throw unusable(dataDir, err);
  }
  const release = () => {
    try {
      if (!inMemory) markUnshared(dataDir, false);
    } finally {
      unlock();
    }
  };
  try {
    if (!inMemory) {
      checkDataDirVersion(dataDir); // under the lock: no other acta runs initdb there meanwhile
      // A folder by the socket's name is refused before PGlite starts (seconds), not left to keep the folder unserved.
      const socketPath = socketPathFor(dataDir);
      if (options.share !== false && path.dirname(socketPath) === dataDir) removeSideFile(socketPath, SHARE_SOCKET);
      markUnshared(dataDir, options.share === false);
    }
    const { PGlite } = await import('@electric-sql/pglite');
    const pglite = await PGlite.create(dataDir);
    // One session, whose transactions run one at a time: no other snapshot can be held while a
    // claim runs, so a slow pick is the machine's, and the claim's resumed scan (claim_jobs.sql)
    // would only relax its order.
    await pglite.query(`select set_config('acta.claim_resume_after_ms', 'Infinity', false)`);
    // Claims commit synchronously here: no WAL writer flushes an asynchronous commit, so a SIGKILL
    // lost the claims this process had answered (claim_jobs.sql; test/pgliteClaimDurability.test.ts).
    await pglite.query(`select set_config('acta.claim_durable', 'on', false)`);
    const parsers = { [INT8]: (text: string) => text, [INT8_ARRAY]: (text: string) => parseTextArray(text) };
    const run = (q: Pick<PGliteInterface, 'query' | 'exec'>) =>
      async <R>(text: string, params?: unknown[]): Promise<{ rows: R[] }> => {
        if (!params || params.length === 0) {
          // Like node-postgres' simple protocol: text without parameters may hold several
          // statements (migrations); the rows are the last statement's.
          const results = await q.exec(text, { parsers });
          return { rows: (results[results.length - 1]?.rows ?? []) as R[] };
        }
        const { values, types } = asPgParams(params);
        const result = await q.query<R>(text, values, { paramTypes: types, parsers });
        return { rows: result.rows };
      };
    /** Set by close(): from then on every call rejects with DbClosedError. */
    let closed: Promise<void> | undefined;
    /** A call on an open instance; one that fails because close() came meanwhile fails with DbClosedError. */
    const guarded = async <T>(call: () => Promise<T>): Promise<T> => {
      if (closed) throw new DbClosedError();
      try {
        return await call();
      } catch (err) {
        throw closed ? new DbClosedError({ cause: err }) : err;
      }
    };
    const query = run(pglite);
    /** Open LISTENs, with their handlers (close tells each). */
    const listens = new Map<() => Promise<void>, ListenHandlers>();
    /**
     * LISTEN and UNLISTEN calls under way: close waits for them, else one would fail "PGlite is
     * closing" after close() returned, with nobody to hear it (test/pglite.test.ts,
     * "followers and close on PGlite, in a program of its own").
     */
    const calls = new Set<Promise<unknown>>();
    const tracked = <T>(call: Promise<T>): Promise<T> => {
      calls.add(call);
      const done = () => calls.delete(call);
      call.then(done, done);
      return call;
    };
    let share: EmbeddedShare | undefined;
    const db: Db = {
      kind: 'pglite',
      query: ((text: string, params?: unknown[]) => guarded(() => query(text, params))) as Db['query'],
      prepared: (_name, text, params) => guarded(() => query(text, params)),
      // A tx kept past its transaction is refused as on a server (endedTx.ts), not PGlite's plain "Transaction is closed".
      transaction: (fn) =>
        guarded(() =>
          pglite.transaction(async (tx) => {
            const { tx: ending, end } = endingTx({ query: run(tx) as Queryable['query'] });
            try {
              return await fn(ending);
            } finally {
              end();
            }
          }),
        ),
      async listen(channel: string, handlers: ListenHandlers) {
        const unlisten = await guarded(() => tracked(pglite.listen(channel, (payload) => handlers.onNotify(payload))));
        if (closed) throw new DbClosedError(); // closed while LISTEN ran: close() ends the instance
        listens.set(unlisten, handlers);
        handlers.onConnect?.();
        return async () => {
          // After close() there is nothing to UNLISTEN: the instance is gone.
          if (listens.delete(unlisten)) await tracked(unlisten());
        };
      },
      close() {
        closed ??= (async () => {
          await share?.close();
          const open = [...listens.values()];
          listens.clear();
          for (const handlers of open) {
            try {
              handlers.onClosed?.();
            } catch {
              /* a listener's own error: the close goes on */
            }
          }
          await Promise.allSettled([...calls]);
          await pglite.close();
          release();
        })();
        return closed;
      },
    };
    // Not served (a socket path that cannot be bound): this process still has the folder; others get DataDirLockedError.
    if (!inMemory && options.share !== false) {
      share = await shareDb(db, socketPathFor(dataDir)).catch(() => undefined);
      if (!share) markUnshared(dataDir, true);
    }
    return db;
  } catch (err) {
    try {
      release();
    } catch {
      /* the error to tell is the first */
    }
    throw inMemory ? err : unusable(dataDir, err);
  }
}

/** The file system's answers that say the folder cannot be used by this process, whatever it retries. */
const UNUSABLE_CODES = new Set(['EACCES', 'EPERM', 'EROFS', 'EEXIST', 'ENOTDIR']);

/**
 * A file system error of opening `dataDir` as a DataDirUnusableError that names the folder, what is
 * wrong and the fix; any other error as it is (test/pglite.test.ts, "a data folder this process
 * cannot use").
 */
export function unusable(dataDir: string, err: unknown): unknown {
  const e = err as NodeJS.ErrnoException;
  // Not `instanceof Error`: node's fs errors may come from another realm (a vm context, jest's).
  if (typeof err !== 'object' || err === null || typeof e.syscall !== 'string' || typeof e.code !== 'string' || !UNUSABLE_CODES.has(e.code)) return err;
  let problem: string;
  if (e.code === 'EEXIST' || e.code === 'ENOTDIR') {
    // Only a file on the folder's way is this problem; another EEXIST (a file of the folder's own) is not.
    const file = fileInTheWay(dataDir);
    if (file === null) return err;
    problem = file === dataDir ? 'it is a file, not a folder' : `${file} is a file, not a folder`;
  } else if (e.code === 'EROFS') {
    problem = 'it is on a read-only file system';
  } else {
    const folder = nearestExisting(path.dirname(String(e.path ?? path.join(dataDir, 'x'))));
    let owner = '';
    try {
      const st = fs.statSync(folder);
      owner = `, which is owned by uid ${st.uid} with mode ${(st.mode & 0o777).toString(8).padStart(3, '0')}`;
    } catch {
      /* unreadable too: the permission problem is said without it */
    }
    problem = `permission denied (${e.code}, ${e.syscall} ${e.path ?? dataDir}): ${whoAmI()} cannot create files in ${folder}${owner}`;
  }
  return new DataDirUnusableError(dataDir, e.code, problem, { cause: err });
}

/** The first file (not a folder) on the way to `dataDir`, `dataDir` included, the closest to the root first; null if none. */
function fileInTheWay(dataDir: string): string | null {
  const chain: string[] = [];
  for (let p = dataDir; ; p = path.dirname(p)) {
    chain.unshift(p);
    if (path.dirname(p) === p) break;
  }
  for (const p of chain) {
    try {
      if (!fs.statSync(p).isDirectory()) return p;
    } catch {
      break; // missing, or not readable: nothing further on the way can be a file we could tell
    }
  }
  return null;
}

/** `folder`, or its nearest ancestor that exists. */
function nearestExisting(folder: string): string {
  let p = folder;
  while (!fs.existsSync(p) && path.dirname(p) !== p) p = path.dirname(p);
  return p;
}

/** This process's user as a message names it: `user <name> (uid <n>)`, or `this process's user`. */
function whoAmI(): string {
  try {
    const { username, uid } = os.userInfo();
    return uid >= 0 ? `user ${username} (uid ${uid})` : `user ${username}`;
  } catch {
    return "this process's user";
  }
}

/** A one-dimensional PostgreSQL array literal of int8 (`{1,2,NULL}`) as strings. */
function parseTextArray(text: string): (string | null)[] {
  const inner = text.slice(1, -1);
  if (inner === '') return [];
  return inner.split(',').map((v) => (v === 'NULL' ? null : v));
}
