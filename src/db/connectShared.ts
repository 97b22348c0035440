/**
 * The follower's side of the embedded share (embeddedShare.ts, which has the protocol): a Db in
 * another process on the database that the process holding the folder serves on its socket.
 */
import * as net from 'node:net';
import { timerDelay } from '../config';
import { DbClosedError, DbUnansweredError, type EmbeddedHolder, EmbeddedShareClosedError } from '../errors';
import type { CallOptions, Db, ListenHandlers, ListenOptions, Queryable } from './Db';
import { endingTx } from './endedTx';
import { DEFAULT_PROBE_TIMEOUT_MS } from './pgListener';
import { checkSocketDir, CLOSING, decode, encode, errorFrom, EXPIRED, GOODBYE, HELLO, readLines, type Request } from './embeddedShare';

/**
 * The key of a follower Db's account of the process holding its folder (socket, pid when known),
 * or undefined when it has none now: for messages of a caller that stops waiting before the Db said
 * why (a worker's start timeout below its calls' deadlines: StartTimeoutError,
 * test/faults/embeddedHolder.test.ts). A function, so a spread wrapper copies it.
 */
export const EMBEDDED_HOLDER = Symbol('acta.embeddedHolder');
/** A Db that can say which process holds its embedded folder (EMBEDDED_HOLDER). */
export type HolderAware = Db & { [EMBEDDED_HOLDER]: () => EmbeddedHolder | undefined };

/** The process holding `db`'s embedded folder when `db` reaches it through its socket (EMBEDDED_HOLDER), else undefined. */
export function embeddedHolder(db: unknown): EmbeddedHolder | undefined {
  const holder = db !== null && typeof db === 'object' ? (db as { [EMBEDDED_HOLDER]?: unknown })[EMBEDDED_HOLDER] : undefined;
  return typeof holder === 'function' ? (holder as () => EmbeddedHolder | undefined)() : undefined;
}

/** A call's deadline: its length as given (for the error) and the instant it ends (epoch ms). */
interface Deadline {
  ms: number;
  at: number;
}
const deadlineOf = (call: CallOptions | undefined): Deadline | undefined => (call?.deadlineMs === undefined ? undefined : { ms: call.deadlineMs, at: Date.now() + call.deadlineMs });
/** A LISTEN's deadline, and its UNLISTEN's (which the holder does however late): the LISTEN connection's probe timeout on a server. */
const listenDeadline = (options: ListenOptions | undefined): Deadline => deadlineOf({ deadlineMs: options?.probeTimeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS })!;

/**
 * A Db on the embedded database another process serves at `socketPath` (kind 'pglite': the same
 * SQL engine); `holderPid`, that process's pid, for messages. Rejects if nothing listens there.
 * A call with a deadline (CallOptions) unanswered by then rejects with DbUnansweredError, and the
 * holder never starts it afterwards (see the module doc); a transaction's deadline is the whole
 * transaction's. A LISTEN has the deadline ListenOptions.probeTimeoutMs (default 5 s) and rejects
 * as a call does; one the holder took too late is ended as soon as its answer comes, so the holder
 * keeps no listener its caller gave up on (test/embeddedShare.test.ts). Once the serving process
 * goes away, every pending and later call rejects with EmbeddedShareClosedError, listeners get
 * `onDown` once and `onLost` is called (connect() then finds the folder's next holder: connect.ts);
 * the error has `notTaken` set for a call the holder said it did not start: refused as it closes,
 * unanswered at its GOODBYE, or made after either (embeddedShare.ts, "Close");
 * after close(), calls reject with DbClosedError and listeners get `onClosed`, as on the other Dbs.
 */
