/**
 * The lock of an embedded (PGlite) data folder, `<dataDir>/acta.lock`: one process opens a folder
 * at a time, since two processes on one PGlite folder silently corrupt it (shared/TOOLCHAIN.md).
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DataDirLockedError } from '../errors';
import { listenLiveness, livenessPath, probeLiveness } from './holderLiveness';
import { LIVENESS_SOCKET, LOCK_FILE, openSideFile, removeSideFile, UNSHARED_MARK } from './sideFiles';

/** Tries to take the lock before giving up with DataDirLockedError; between tries it waits 1 ms. */
const LOCK_TRIES = 50;

/** The lock file's name in its folder; its holder's own file is `acta.lock.<pid>[.<incarnation>]`. */
export const LOCK_NAME = 'acta.lock';

/**
 * Takes `<dataDir>/acta.lock` for this process: two processes on one PGlite data folder silently
 * corrupt it (shared/TOOLCHAIN.md). A lock left by a process that is gone is taken over. Returns
 * the release function. Throws DataDirLockedError if a live process holds it.
 *
 * The lock appears with its pid already in it (written to a file of this process's own, then
 * hard-linked to the lock's name, which fails if the name exists): a lock created empty and filled
 * afterwards could be read empty in between, taken for stale and removed under its live holder
 * (found by a race of 8 starters: two held the folder in 20 of 30 rounds). A stale lock is removed
 * by removeStaleLock, which never moves a live lock, not even for a moment.
 *
 * A pid names a process only while it lives: after a crash or a SIGKILL, a restarted container's
 * process has the dead one's pid again (PID 1, or a fixed small pid under tini or npm), and a
 * long-running host reuses pids. So where /proc tells it (Linux), that own file is named after
 * this process's incarnation, `acta.lock.<pid>.<incarnation>`, and stays beside the lock, a hard
 * link of it, while this process holds it: readHolder finds it by inode. A lock whose incarnation
 * is not the one its pid's live process has now is stale, even with this process's own pid. The
 * lock's content stays the bare pid: an older acta beside this one reads it as a live holder (it
 * took any other content for stale, and removed it). A lock without an incarnation (an older
 * acta's, or no /proc: macOS) is judged by its pid alone, as before, but for this process's own
 * pid where /proc is: then it is an earlier process's, and stale. test/pglite.test.ts, "the
 * data folder lock".
 *
 * A pid says nothing of a process in another pid namespace (another container with the folder
 * mounted), so where it records an incarnation a holder also listens on a liveness socket beside
 * the lock from before the lock appears (holderLiveness.ts): a lock its pid calls stale is taken
 * over only once that socket refuses, and a live one is refused with `elsewhere` set.
 */
export function lockDataDir(dataDir: string): () => void {
  fs.mkdirSync(dataDir, { recursive: true });
  const lockPath = path.join(dataDir, LOCK_NAME);
  const self = incarnation(process.pid);
  const mine = self === undefined ? `${lockPath}.${process.pid}` : `${lockPath}.${process.pid}.${self}`;
  const ino = writeOwn(mine, lockPath, dataDir);
  let live: { close(): void } | undefined;
  let held = false;
  try {
    live = self === undefined ? undefined : listenLiveness(livenessPath(dataDir, process.pid, self));
    for (let tries = 0; tries < LOCK_TRIES; tries++) {
      if (tries > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1); // start-up only: a 1 ms sleep
      try {
        fs.linkSync(mine, lockPath);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        const holder = readHolder(lockPath);
        if (holder === undefined) continue; // released meanwhile: try again
        try {
          const verdict = judge(holder);
          if (verdict === 'stale') removeStaleLock(lockPath, holder, mine);
          // 'this process': open in this process already. A lock released or replaced while it was judged is judged again.
          else if (isFile(lockPath, holder.ino)) throw new DataDirLockedError(dataDir, Number(holder.content), false, verdict === 'elsewhere');
        } finally {
          holder.close();
        }
        continue;
      }
      held = true;
      const release = () => {
        process.removeListener('exit', release); // one listener per open folder, not one per open ever
        try {
          if (isFile(lockPath, ino)) fs.unlinkSync(lockPath);
          if (self !== undefined) fs.rmSync(mine, { force: true });
        } catch {
          /* already gone */
        }
        live?.close(); // after the lock: it stands for it
      };
      process.once('exit', release);
      return release;
    }
    throw new DataDirLockedError(dataDir, -1);
  } finally {
    if (!held || self === undefined) fs.rmSync(mine, { force: true });
    if (!held) live?.close();
  }
}

/**
 * Writes `mine`, this process's own file (its pid), as a new file, and returns its inode. A
 * `mine` already there that is the lock is this incarnation's: open in this process already
 * (DataDirLockedError, and it is left in place). Any other is left over, and made anew: written
 * over, it would change the file it is a link of.
 */
