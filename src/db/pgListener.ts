import { randomBytes } from 'node:crypto';
import { Client, type ClientConfig } from 'pg';
import { backoffDelay } from '../../operators';
import { ListenUndeliveredError } from '../errors';
import type { ListenHandlers, ListenOptions } from './Db';

/** Defaults of {@link ListenOptions}: a probe every 10 s, answered within 5 s. */
export const DEFAULT_PROBE_INTERVAL_MS = 10_000;
export const DEFAULT_PROBE_TIMEOUT_MS = 5_000;
/** Reconnect back-off: 100 ms doubling to 2 s, ±25 %. */
const RECONNECT = { initialMs: 100, maxMs: 2_000, jitter: 0.25 };

/** How a LISTEN connection's delivery is checked (createPgDb's listen). */
export interface DeliveryCheck {
  /** Commits `pg_notify(channel, '')` on a connection other than the LISTEN's. */
  notify(channel: string): Promise<unknown>;
  /** Check a direct connection too: LISTEN has a connection string of its own (a mistyped one is found). */
  always: boolean;
}

/**
 * LISTEN on `channel` on a connection of its own that never gives up (Db.listen's contract).
 *
 * - TCP keepalive is on; a connection that errors or ends is dropped and replaced (back-off
 *   100 ms → 2 s, ±25 %), LISTEN is issued again, and `onConnect` fires once it is in effect.
 * - The session is probed (`select 1`) every `probeIntervalMs`; a probe, or the LISTEN itself,
 *   that fails or is not answered within `probeTimeoutMs` drops the connection the same way. A half-open connection
 *   (the server's backend stopped, a silent network) answers no probe, and keepalive alone takes
 *   minutes to notice it: found within interval + timeout (test/db/wakeups.test.ts).
 * - `onDown` fires once per loss of an established connection; failed reconnects are silent.
 * - The first attempt settles the returned promise either way: LISTEN in effect, or the
 *   connection failed (reported through `onDown`) and keeps trying in the background.
 * - With `delivery`, before each LISTEN on a connection through a pooler (its BackendKeyData is not
 *   its server process: pg_backend_pid() differs), or on every one when `delivery.always`: the
 *   connection LISTENs on a channel of its own, `delivery.notify` commits a NOTIFY there, and one
 *   must arrive within `probeTimeoutMs`. In transaction mode the pooler hands the server connection
 *   holding a LISTEN to other clients between statements and drops what arrives while it is
 *   idle: none arrives. Then `onUndelivered` (ListenUndeliveredError), once, and the LISTEN ends
 *   for good: it is never issued on `channel`, so no pooled server connection is left listening
 *   there (PgBouncer logs each NOTIFY one reaches, other clients receive them), and no reconnect
 *   loop runs (test/faults/pgbouncer.test.ts; test/pgListener.spec.ts).
 */