export async function connectShared(socketPath: string, options: { onLost?: () => void; holderPid?: number } = {}): Promise<Db> {
  checkSocketDir(socketPath, false);
  const socket = net.createConnection(socketPath);
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve();
    });
  });
  const holder: EmbeddedHolder = { socketPath, pid: options.holderPid };
  // The holder's HELLO comes before it reads anything on a connection it took: one that closes
  // without it (queued by the kernel, never taken) ran none of what was sent on it.
  let greeted = false;
  let nextId = 1;
  let closed: Error | undefined;
  /** The holder said it closes (a CLOSING refusal, or GOODBYE): it takes no request from now on. */
  let closing = false;
  const notTaken = () => new EmbeddedShareClosedError(socketPath, { notTaken: true });
  /** The holder is gone for this Db: onLost once, at the first sign. */
  let lostSaid = false;
  const sayLost = () => {
    if (lostSaid || closed) return;
    lostSaid = true;
    options.onLost?.();
  };
  const pending = new Map<number, { resolve: (rows: unknown[]) => void; reject: (err: Error) => void; deadline?: Deadline }>();
  /** What to do with the answer to a request given up on at its deadline, when it comes. */
  const late = new Map<number, (frame: Record<string, unknown>) => void>();
  const subs = new Map<number, ListenHandlers>();
  /** The holder's error frame as the error a follower is told: its refusals typed, a database error with its fields. */
  const refused = (frame: Record<string, unknown>, deadline: Deadline | undefined): Error => {
    if (frame.code === EXPIRED && deadline) return new DbUnansweredError(deadline.ms, undefined, { holder });
    if (frame.code === CLOSING) {
      closing = true;
      sayLost();
      return notTaken();
    }
    // ACTA_DB_CLOSED: the holder's Db closed under the request (its close began as it arrived).
    if (frame.code === 'ACTA_DB_CLOSED') return new EmbeddedShareClosedError(socketPath);
    return errorFrom(frame);
  };
  readLines(socket, (line) => {
    const frame = decode(line);
    if (frame[HELLO] !== undefined) {
      greeted = true;
      return;
    }
    if (frame[GOODBYE] === true) {
      // Every request it took was answered before this: the others it never started.
      closing = true;
      sayLost();
      for (const waiter of pending.values()) waiter.reject(notTaken());
      pending.clear();
      return;
    }
    if (typeof frame.sub === 'number') {
      subs.get(frame.sub)?.onNotify(String(frame.payload));
      return;
    }
    const id = frame.id as number;
    const waiter = pending.get(id);
    if (!waiter) {
      late.get(id)?.(frame);
      late.delete(id);
      return;
    }
    pending.delete(id);
    if (frame.error) waiter.reject(refused(frame.error as Record<string, unknown>, waiter.deadline));
    else waiter.resolve(frame.rows as unknown[]);
  });
  socket.on('error', () => undefined);
  socket.on('close', () => {
    sayLost();
    // Closed without GOODBYE (a kill, even one mid-close): a request in flight may have run, unless
    // the holder never took the connection (no HELLO).
    const inFlight = closed ?? (greeted ? new EmbeddedShareClosedError(socketPath) : notTaken());
    closed ??= closing ? notTaken() : inFlight;
    for (const waiter of pending.values()) waiter.reject(inFlight);
    pending.clear();
    late.clear();
    for (const handlers of subs.values()) handlers.onDown?.(closed);
    subs.clear();
  });
  const call = (req: Omit<Request, 'id' | 'deadlineAt'>, deadline?: Deadline, onLate?: (frame: Record<string, unknown>) => void): Promise<unknown[]> => {
    if (closed) return Promise.reject(closed);
    if (closing) return Promise.reject(notTaken());
    const id = nextId++;
    return new Promise<unknown[]>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const settle = <A>(fn: (arg: A) => void) => (arg: A) => {
        clearTimeout(timer);
        fn(arg);
      };
      pending.set(id, { resolve: settle(resolve), reject: settle(reject), deadline });
      if (deadline) {
        timer = setTimeout(() => {
          pending.delete(id);
          if (onLate) late.set(id, onLate);
          reject(new DbUnansweredError(deadline.ms, undefined, { holder }));
        }, timerDelay(deadline.at - Date.now()));
      }
      socket.write(encode({ ...req, id, deadlineAt: deadline?.at }));
    });
  };
  const query = async <R>(text: string, params: unknown[] | undefined, deadline: Deadline | undefined, tx?: number): Promise<{ rows: R[] }> => ({
    rows: (await call({ op: 'q', text, params: params?.map(toWire), tx }, deadline)) as R[],
  });
  const db: HolderAware = {
    kind: 'pglite',
    [EMBEDDED_HOLDER]: () => holder,
    query: ((text: string, params?: unknown[], callOptions?: CallOptions) => query(text, params, deadlineOf(callOptions))) as Db['query'],
    async transaction<T>(fn: (tx: Queryable) => Promise<T>, callOptions?: CallOptions): Promise<T> {
      const deadline = deadlineOf(callOptions);
      const begin = nextId; // the id `call` gives the begin request
      try {
        await call({ op: 'begin' }, deadline);
      } catch (err) {
        // Unanswered: the holder may have begun it, and would hold its one session for it until TX_IDLE_MS.
        if (err instanceof DbUnansweredError) void call({ op: 'rollback', tx: begin }).catch(() => undefined);
        throw err;
      }
      // Once begun, a part the holder did not take means it rolled the transaction back; `fn` ran
      // meanwhile, so the whole is not sent again (not `notTaken`).
      const begun = (err: unknown) => (err instanceof EmbeddedShareClosedError && err.notTaken ? new EmbeddedShareClosedError(socketPath, { cause: err }) : err);
      let result: T;
      // A tx kept past its transaction is refused as on a server, nothing sent (endedTx.ts), not the holder's "no open transaction".
      const { tx, end } = endingTx({ query: ((text: string, params?: unknown[]) => query(text, params, deadline, begin).catch((err: unknown) => Promise.reject(begun(err)))) as Queryable['query'] });
      try {
        result = await fn(tx);
      } catch (err) {
        end();
        // Not waited for past the deadline: the holder rolls back what it finds of this transaction either way.
        await call({ op: 'rollback', tx: begin }, deadline).catch(() => undefined);
        throw begun(err);
      }
      end();
      await call({ op: 'commit', tx: begin }, deadline).catch((err: unknown) => Promise.reject(begun(err))); // rejects if the commit failed (a deferred constraint)
      return result;
    },
    async listen(channel: string, handlers: ListenHandlers, options?: ListenOptions) {
      const sub = nextId; // the id `call` gives the request
      const unlisten = () => call({ op: 'unlisten', sub }, listenDeadline(options)).then(() => undefined);
      subs.set(sub, handlers);
      try {
        // Answered after it was given up on: the holder took it then, and ends it now.
        await call({ op: 'listen', channel }, listenDeadline(options), (frame) => void (frame.error ? undefined : unlisten().catch(() => undefined)));
      } catch (err) {
        subs.delete(sub);
        throw err;
      }
      handlers.onConnect?.();
      return async () => {
        subs.delete(sub);
        await unlisten().catch(() => undefined);
      };
    },
    async close() {
      if (!closed) {
        closed = new DbClosedError();
        for (const handlers of subs.values()) handlers.onClosed?.();
        subs.clear();
      }
      await new Promise<void>((resolve) => {
        socket.end(() => resolve());
        setTimeout(resolve, 1_000).unref();
      });
      socket.destroy();
    },
  };
  return db;
}

/** Parameters in the text form node-postgres sends (pg's prepareValue), so both ends agree on types. */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { prepareValue } = require('pg/lib/utils') as { prepareValue: (value: unknown) => unknown };
function toWire(value: unknown): unknown {
  return value === null || value === undefined ? null : prepareValue(value);
}