function writeOwn(mine: string, lockPath: string, dataDir: string): bigint {
  for (;;) {
    try {
      fs.writeFileSync(mine, String(process.pid), { flag: 'wx' });
      return fs.lstatSync(mine, { bigint: true }).ino;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      if (fs.lstatSync(mine, { bigint: true }).ino === fileIno(lockPath)) throw new DataDirLockedError(dataDir, process.pid);
      removeSideFile(mine, LOCK_FILE);
    }
  }
}

/** A lock (or takeover) file as read, kept open so that its inode number stays its own until close(). */
export interface LockHolder {
  /** The holder's pid, as written (anything else: not a pid). */
  content: string;
  ino: bigint;
  /** The holder's incarnation and its own file, when it left one beside the lock (lockDataDir). */
  incarnation?: string;
  link?: string;
  close(): void;
}

/**
 * The lock file `file` as its holder wrote it, or undefined if it does not exist. Anything else by
 * its name is DataDirUnusableError (sideFiles.ts): no lock can be taken while it is there; a folder
 * read as a file failed with a bare EISDIR, and a FIFO waited for a writer for ever.
 */
export function readHolder(file: string): LockHolder | undefined {
  const fd = openSideFile(file, LOCK_FILE);
  if (fd === undefined) return undefined;
  try {
    const { ino, nlink } = fs.fstatSync(fd, { bigint: true });
    const content = fs.readFileSync(fd, 'utf8');
    const holder: LockHolder = { content, ino, close: () => fs.closeSync(fd) };
    // The holder's own file, a link of the same inode: `acta.lock.<pid>.<incarnation>` beside it.
    const prefix = `${LOCK_NAME}.${content}.`;
    if (nlink > 1n && PID.test(content)) {
      for (const name of fs.readdirSync(path.dirname(file))) {
        const link = path.join(path.dirname(file), name);
        if (name.startsWith(prefix) && INCARNATION.test(name.slice(prefix.length)) && fileIno(link) === ino) {
          return { ...holder, incarnation: name.slice(prefix.length), link };
        }
      }
      // An older acta's own file, left beside its lock when it was killed in between: removed with it.
      const old = path.join(path.dirname(file), `${LOCK_NAME}.${content}`);
      if (fileIno(old) === ino) return { ...holder, link: old };
    }
    return holder;
  } catch (err) {
    fs.closeSync(fd);
    throw err;
  }
}

/**
 * Whether the holder of a lock (or takeover) file is this process, another live process, one of
 * another pid namespace ('elsewhere'), or gone (stale): not a pid as acta writes it; or a dead pid,
 * or a pid whose live process (this one included) is another incarnation than the one the holder
 * recorded, when the holder's liveness socket (holderLiveness.ts) refuses too. Without a recorded
 * incarnation, or without one to compare it with (no /proc, the pid's hidden), the pid alone says,
 * as before.
 */
function judge(holder: LockHolder): 'this process' | 'live' | 'elsewhere' | 'stale' {
  const verdict = judgeByPid(holder);
  if (verdict !== 'stale' || holder.incarnation === undefined || holder.link === undefined) return verdict;
  const socket = livenessPath(path.dirname(holder.link), holder.content, holder.incarnation);
  return socket !== undefined && probeLiveness(socket) !== 'gone' ? 'elsewhere' : 'stale';
}

/** judge by the holder's pid (and incarnation) alone. */
function judgeByPid(holder: LockHolder): 'this process' | 'live' | 'stale' {
  // acta writes the pid as decimal digits alone: anything else (`0x1`, ` 1`) is no acta's lock.
  if (!PID.test(holder.content)) return 'stale';
  const pid = Number(holder.content);
  if (pid !== process.pid && !isAlive(pid)) return 'stale';
  if (holder.incarnation === undefined) {
    if (pid !== process.pid) return 'live';
    // Where /proc tells it, this process records its incarnation: a lock with its pid and none is
    // an earlier process's (an older acta's, killed: the upgrade of a crashed container), not its own.
    return incarnation(process.pid) === undefined ? 'this process' : 'stale';
  }
  const now = incarnation(pid);
  if (now !== undefined && now !== holder.incarnation) return 'stale';
  return pid === process.pid ? 'this process' : 'live';
}

/**
 * `<dataDir>/acta.unshared` holds the pid of the folder's holder while it does not serve the folder
 * to other processes (share: false, or its socket could not be bound), so that connect() in another
 * process refuses at once instead of waiting for a socket that will not come (connect.ts). connect()
 * reads it only for the pid of the lock's live holder, and each holder writes or removes it as it
 * opens the folder, under the lock (createPgliteDb): so a stale one (a pid that no longer holds the
 * lock, or an earlier incarnation of the holder's pid, whose lock was taken over) misleads no one
 * past that moment, and the pid alone is enough. Only ever removed by a process whose pid it holds.
 */
export const unsharedPath = (dataDir: string): string => path.join(dataDir, 'acta.unshared');

