/**
 * The files acta keeps beside an embedded data folder's database: the lock `acta.lock`
 * (dataDirLock.ts), its holder's liveness socket `acta.live-<hash>` (holderLiveness.ts), the socket
 * `acta.sock` it serves the folder on (embeddedShare.ts) and `acta.unshared`. Something else by one
 * of their names is DataDirUnusableError naming it and the fix, never a hang or a bare errno: a
 * folder (a container's bind mount of a file missing on the host makes one), or, where acta reads
 * the file, a FIFO (opened to read, it waits for a writer for ever), a socket or a device
 * (test/pglite.test.ts, "a folder or a FIFO where a side file goes").
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DataDirUnusableError } from '../errors';

/** What each side file is, as the error names it. */
export const LOCK_FILE = 'the lock file of the process holding the data folder';
export const LIVENESS_SOCKET = 'the socket the process holding the data folder listens on while it runs (its liveness)';
export const SHARE_SOCKET = 'the socket the process holding the data folder serves it on to other processes';
export const UNSHARED_MARK = 'the mark of a holder that does not serve the data folder to other processes';

/** DataDirUnusableError for the side file `file` (`role`), which is what `stat` says instead: reason EISDIR for a folder, else EFTYPE. */
export function sideFileInTheWay(file: string, stat: fs.Stats | fs.BigIntStats, role: string): DataDirUnusableError {
  const folder = stat.isDirectory();
  const what = folder ? 'a folder' : stat.isFIFO() ? 'a FIFO (named pipe), not a file' : stat.isSocket() ? 'a socket, not a file' : 'a device, not a file';
  return new DataDirUnusableError(path.dirname(file), folder ? 'EISDIR' : 'EFTYPE', `${file} is ${what}, where acta keeps ${role}`, {
    fix: folder ? `Remove that folder (rmdir ${file}; a container's bind mount of a file missing on the host makes one: mount nothing there), then start again` : `Remove it (rm ${file}), then start again`,
  });
}

/**
 * The side file `file` (`role`) opened to read, or undefined if it does not exist. Opened without
 * waiting (O_NONBLOCK: a FIFO opens at once), and refused with sideFileInTheWay unless it is a file.
 */
export function openSideFile(file: string, role: string): number | undefined {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    const stat = code === 'ENXIO' ? fs.statSync(file, { throwIfNoEntry: false }) : undefined; // a socket: not opened
    throw stat === undefined ? err : sideFileInTheWay(file, stat, role);
  }
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile()) throw sideFileInTheWay(file, stat, role);
    return fd;
  } catch (err) {
    fs.closeSync(fd);
    throw err;
  }
}

/** Removes the side file `file` (`role`) left by an earlier holder, if there; a folder by its name is sideFileInTheWay. */
export function removeSideFile(file: string, role: string): void {
  const stat = fs.lstatSync(file, { throwIfNoEntry: false });
  if (stat?.isDirectory()) throw sideFileInTheWay(file, stat, role);
  fs.rmSync(file, { force: true });
}
