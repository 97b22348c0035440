import * as fs from 'node:fs';
import * as path from 'node:path';
import { Pool } from 'pg';
import { DataDirLockedError } from '../errors';
import type { Db, ListenHandlers } from './Db';
import { inTransaction } from './pgDb';

/** Options of the embedded default. */
export interface PgliteDbOptions {
  /** Data folder (created if missing), or `memory://` for a throwaway in-memory database. */
  dataDir: string;
}

/**
 * Takes `<dataDir>/acta.lock` for this process: two processes on one PGlite data folder silently
 * corrupt it (shared/TOOLCHAIN.md). A lock left by a dead process is taken over. Returns the
 * release function. Throws DataDirLockedError if a live process holds it.
 */
export function lockDataDir(dataDir: string): () => void {
  fs.mkdirSync(dataDir, { recursive: true });
  const lockPath = path.join(dataDir, 'acta.lock');
  for (let tries = 0; tries < 2; tries++) {
    try {
      const fd = fs.openSync(lockPath, 'wx');
      fs.writeSync(fd, String(process.pid));
      fs.closeSync(fd);
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
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = Number(fs.readFileSync(lockPath, 'utf8'));
      if (Number.isInteger(pid) && pid > 0 && isAlive(pid)) throw new DataDirLockedError(dataDir, pid);
      fs.unlinkSync(lockPath); // stale: its process is gone
    }
  }
  throw new DataDirLockedError(dataDir, -1);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The embedded default: PGlite (PostgreSQL in WASM, in-process). Queries go through PGlite's
 * node-postgres adapter, so parameters are serialised exactly as on a server; the adapter has one
 * shared session, so this Db owns one pool of size 1 per instance (shared/TOOLCHAIN.md). LISTEN
 * uses PGlite's own listen(). `onConnect` fires once: an in-process database never disconnects.
 */
export async function createPgliteDb(options: PgliteDbOptions): Promise<Db> {
  const inMemory = options.dataDir.startsWith('memory://');
  const release = inMemory ? () => undefined : lockDataDir(options.dataDir);
  try {
    const { PGlite } = await import('@electric-sql/pglite');
    const { createPgConfig } = await import('@electric-sql/pglite/node-postgres');
    const pglite = await PGlite.create(inMemory ? options.dataDir : path.resolve(options.dataDir));
    const pool = new Pool(createPgConfig(pglite) as never);
    pool.on('error', () => undefined);
    // PGlite has ONE session: its own LISTEN/UNLISTEN must not interleave with the adapter's
    // parse/bind/execute messages ("unnamed prepared statement does not exist"), so they run
    // while holding the pool's only client.
    const exclusive = async <T>(fn: () => Promise<T>): Promise<T> => {
      const client = await pool.connect();
      try {
        return await fn();
      } finally {
        client.release();
      }
    };
    const unlistens = new Set<() => Promise<void>>();
    return {
      kind: 'pglite',
      query: (text, params) => pool.query(text, params as unknown[]) as never,
      transaction: (fn) => inTransaction(pool, fn),
      async listen(channel: string, handlers: ListenHandlers) {
        const unlisten = await exclusive(() => pglite.listen(channel, (payload) => handlers.onNotify(payload)));
        const stop = () => exclusive(() => unlisten());
        unlistens.add(stop);
        handlers.onConnect?.();
        return async () => {
          unlistens.delete(stop);
          await stop();
        };
      },
      async close() {
        for (const stop of unlistens) await stop().catch(() => undefined);
        unlistens.clear();
        await pool.end();
        await pglite.close();
        release();
      },
    };
  } catch (err) {
    release();
    throw err;
  }
}
