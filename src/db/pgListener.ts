import { Client, type ClientConfig } from 'pg';
import { backoffDelay } from '../../operators';
import type { ListenHandlers, ListenOptions } from './Db';

/** Defaults of {@link ListenOptions}: a probe every 10 s, answered within 5 s. */
export const DEFAULT_PROBE_INTERVAL_MS = 10_000;
export const DEFAULT_PROBE_TIMEOUT_MS = 5_000;
/** Reconnect back-off: 100 ms doubling to 2 s, ±25 %. */
const RECONNECT = { initialMs: 100, maxMs: 2_000, jitter: 0.25 };

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
 */
export async function listenOnOwnConnection(config: ClientConfig, channel: string, handlers: ListenHandlers, options: ListenOptions = {}): Promise<() => Promise<void>> {
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
    client.on('notification', (message) => {
      if (message.channel === channel) handlers.onNotify(message.payload ?? '');
    });
    client
      .connect()
      .then(() => answeredWithin(client.query(`LISTEN ${client.escapeIdentifier(channel)}`), probeTimeoutMs, 'its LISTEN'))
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
            answeredWithin(client.query('select 1'), probeTimeoutMs, 'a probe').then(
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

/**
 * `query`'s answer, or a rejection if none came within `ms`. The verdict waits one turn of the
 * event loop past the timer, so an answer already read off the socket while the process was
 * busy (a long synchronous handler) is not taken for silence (test/pgListener.spec.ts).
 */
function answeredWithin<T>(query: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(
      () =>
        setImmediate(() => {
          if (settled) return;
          settled = true;
          reject(new Error(`the LISTEN connection did not answer ${what} within ${ms} ms`));
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