export async function listenOnOwnConnection(config: ClientConfig, channel: string, handlers: ListenHandlers, options: ListenOptions = {}, delivery?: DeliveryCheck): Promise<() => Promise<void>> {
  const probeIntervalMs = options.probeIntervalMs ?? DEFAULT_PROBE_INTERVAL_MS;
  const probeTimeoutMs = options.probeTimeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS;
  let closed = false;
  let current: Client | null = null;
  let established = false;
  let failures = 0;
  let probeTimer: NodeJS.Timeout | undefined;
  let reconnectTimer: NodeJS.Timeout | undefined;
  let firstSettled: (() => void) | null = null;
  const first = new Promise<void>((resolve) => (firstSettled = resolve));
  const settleFirst = () => {
    firstSettled?.();
    firstSettled = null;
  };

  const open = () => {
    reconnectTimer = undefined;
    if (closed) return;
    const client = new Client({ application_name: 'acta listener', ...config, keepAlive: true, keepAliveInitialDelayMillis: probeIntervalMs, connectionTimeoutMillis: probeTimeoutMs });
    current = client;
    let lost = false;
    const lose = (err: Error) => {
      if (lost) return;
      lost = true;
      discard(client);
      if (current !== client) return;
      current = null;
      clearInterval(probeTimer);
      if (closed) return;
      if (err instanceof ListenUndeliveredError) {
        closed = true;
        handlers.onUndelivered?.(err);
        settleFirst();
        return;
      }
      failures++;
      if (established) {
        established = false;
        handlers.onDown?.(err);
      } else if (firstSettled) {
        handlers.onDown?.(err);
      }
      settleFirst();
      reconnectTimer = setTimeout(open, backoffDelay(failures, RECONNECT));
    };
    client.on('error', lose);
    client.on('end', () => lose(new Error('the LISTEN connection ended')));
    /** The channel of this connection's delivery check, and the arrival of its NOTIFY. */
    const check = `acta_listen_check_${randomBytes(6).toString('hex')}`;
    let arrived = () => undefined as void;
    const arrival = new Promise<void>((resolve) => (arrived = resolve));
    client.on('notification', (message) => {
      if (message.channel === channel) handlers.onNotify(message.payload ?? '');
      else if (message.channel === check) arrived();
    });
    const checkDelivery = async (how: DeliveryCheck) => {
      const { rows } = await answeredWithin(client.query<{ pid: number }>('select pg_backend_pid() as pid'), probeTimeoutMs, unanswered('its first statement', probeTimeoutMs));
      const keyPid = (client as unknown as { processID?: unknown }).processID;
      const pooled = typeof rows[0]?.pid === 'number' && typeof keyPid === 'number' && rows[0].pid !== keyPid;
      if (!pooled && !how.always) return;
      await answeredWithin(client.query(`LISTEN ${client.escapeIdentifier(check)}`), probeTimeoutMs, unanswered('its LISTEN', probeTimeoutMs));
      await answeredWithin(Promise.resolve(how.notify(check)), probeTimeoutMs, () => new Error(`the Db did not answer the LISTEN connection's check NOTIFY within ${probeTimeoutMs} ms`));
      await answeredWithin(arrival, probeTimeoutMs, () => new ListenUndeliveredError(probeTimeoutMs));
    };
    client
      .connect()
      .then(() => (delivery ? checkDelivery(delivery) : undefined))
      .then(() => answeredWithin(client.query(`LISTEN ${client.escapeIdentifier(channel)}`), probeTimeoutMs, unanswered('its LISTEN', probeTimeoutMs)))
      .then(
        () => {
          if (lost) return;
          if (closed) {
            lost = true;
            discard(client);
            return;
          }
          established = true;
          failures = 0;
          settleFirst();
          handlers.onConnect?.();
          let probing = false;
          probeTimer = setInterval(() => {
            if (probing) return;
            probing = true;
            answeredWithin(client.query('select 1'), probeTimeoutMs, unanswered('a probe', probeTimeoutMs)).then(
              () => (probing = false),
              (err: Error) => lose(err),
            );
          }, probeIntervalMs);
        },
        (err: unknown) => lose(err instanceof Error ? err : new Error(String(err))),
      );
  };

  open();
  await first;
  return async () => {
    closed = true;
    clearInterval(probeTimer);
    clearTimeout(reconnectTimer);
    const client = current;
    current = null;
    if (client) discard(client);
  };
}

/** The error of a statement the LISTEN connection did not answer in time. */
const unanswered = (what: string, ms: number) => () => new Error(`the LISTEN connection did not answer ${what} within ${ms} ms`);

/**
 * `query`'s answer, or a rejection with `late()` if none came within `ms`. The verdict waits one
 * turn of the event loop past the timer, so an answer already read off the socket while the
 * process was busy (a long synchronous handler) is not taken for silence (test/pgListener.spec.ts).
 */
function answeredWithin<T>(query: Promise<T>, ms: number, late: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(
      () =>
        setImmediate(() => {
          if (settled) return;
          settled = true;
          reject(late());
        }),
      ms,
    );
    query.then(
      (value) => {
        clearTimeout(timer);
        if (settled) return;
        settled = true;
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        if (settled) return;
        settled = true;
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

/**
 * Ends a connection without waiting on its server: a half-open one would never answer the
 * Terminate message, so the socket is destroyed as well. Its later errors are swallowed.
 */
function discard(client: Client): void {
  client.removeAllListeners('notification');
  client.removeAllListeners('end');
  client.removeAllListeners('error');
  client.on('error', () => undefined);
  client.end().catch(() => undefined);
  (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
}
