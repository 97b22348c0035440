import * as fs from 'node:fs';
import * as path from 'node:path';
import type { PGliteInterface } from '@electric-sql/pglite';
import { DataDirLockedError } from '../errors';
import type { Db, ListenHandlers, Queryable } from './Db';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { prepareValue } = require('pg/lib/utils') as { prepareValue: (value: unknown) => unknown };

/** Options of the embedded default. */
export interface PgliteDbOptions {
  /** Data folder (created if missing), or `memory://` for a throwaway in-memory database. */
  dataDir: string;
}

/**
 * Takes `<dataDir>/acta.lock` for this process: two processes on one PGlite data folder silently
 * corrupt it (shared/TOOLCHAIN.md). A lock left by a dead process is taken over. Returns the
 * release function. Throws DataDirLockedError if a live process holds it.
 *
 * The lock appears with its pid already in it (written to a file of this process's own, then
 * hard-linked to the lock's name, which fails if the name exists): a lock created empty and filled
 * afterwards could be read empty in between, taken for stale and removed under its live holder
 * (found by a race of 8 starters: two held the folder in 20 of 30 rounds). A stale lock is moved
 * aside by rename (atomic: one taker wins) and removed only if it is still the one judged stale.
 */
export function lockDataDir(dataDir: string): () => void {
  fs.mkdirSync(dataDir, { recursive: true });
  const lockPath = path.join(dataDir, 'acta.lock');
  const mine = `${lockPath}.${process.pid}`;
  fs.writeFileSync(mine, String(process.pid));
  try {
    for (let tries = 0; tries < 10; tries++) {
      try {
        fs.linkSync(mine, lockPath);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        const holder = readLock(lockPath);
        if (holder === undefined) continue; // released meanwhile: try again
        const pid = Number(holder);
        if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && isAlive(pid)) throw new DataDirLockedError(dataDir, pid);
        if (pid === process.pid) throw new DataDirLockedError(dataDir, pid); // open in this process already
        takeOverStale(lockPath, holder);
        continue;
      }
      const release = () => {
        process.removeListener('exit', release); // one listener per open folder, not one per open ever
        try {
          if (fs.readFileSync(lockPath, 'utf8') === String(process.pid)) fs.unlinkSync(lockPath);
        } catch {
          /* already gone */
        }
      };
      process.once('exit', release);
      return release;
    }
    throw new DataDirLockedError(dataDir, -1);
  } finally {
    fs.rmSync(mine, { force: true });
  }
}

/** The lock's content, or undefined if it does not exist. */
function readLock(lockPath: string): string | undefined {
  try {
    return fs.readFileSync(lockPath, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * Removes the stale lock whose content was `stale`: renamed aside first, so of several processes
 * taking it over one moves it; if what was moved is not that stale lock (a live process took the
 * name meanwhile), it is put back.
 */
function takeOverStale(lockPath: string, stale: string): void {
  const aside = `${lockPath}.${process.pid}.stale`;
  try {
    fs.renameSync(lockPath, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return; // another process moved it
    throw err;
  }
  try {
    if (fs.readFileSync(aside, 'utf8') !== stale) fs.linkSync(aside, lockPath); // a live lock: back in place
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    fs.rmSync(aside, { force: true });
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
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
  const release = inMemory ? () => undefined : lockDataDir(options.dataDir);
  try {
    const { PGlite } = await import('@electric-sql/pglite');
    const pglite = await PGlite.create(inMemory ? options.dataDir : path.resolve(options.dataDir));
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
    const query = run(pglite);
    const unlistens = new Set<() => Promise<void>>();
    return {
      kind: 'pglite',
      query: query as Db['query'],
      transaction: (fn) => pglite.transaction((tx) => fn({ query: run(tx) as Queryable['query'] })),
      async listen(channel: string, handlers: ListenHandlers) {
        const unlisten = await pglite.listen(channel, (payload) => handlers.onNotify(payload));
        unlistens.add(unlisten);
        handlers.onConnect?.();
        return async () => {
          unlistens.delete(unlisten);
          await unlisten();
        };
      },
      async close() {
        for (const unlisten of unlistens) await unlisten().catch(() => undefined);
        unlistens.clear();
        await pglite.close();
        release();
      },
    };
  } catch (err) {
    release();
    throw err;
  }
}

/** A one-dimensional PostgreSQL array literal of int8 (`{1,2,NULL}`) as strings. */
function parseTextArray(text: string): (string | null)[] {
  const inner = text.slice(1, -1);
  if (inner === '') return [];
  return inner.split(',').map((v) => (v === 'NULL' ? null : v));
}
