/**
 * The embedded database shared with other local processes. PGlite is one session in one process,
 * and two processes on one data folder corrupt it, so the process that holds the folder (its
 * `acta.lock`) serves its Db on a Unix socket beside it, and `connect()` in any other process of the
 * same user finds that socket and uses it: `acta enqueue`, `acta job`, `acta cancel`, a client or a
 * second worker beside a running `acta worker` (docs/operating.md, "The embedded database").
 *
 * Protocol: newline-delimited JSON frames over the socket. The holder's first frame on a connection
 * it took is `{ hello: 1 }`, written before it reads anything there: a connection can be made
 * (queued by the kernel) that the holder never takes, and one that closes without HELLO ran none
 * of what the follower sent on it.
 * A request carries an `id` and one `op`:
 * `q` (a statement, optionally inside an open transaction `tx`), `begin`, `commit`, `rollback`,
 * `listen`, `unlisten`; the answer carries the same `id` with `rows` or `error`; a notification is
 * `{ sub, payload }`. A remote transaction runs inside the holder's own `db.transaction`, so it is
 * as isolated as an in-process one: everything else on the database waits for it. A transaction
 * that hears nothing for TX_IDLE_MS, or whose process goes away, is rolled back.
 *
 * Deadlines: a call with one (CallOptions.deadlineMs) sends it as `deadlineAt` (this machine's
 * clock, which both ends read) and fails with DbUnansweredError when no answer came by then
 * (connectShared.ts, the follower's side). The holder takes nothing past its `deadlineAt`: a lone
 * statement when it reads it, a transaction's begin, statements and commit when the transaction
 * gets to them (the transaction is then rolled back). So a holder that was stopped (SIGSTOP,
 * Ctrl-Z) and goes on runs none of what its followers gave up on; a lone statement it had read
 * before may still wait for the session and run (test/faults/embeddedHolder.test.ts). A `listen`
 * is taken only within its deadline too, and one answered after it was given up on is ended by its
 * follower (`unlisten` is done however late). The connection stays: what it carries later is answered.
 *
 * Close: the holder takes no new request (refusing each with CLOSING), rolls back the open remote
 * transactions, answers every request it had taken, and then sends each connection the frame
 * `{ closing: true }` (GOODBYE) before closing it: every request it took was answered before that
 * frame, so one unanswered at it was not taken, and none is taken after it. The follower sends
 * those again to the folder's next holder (connect.ts, followHolder). A connection that closes
 * without it (a kill) leaves its requests in flight unknown: they may have run, and are not sent
 * again (test/faults/embeddedHolder.test.ts, "a holder closing cleanly").
 *
 * Values cross as JSON; a Date is tagged (DATE_TAG) so it comes back a Date, and a database error
 * keeps its fields (`code`, `detail`, …) so transient-error rules and SQLSTATEs work as on a server.
 */
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Db, Queryable } from './Db';

/** A remote transaction with no request for this long is rolled back (its holder's database waits on it meanwhile). */
export const TX_IDLE_MS = 60_000;
/** The longest socket path the platforms take is 104-108 bytes; past this one goes in the temp folder. */
const MAX_SOCKET_PATH = 100;
const DATE_TAG = '\u0000acta:date';
const ROLLBACK = new Error('rollback requested');
const ERROR_FIELDS = ['code', 'detail', 'hint', 'position', 'where', 'schema', 'table', 'column', 'dataType', 'constraint', 'routine', 'severity'] as const;

/**
 * Where the process holding `dataDir` serves it: `<dataDir>/acta.sock`, or, when that is too long
 * for a socket, a path in this user's own folder of the temp folder (privateSocketDir).
 */
export function socketPathFor(dataDir: string): string {
  const dir = path.resolve(dataDir);
  const beside = path.join(dir, 'acta.sock');
  if (Buffer.byteLength(beside) <= MAX_SOCKET_PATH) return beside;
  return path.join(privateSocketDir(), `${createHash('sha1').update(dir).digest('hex').slice(0, 16)}.sock`);
}

/**
 * `<temp>/acta-<uid>`: the folder of this user's sockets in the shared temp folder. Used only when
 * it is this user's and no one else may enter it (0700), so no other user can put a socket in it
 * for this process's queries to go to, nor swap one in between a check and a connect.
 */
export function privateSocketDir(): string {
  return path.join(os.tmpdir(), `acta-${process.getuid?.() ?? 'user'}`);
}

/** Throws unless `dir` is a folder of this user that only this user can enter; made so first when `create`. */
function checkPrivateDir(dir: string, create: boolean): void {
  const uid = process.getuid?.();
  if (create) {
    fs.mkdirSync(dir, { mode: 0o700, recursive: true });
    const made = fs.lstatSync(dir);
    if (made.isDirectory() && made.uid === uid && (made.mode & 0o077) !== 0) fs.chmodSync(dir, 0o700);
  }
  const stat = fs.lstatSync(dir);
  if (!stat.isDirectory() || (uid !== undefined && stat.uid !== uid) || (stat.mode & 0o077) !== 0) {
    throw new Error(`${dir} is not a folder of this user (uid ${uid}) closed to others (mode 0700): its sockets are not used`);
  }
}

