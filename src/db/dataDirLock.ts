/**
 * The lock of an embedded (PGlite) data folder, `<dataDir>/acta.lock`: one process opens a folder
 * at a time, since two processes on one PGlite folder silently corrupt it (shared/TOOLCHAIN.md).
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DataDirLockedError } from '../errors';

/** Tries to take the lock before giving up with DataDirLockedError; between tries it waits 1 ms. */
const LOCK_TRIES = 50;

/**
 * Takes `<dataDir>/acta.lock` for this process: two processes on one PGlite data folder silently
 * corrupt it (shared/TOOLCHAIN.md). A lock left by a dead process is taken over. Returns the
 * release function. Throws DataDirLockedError if a live process holds it.
 *
 * The lock appears with its pid already in it (written to a file of this process's own, then
 * hard-linked to the lock's name, which fails if the name exists): a lock created empty and filled
 * afterwards could be read empty in between, taken for stale and removed under its live holder
 * (found by a race of 8 starters: two held the folder in 20 of 30 rounds). A stale lock is removed
 * by removeStaleLock, which never moves a live lock, not even for a moment.
 */
export function lockDataDir(dataDir: string): () => void {
  fs.mkdirSync(dataDir, { recursive: true });
  const lockPath = path.join(dataDir, 'acta.lock');
  const mine = `${lockPath}.${process.pid}`;
  fs.writeFileSync(mine, String(process.pid));
  try {
    for (let tries = 0; tries < LOCK_TRIES; tries++) {
      if (tries > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1); // start-up only: a 1 ms sleep
      try {
        fs.linkSync(mine, lockPath);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        const holder = readLock(lockPath);
        if (holder === undefined) continue; // released meanwhile: try again
        const pid = Number(holder);
        if (pid === process.pid) throw new DataDirLockedError(dataDir, pid); // open in this process already
        if (isLivePid(holder)) throw new DataDirLockedError(dataDir, pid);
        removeStaleLock(lockPath, holder, mine);
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

/**
 * `<dataDir>/acta.unshared` holds the pid of the folder's holder while it does not serve the folder
 * to other processes (share: false, or its socket could not be bound), so that connect() in another
 * process refuses at once instead of waiting for a socket that will not come (connect.ts). Only
 * ever removed by the process whose pid it holds; a stale one names a pid that no longer holds the lock.
 */
export const unsharedPath = (dataDir: string): string => path.join(dataDir, 'acta.unshared');

export function markUnshared(dataDir: string, unshared: boolean): void {
  const file = unsharedPath(dataDir);
  if (unshared) fs.writeFileSync(file, String(process.pid));
  else if (readLock(file) === String(process.pid)) fs.rmSync(file, { force: true });
}

/** The lock's content (or another small file's), or undefined if it does not exist. */
export function readLock(lockPath: string): string | undefined {
  try {
    return fs.readFileSync(lockPath, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * Removes the lock file `target` if its content is still `stale` (the pid of a dead process, or
 * not a pid). The remover first takes `<target>.takeover-<hash of stale>` (a hard link of `mine`,
 * this process's pid file: exclusive) and re-reads `target` under it, so of several processes
 * taking over one lock one removes it, and none removes a lock a live process has taken since.
 * A taker that cannot take the takeover file returns, and its caller tries again. A takeover file
 * left by a process that died holding it is stale itself and removed the same way. `depth` bounds
 * that recursion (each level needs a process to die inside a microsecond window).
 *
 * The previous takeover moved the lock aside by rename and put it back if it was live: while it
 * was aside a third starter could take the name, and two processes held the folder (CI, Node 24,
 * 4 starters on a stale lock).
 */
export function removeStaleLock(target: string, stale: string, mine: string, depth = 0): void {
  const takeover = takeoverPath(target, stale);
  try {
    fs.linkSync(mine, takeover);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    const taker = readLock(takeover);
    if (taker !== undefined && !isLivePid(taker) && depth < 3) removeStaleLock(takeover, taker, mine, depth + 1);
    return;
  }
  try {
    if (readLock(target) === stale) fs.unlinkSync(target);
  } finally {
    fs.rmSync(takeover, { force: true });
  }
}

/** The takeover file of the lock file `target` whose content is `stale` (see removeStaleLock). */
export function takeoverPath(target: string, stale: string): string {
  return `${target}.takeover-${createHash('sha1').update(stale).digest('hex').slice(0, 12)}`;
}

/** True if `content` is the pid of a live process other than this one. */
function isLivePid(content: string): boolean {
  const pid = Number(content);
  return Number.isInteger(pid) && pid > 0 && pid !== process.pid && isAlive(pid);
}

/** True if process `pid` exists (EPERM: it does, another user's). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
