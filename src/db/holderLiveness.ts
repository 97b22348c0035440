/**
 * The liveness socket of a PGlite folder's lock holder (dataDirLock.ts). A pid names a process only
 * in its own pid namespace: in another (a second container with the folder mounted) it names
 * another process or none, and a lock judged by its pid there was taken over under its live holder,
 * two processes on one folder (test/pglite.test.ts, "a live holder in another pid namespace"). So a
 * holder that records its incarnation listens on `<dataDir>/acta.live-<hash of pid and
 * incarnation>` from before its lock appears until after it is gone: a connect succeeds while it
 * lives (stopped too) and is refused once it is gone (the kernel closes a dead process's sockets),
 * whatever pid namespace asks. Not across kernels (a folder on NFS): there the pid says, as before.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { LIVENESS_SOCKET, removeSideFile } from './sideFiles';

/** The longest socket path the platforms take is 104-108 bytes (as embeddedShare.ts). */
const MAX_SOCKET_PATH = 100;
/** A probe that has not connected nor been refused by then could not tell. */
const PROBE_TIMEOUT_MS = 5_000;
/** Exits 0 once connected, 3 when refused (no socket, or no one on it), else 4. */
const PROBE = "const s=require('node:net').connect(process.argv[1]);s.on('connect',()=>process.exit(0));s.on('error',(e)=>process.exit(e.code==='ECONNREFUSED'||e.code==='ENOENT'?3:4))";

/** The liveness socket of the holder `pid` in `incarnation`; undefined where the path is too long for a socket (then it has none). */
export function livenessPath(dataDir: string, pid: string | number, incarnation: string): string | undefined {
  const file = path.join(dataDir, `acta.live-${createHash('sha1').update(`${pid}.${incarnation}`).digest('hex').slice(0, 16)}`);
  return Buffer.byteLength(file) <= MAX_SOCKET_PATH ? file : undefined;
}

/**
 * Listens on `socketPath`, bound when this returns (a path is bound synchronously); close() stops
 * and removes it. Undefined when it could not be bound (a cluster worker, whose listen goes through
 * its primary): the holder then has none, and is judged by its pid alone, as before.
 */
export function listenLiveness(socketPath: string | undefined): { close(): void } | undefined {
  if (socketPath === undefined) return undefined;
  removeSideFile(socketPath, LIVENESS_SOCKET); // this incarnation's own, left by an earlier open in this process
  const server = net.createServer((socket) => socket.destroy());
  server.on('error', () => undefined);
  server.listen(socketPath);
  server.unref(); // never keeps the holder's process alive
  const close = () => {
    server.close();
    fs.rmSync(socketPath, { force: true });
  };
  if (!fs.lstatSync(socketPath, { throwIfNoEntry: false })?.isSocket()) {
    close();
    return undefined;
  }
  return { close };
}

/**
 * Whether a process listens on `socketPath`: 'gone' when the connect is refused (no socket file, or
 * no one on it), 'live' when it connects, 'unknown' when the probe could not tell (it is then taken
 * for live: a lock is never taken over on a doubt). Synchronous, as the lock is: it connects from a
 * child process (50-100 ms), run only before taking over a lock whose pid says it is stale.
 */
export function probeLiveness(socketPath: string): 'live' | 'gone' | 'unknown' {
  if (!fs.lstatSync(socketPath, { throwIfNoEntry: false })?.isSocket()) return 'gone';
  const env: NodeJS.ProcessEnv = { ...process.env, ELECTRON_RUN_AS_NODE: '1' };
  delete env.NODE_OPTIONS; // no preloaded agent in a probe
  const probe = spawnSync(process.execPath, ['-e', PROBE, socketPath], { stdio: 'ignore', timeout: PROBE_TIMEOUT_MS, env });
  return probe.status === 0 ? 'live' : probe.status === 3 ? 'gone' : 'unknown';
}