export function markUnshared(dataDir: string, unshared: boolean): void {
  const file = unsharedPath(dataDir);
  if (unshared) {
    removeSideFile(file, UNSHARED_MARK); // written over, a FIFO would wait for a reader
    fs.writeFileSync(file, String(process.pid));
  } else if (readLock(file, UNSHARED_MARK) === String(process.pid)) fs.rmSync(file, { force: true });
}

/** The content of the lock or another small file of the folder (`role`, for the error of one that is not a file: sideFiles.ts), or undefined if it does not exist. */
export function readLock(file: string, role: string): string | undefined {
  const fd = openSideFile(file, role);
  if (fd === undefined) return undefined;
  try {
    return fs.readFileSync(fd, 'utf8');
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Removes the lock file `target` if it is still the file `stale` was read from (its inode, which
 * cannot be another file's while `stale` is open), with its holder's own file beside it. The
 * remover first takes `<target>.takeover-<hash of stale's content>` (a hard link of `mine`, this
 * process's own file: exclusive) and looks at `target` again under it, so of several processes
 * taking over one lock one removes it, and none removes a lock a live process has taken since,
 * even one with the same pid (a restarted container's). A taker that cannot take the takeover file
 * returns, and its caller tries again. A takeover file left by a process that died holding it is
 * stale itself and removed the same way. `depth` bounds that recursion (each level needs a process
 * to die inside a microsecond window).
 *
 * The previous takeover moved the lock aside by rename and put it back if it was live: while it
 * was aside a third starter could take the name, and two processes held the folder (CI, Node 24,
 * 4 starters on a stale lock).
 */
export function removeStaleLock(target: string, stale: LockHolder, mine: string, depth = 0): void {
  const takeover = takeoverPath(target, stale.content);
  try {
    fs.linkSync(mine, takeover);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    const taker = readHolder(takeover);
    try {
      // A takeover is held only within one lockDataDir call, which is synchronous: none of this process's is.
      const verdict = taker === undefined ? undefined : judge(taker);
      if ((verdict === 'stale' || verdict === 'this process') && depth < 3) removeStaleLock(takeover, taker!, mine, depth + 1);
    } finally {
      taker?.close();
    }
    return;
  }
  try {
    if (isFile(target, stale.ino)) {
      fs.unlinkSync(target);
      if (stale.link !== undefined && stale.link !== mine) {
        fs.rmSync(stale.link, { force: true });
        const socket = stale.incarnation === undefined ? undefined : livenessPath(path.dirname(stale.link), stale.content, stale.incarnation);
        if (socket !== undefined) removeSideFile(socket, LIVENESS_SOCKET);
      }
    }
  } finally {
    fs.rmSync(takeover, { force: true });
  }
}

/** The takeover file of the lock file `target` whose content is `stale` (see removeStaleLock). */
export function takeoverPath(target: string, stale: string): string {
  return `${target}.takeover-${createHash('sha1').update(stale).digest('hex').slice(0, 12)}`;
}

/** The inode of `file`, or undefined if it does not exist. */
function fileIno(file: string): bigint | undefined {
  try {
    return fs.lstatSync(file, { bigint: true }).ino;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** True if `file` is the file with inode `ino`. */
const isFile = (file: string, ino: bigint): boolean => fileIno(file) === ino;

/** A pid as a lock holds it: String(process.pid). */
const PID = /^[1-9]\d*$/;

/** An incarnation as incarnation() writes it: `<start ticks>-<boot id>`. */
const INCARNATION = /^\d+-[0-9a-f-]+$/;

/**
 * Which incarnation of process `pid` is alive now, where /proc tells it (Linux): its start time in
 * clock ticks since boot (/proc/<pid>/stat, field 22) and the boot's id
 * (/proc/sys/kernel/random/boot_id), as `<ticks>-<boot id>`. A pid is reused once its process is
 * gone; its start time is not, within one boot, and the boot id tells boots apart. Undefined
 * without /proc, when /proc is not this process's pid namespace's (its /proc/self is not
 * process.pid: then its pids are not ours), or when `pid` cannot be read there (gone, or hidden:
 * hidepid).
 */
export function incarnation(pid: number): string | undefined {
  if (procStat('self')?.pid !== String(process.pid)) return undefined;
  const ticks = procStat(String(pid))?.ticks;
  let boot: string;
  try {
    boot = fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return undefined;
  }
  const found = `${ticks}-${boot}`;
  return ticks !== undefined && INCARNATION.test(found) ? found : undefined;
}

/** The pid (field 1) and start time (field 22) in /proc/<pid>/stat, or undefined if it cannot be read. */
function procStat(pid: string): { pid: string; ticks: string } | undefined {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // Field 2, the command's name in parentheses, may hold spaces and ')': the fields after it follow the last ')'.
  const ticks = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]; // [0] is field 3
  return ticks !== undefined && /^\d+$/.test(ticks) ? { pid: stat.slice(0, stat.indexOf(' ')), ticks } : undefined;
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