/** The socket folder's check, for every socket but one beside its data folder (`acta.sock`, in that folder). */
export function checkSocketDir(socketPath: string, create: boolean): void {
  if (path.basename(socketPath) !== 'acta.sock') checkPrivateDir(path.dirname(socketPath), create);
}

/** A follower's request frame (see the module doc). */
export interface Request {
  id: number;
  op: 'q' | 'begin' | 'commit' | 'rollback' | 'listen' | 'unlisten';
  text?: string;
  params?: unknown[];
  tx?: number;
  channel?: string;
  sub?: number;
  /** The caller's deadline, epoch ms: past it the holder starts nothing of this request. */
  deadlineAt?: number;
}

/** Codes of the holder's refusals of a request it did not start (the follower throws its typed error). */
export const EXPIRED = 'ACTA_DB_UNANSWERED';
export const CLOSING = 'ACTA_EMBEDDED_SHARE_CLOSED';
const refusal = (code: string, message: string) => Object.assign(new Error(message), { code });
const expired = (req: Request) => req.deadlineAt !== undefined && Date.now() > req.deadlineAt;
const tooLate = () => refusal(EXPIRED, "not started: the caller's deadline had passed");
const closing = () => refusal(CLOSING, 'not started: the holder is closing the database');
/** The holder's last frame on a connection it closes cleanly, and its first on one it took (see the module doc). */
export const GOODBYE = 'closing';
/** How long a closing holder waits for a connection to take its last frames (a follower that stopped reading). */
const FLUSH_MS = 5_000;
export const HELLO = 'hello';

export function encode(frame: unknown): string {
  return `${JSON.stringify(frame, function (this: Record<string, unknown>, key, value) {
    const raw = this[key];
    return raw instanceof Date ? { [DATE_TAG]: raw.getTime() } : value;
  })}\n`;
}

export function decode(line: string): Record<string, unknown> {
  return JSON.parse(line, (_key, value) =>
    value !== null && typeof value === 'object' && DATE_TAG in value && Object.keys(value).length === 1 ? new Date(value[DATE_TAG] as number) : value,
  ) as Record<string, unknown>;
}

/** Calls `onLine` for each complete line read from `socket`. */
export function readLines(socket: net.Socket, onLine: (line: string) => void): void {
  let buffered = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    buffered += chunk;
    let nl = buffered.indexOf('\n');
    while (nl >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (line.length > 0) onLine(line);
      nl = buffered.indexOf('\n');
    }
  });
}

function errorFrame(err: unknown): Record<string, unknown> {
  const e = (err ?? {}) as Record<string, unknown>;
  const out: Record<string, unknown> = { message: err instanceof Error ? err.message : String(err) };
  for (const f of ERROR_FIELDS) if (typeof e[f] === 'string') out[f] = e[f];
  return out;
}

export function errorFrom(frame: Record<string, unknown>): Error {
  const err = new Error(String(frame.message)) as Error & Record<string, unknown>;
  for (const f of ERROR_FIELDS) if (typeof frame[f] === 'string') err[f] = frame[f];
  return err;
}

/** A remote transaction: the requests for it, handed one at a time to the holder's transaction. */
class RemoteTx {
  private readonly waiting: Request[] = [];
  private wake?: () => void;
  private ended?: Error;
  push(req: Request): void {
    this.waiting.push(req);
    this.wake?.();
  }
  end(err: Error): void {
    this.ended = err;
    this.wake?.();
  }
  /** The next request, or throws once the connection went away or nothing came for TX_IDLE_MS. */
  async next(): Promise<Request> {
    for (;;) {
      const req = this.waiting.shift();
      if (req) return req;
      if (this.ended) throw this.ended;
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        timer = setTimeout(() => {
          this.ended ??= new Error(`remote transaction idle for ${TX_IDLE_MS} ms: rolled back`);
          resolve();
        }, TX_IDLE_MS);
      });
      clearTimeout(timer);
      this.wake = undefined;
    }
  }
}

/** A running share: where it listens, and how to stop it (closes every remote connection). */
export interface EmbeddedShare {
  readonly socketPath: string;
  close(): Promise<void>;
}

/**
 * Serves `db` on `socketPath` for other processes of this user (the socket is made 0600). The
 * caller must hold the data folder's lock: a socket file left there is stale and is replaced.
 */
