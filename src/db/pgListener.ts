import { Socket } from 'node:net';
import type { ClientConfig } from 'pg';
import createPostgresSubscriber from 'pg-listen';
import { backoffDelay } from '../../operators';
import type { ListenHandlers, ListenOptions } from './Db';

/** Defaults of {@link ListenOptions}: a probe every 10 s, answered within 5 s. */
export const DEFAULT_PROBE_INTERVAL_MS = 10_000;
export const DEFAULT_PROBE_TIMEOUT_MS = 5_000;
/** Reconnect back-off: 100 ms doubling to 2 s, ±25 %. */
const RECONNECT = { initialMs: 100, maxMs: 2_000, jitter: 0.25 };
/** The probe: a NOTIFY on a channel nobody LISTENs to (pg-listen does not expose its client). */
const PROBE_CHANNEL = 'acta_listener_probe';

/**
 * TRIAL: pg-listen (retryTimeout Infinity, paranoidChecking off) as the transport, wrapped in
 * acta's watchdog: a probe with a deadline; on silence or on a LISTEN left unanswered, the
 * subscriber is closed (raced against a timeout, its sockets destroyed) and a new one made;
 * onConnect after every (re)connect once LISTEN is in effect.
 */
export async function listenOnOwnConnection(config: ClientConfig, channel: string, handlers: ListenHandlers, options: ListenOptions = {}): Promise<() => Promise<void>> {
  const probeIntervalMs = options.probeIntervalMs ?? DEFAULT_PROBE_INTERVAL_MS;
  const probeTimeoutMs = options.probeTimeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS;
  let closed = false;
  let current: (() => void) | null = null;
  let established = false;
  let failures = 0;
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
    const sockets = new Set<Socket>();
    const subscriber = createPostgresSubscriber(
      {
        application_name: 'acta listener',
        ...config,
        keepAliveInitialDelayMillis: probeIntervalMs,
        connectionTimeoutMillis: probeTimeoutMs,
        stream: () => {
          const socket = new Socket();
          sockets.add(socket);
          socket.once('close', () => sockets.delete(socket));
          return socket;
        },
      } as ClientConfig,
      { retryTimeout: Infinity, retryInterval: (attempt) => backoffDelay(attempt + 1, RECONNECT), paranoidChecking: false, parse: (s) => s },
    );
    let lost = false;
    let listening = false; // pg-listen's own reconnect is under way while false after the first LISTEN
    let lastProgress = performance.now();
    let probeTimer: NodeJS.Timeout | undefined;
    const dispose = () => {
      clearInterval(probeTimer);
      (subscriber.events as unknown as NodeJS.EventEmitter).removeAllListeners();
      (subscriber.notifications as unknown as NodeJS.EventEmitter).removeAllListeners();
      subscriber.events.on('error', () => undefined);
      Promise.race([subscriber.close(), new Promise((r) => setTimeout(r, probeTimeoutMs))])
        .catch(() => undefined)
        .finally(() => sockets.forEach((s) => s.destroy()));
    };
    const lose = (err: Error) => {
      if (lost) return;
      lost = true;
      dispose();
      if (current !== dispose) return;
      current = null;
      if (closed) return;
      failures++;
      if (established || firstSettled) handlers.onDown?.(err);
      established = false;
      settleFirst();
      reconnectTimer = setTimeout(open, backoffDelay(failures, RECONNECT));
    };
    current = dispose;
    subscriber.notifications.on(channel, (payload: string | undefined) => handlers.onNotify(payload ?? ''));
    subscriber.events.on('error', lose);
    subscriber.events.on('reconnect', (attempt: number) => {
      lastProgress = performance.now();
      listening = false;
      if (attempt === 1 && established) {
        established = false;
        handlers.onDown?.(new Error('the LISTEN connection was lost'));
      }
    });
    subscriber.events.on('connected', () => {
      if (!probeTimer || lost || closed) return; // the first connect: LISTEN not issued yet
      listening = true;
      established = true;
      failures = 0;
      handlers.onConnect?.();
    });
    answeredWithin(
      subscriber.connect().then(() => subscriber.listenTo(channel)),
      probeTimeoutMs,
      'its LISTEN',
    ).then(
      () => {
        if (lost) return;
        if (closed) return lose(new Error('closed'));
        established = true;
        listening = true;
        failures = 0;
        settleFirst();
        handlers.onConnect?.();
        let probing = false;
        probeTimer = setInterval(() => {
          if (!listening) {
            // pg-listen reconnecting: its LISTEN has no deadline, so an attempt that shows no
            // progress for interval + timeout is silence.
            if (performance.now() - lastProgress > probeIntervalMs + probeTimeoutMs) lose(new Error('pg-listen reconnect made no progress'));
            return;
          }
          if (probing) return;
          probing = true;
          answeredWithin(subscriber.notify(PROBE_CHANNEL), probeTimeoutMs, 'a probe').then(
            () => (probing = false),
            (err: Error) => {
              probing = false;
              if (listening) lose(err);
            },
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
    clearTimeout(reconnectTimer);
    const dispose = current;
    current = null;
    dispose?.();
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