export async function shareDb(db: Db, socketPath: string): Promise<EmbeddedShare> {
  checkSocketDir(socketPath, true);
  fs.rmSync(socketPath, { force: true });
  const connections = new Set<net.Socket>();
  /** Every open remote transaction (close rolls them back), and every request taken and not yet answered (close waits for them). */
  const open = new Set<RemoteTx>();
  const taken = new Set<Promise<unknown>>();
  let closingDown = false;
  const track = (work: Promise<unknown>) => {
    taken.add(work);
    void work.finally(() => taken.delete(work));
  };
  const server = net.createServer((socket) => {
    connections.add(socket);
    socket.on('error', () => undefined);
    if (closingDown) return void socket.end(encode({ [GOODBYE]: true }));
    socket.write(encode({ [HELLO]: 1 }));
    const txs = new Map<number, RemoteTx>();
    const unlistens = new Map<number, () => Promise<void>>();
    // Nothing after GOODBYE: a write after end() destroys the socket, and with it a GOODBYE still buffered.
    const send = (frame: unknown) => {
      if (!socket.destroyed && !socket.writableEnded) socket.write(encode(frame));
    };
    const answer = (id: number, work: Promise<unknown>) =>
      work.then(
        (rows) => send({ id, rows }),
        (err: unknown) => send({ id, error: errorFrame(err) }),
      );
    const runTx = (begin: Request) => {
      const remote = new RemoteTx();
      txs.set(begin.id, remote);
      open.add(remote);
      let last: Request = begin; // the request the transaction's end answers
      const run = db.transaction(async (tx: Queryable) => {
        // Waited for the session (another transaction held it): started only within the deadline, and not while closing.
        if (closingDown) throw closing();
        if (expired(begin)) throw tooLate();
        send({ id: begin.id, rows: [] });
        for (;;) {
          last = await remote.next();
          if (last.op === 'rollback') throw ROLLBACK;
          if (expired(last)) throw tooLate(); // a statement or the commit: the whole transaction is rolled back
          if (last.op === 'commit') return;
          await answer(last.id, tx.query(last.text ?? '', last.params).then((r) => r.rows));
        }
      })
        .then(
          () => send({ id: last.id, rows: [] }),
          (err: unknown) => send(err === ROLLBACK ? { id: last.id, rows: [] } : { id: last.id, error: errorFrame(err) }),
        )
        .finally(() => {
          txs.delete(begin.id);
          open.delete(remote);
        });
      track(run);
    };
    readLines(socket, (line) => {
      let req: Request;
      try {
        req = decode(line) as unknown as Request;
      } catch {
        socket.destroy();
        return;
      }
      if (closingDown) return send({ id: req.id, error: errorFrame(closing()) });
      if (req.tx !== undefined) {
        const remote = txs.get(req.tx);
        if (remote) remote.push(req);
        else send({ id: req.id, error: { message: `no open transaction ${req.tx}` } });
        return;
      }
      if (req.op === 'q') {
        if (expired(req)) send({ id: req.id, error: errorFrame(tooLate()) });
        else track(answer(req.id, db.query(req.text ?? '', req.params).then((r) => r.rows)));
      } else if (req.op === 'begin') runTx(req);
      else if (req.op === 'listen') {
        if (expired(req)) return send({ id: req.id, error: errorFrame(tooLate()) });
        const listening = db
          .listen(req.channel ?? '', { onNotify: (payload) => send({ sub: req.id, payload }) })
          .then(async (unlisten) => {
            // Its connection went away while it waited for the session: nobody left to end it.
            if (socket.destroyed) await unlisten();
            else unlistens.set(req.id, unlisten);
            return [];
          });
        track(answer(req.id, listening));
      } else if (req.op === 'unlisten') {
        const unlisten = unlistens.get(req.sub ?? -1);
        unlistens.delete(req.sub ?? -1);
        track(answer(req.id, (unlisten?.() ?? Promise.resolve()).then(() => [])));
      }
    });
    socket.on('close', () => {
      connections.delete(socket);
      for (const remote of txs.values()) remote.end(new Error('the remote process went away: rolled back'));
      for (const unlisten of unlistens.values()) void unlisten().catch(() => undefined);
      unlistens.clear();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  fs.chmodSync(socketPath, 0o600);
  server.unref(); // serving never keeps the holder's process alive
  return {
    socketPath,
    async close() {
      closingDown = true;
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const remote of open) remote.end(closing());
      while (taken.size > 0) await Promise.allSettled([...taken]);
      // Flushed before the socket goes: a destroy drops what is still buffered (answers, GOODBYE).
      await Promise.all(
        [...connections].map(
          (socket) =>
            socket.destroyed ||
            new Promise<void>((resolve) => {
              const timer = setTimeout(resolve, FLUSH_MS);
              socket.end(encode({ [GOODBYE]: true }), () => {
                clearTimeout(timer);
                resolve();
              });
            }),
        ),
      );
      for (const socket of connections) socket.destroy();
      await stopped;
      fs.rmSync(socketPath, { force: true });
    },
  };
}

/** A fresh socket path in this user's socket folder (privateSocketDir), for tests. */
export function tempSocketPath(): string {
  return path.join(privateSocketDir(), `acta-test-${randomBytes(6).toString('hex')}.sock`);
}
