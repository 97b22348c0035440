import { Observable } from 'rxjs';
import type { Logger } from 'pino';
import type { Db, ListenOptions } from '../db/Db';

/** The NOTIFY channel acta.enqueue_jobs signals; the payload is the namespace (or a running job's cancel: acta.cancel_job; a publish: acta.publish_events). */
export const NOTIFY_CHANNEL = 'acta_jobs';

/** Redis channel of a namespace's wakeups. */
export function redisChannel(namespace: string): string {
  return `acta:wakeup:${namespace}`;
}

/** Settings and callbacks of {@link notifyWakeups}. */
export interface NotifyWakeupsOptions extends ListenOptions {
  /** The listening connection went down (false) or LISTEN is in effect again (true); not called for the first connect. */
  onListening?: (up: boolean) => void;
  /** This worker's id, and what to do when a client cancels one of its running jobs (acta.cancel_job's 'cancel:<worker>:<job>:<execution>'). */
  workerId?: string;
  onCancel?: (jobId: string, execution: number) => void;
  /** A publish into the namespace committed (acta.publish_events' 'outbox:<namespace>'): sys.outbox's prompt path. */
  onOutbox?: () => void;
}

/**
 * Wakeups by LISTEN/NOTIFY (a probed connection of its own on a server, PGlite's listen
 * embedded). Emits on every notification for `namespace`, and on every (re)connect of the
 * listening connection (a catch-up claim: notifications sent while it was down are lost). A
 * wakeup never carries truth; SQL polling does. Never errors: a lost connection is logged at info
 * ("LISTEN connection lost"), and so is its return ("LISTEN connected", with `downMs`); a LISTEN
 * that NOTIFY does not reach (a pooler in transaction mode: ListenHandlers.onUndelivered) once at
 * warn, and it ends.
 */
export function notifyWakeups(db: Pick<Db, 'listen'>, namespace: string, logger: Logger, options: NotifyWakeupsOptions = {}): Observable<'notify' | 'connect'> {
  return new Observable((subscriber) => {
    let unlisten: (() => Promise<void>) | null = null;
    let closed = false;
    /** When the connection was lost (null: it is up, or has never been). */
    let downSince: number | null = null;
    const outboxPayload = `outbox:${namespace}`;
    const cancelPrefix = options.workerId === undefined ? undefined : `cancel:${options.workerId}:`;
    db.listen(
      NOTIFY_CHANNEL,
      {
        onNotify: (payload) => {
          if (payload === namespace) subscriber.next('notify');
          else if (payload === outboxPayload) options.onOutbox?.();
          else if (cancelPrefix !== undefined && payload.startsWith(cancelPrefix)) {
            const [jobId, execution] = payload.slice(cancelPrefix.length).split(':');
            options.onCancel?.(jobId, Number(execution));
          }
        },
        onConnect: () => {
          if (downSince === null) logger.debug('LISTEN connected');
          else {
            logger.info({ downMs: Math.round(performance.now() - downSince) }, 'LISTEN connected');
            downSince = null;
            options.onListening?.(true);
          }
          subscriber.next('connect');
        },
        onDown: (err) => {
          if (downSince !== null) return;
          downSince = performance.now();
          logger.info({ err }, 'LISTEN connection lost; reconnecting (the safety poll claims meanwhile)');
          options.onListening?.(false);
        },
        onUndelivered: (err) => {
          logger.warn({ err }, 'NOTIFY does not reach the LISTEN connection (a pooler in transaction mode, or a listen URL on another database?): LISTEN stopped, the safety poll claims; set ACTA_LISTEN_URL to a direct connection, or --no-listen to poll only (docs/operating.md, "Behind PgBouncer")');
          options.onListening?.(false);
        },
      },
      { probeIntervalMs: options.probeIntervalMs, probeTimeoutMs: options.probeTimeoutMs },
    ).then(
      (stop) => {
        if (closed) void stop();
        else unlisten = stop;
      },
      (err) => logger.warn({ err }, 'LISTEN could not start; relying on the safety poll'),
    );
    return () => {
      closed = true;
      void unlisten?.();
    };
  });
}

/** The part of an ioredis client acta uses (so users pass their own `new Redis(...)`). */
export interface RedisLike {
  duplicate(): RedisLike;
  subscribe(channel: string): Promise<unknown>;
  on(event: 'message', listener: (channel: string, message: string) => void): unknown;
  on(event: 'ready', listener: () => void): unknown;
  publish(channel: string, message: string): Promise<unknown>;
  quit(): Promise<unknown>;
  /** Closes at once (ioredis' disconnect); used, when there, to end the subscription connection. */
  disconnect?(): void;
}

/**
 * Wakeups by Redis pub/sub, for setups where NOTIFY does not reach workers (e.g. behind a
 * transaction-pooling proxy). Subscribes on a duplicate of `redis`; emits on each message and,
 * for a catch-up claim, once the subscription is in effect after each (re)connect. Never errors.
 */
export function redisWakeups(redis: RedisLike, namespace: string, logger: Logger): Observable<'redis'> {
  return new Observable((subscriber) => {
    const sub = redis.duplicate();
    const channel = redisChannel(namespace);
    sub.on('message', (ch: string) => {
      if (ch === channel) subscriber.next('redis');
    });
    // The catch-up wakeup of a (re)connect must come after the SUBSCRIBE is in effect, or a
    // message published in between is lost and its job waits for the safety poll. ioredis emits
    // 'ready' before it sends the (re)subscription, so each catch-up waits for a SUBSCRIBE of our
    // own, answered in order on the same connection (subscribing twice to a channel is harmless).
    // Each connect sends one unless one is still in flight (ioredis sends a queued one once
    // connected): a SUBSCRIBE that failed, e.g. queued while the server was down past
    // maxRetriesPerRequest, is sent again at the next connect, and until then the safety poll
    // claims (test/wakeups.spec.ts; test/faults/redis.test.ts).
    let inFlight = false;
    /** Unsubscribed: a SUBSCRIBE the closing connection fails is no news (no warning at every stop while Redis is down). */
    let unsubscribed = false;
    const subscribe = (what: string) => {
      inFlight = true;
      return sub.subscribe(channel).then(
        () => {
          inFlight = false;
          subscriber.next('redis');
        },
        (err: unknown) => {
          inFlight = false;
          if (!unsubscribed) logger.warn({ err }, `Redis SUBSCRIBE ${what} failed; relying on the safety poll until the next connect sends it again`);
        },
      );
    };
    // ioredis emits 'error' at each failed (re)connect and, with no listener, prints each raw to
    // stderr, with no word in the worker's log: one warning when the connection goes down, one
    // line when it is back (test/wakeups.spec.ts, "Redis: a subscription connection that cannot
    // connect logs one warning").
    let down = false;
    // 'error' is not in RedisLike's `on` (an adapter written to it needs only 'message' and
    // 'ready'), and one that refuses other events must not end the worker (test/wakeups.spec.ts,
    // "Redis: an adapter whose on() refuses "error", or whose disconnect() rejects, ends nothing").
    try {
      (sub as unknown as { on(event: 'error', listener: (err: Error) => void): unknown }).on('error', (err: Error) => {
        if (down) return;
        down = true;
        logger.warn({ err }, 'Redis wakeups: the connection failed; reconnecting (the safety poll, and NOTIFY when listening, still wake the claimer)');
      });
    } catch {
      /* an adapter without 'error': its failures are its own to report */
    }
    sub.on('ready', () => {
      if (down) {
        down = false;
        logger.info('Redis wakeups: connected again');
      }
      if (!inFlight) void subscribe('at a connect');
    });
    void subscribe('at start');
    return () => {
      unsubscribed = true;
      // disconnect() where there is one: while the server is unreachable a QUIT waits in ioredis'
      // offline queue and the reconnect timer keeps the process alive (test/wakeups.spec.ts).
      // An adapter's disconnect may return a promise (node-redis' does): a rejection is dropped.
      const closed: unknown = typeof sub.disconnect === 'function' ? sub.disconnect() : sub.quit();
      if (closed instanceof Promise) closed.catch(() => undefined);
    };
  });
}

/** A client-side publisher for {@link redisWakeups}: fire and forget. */
export function redisPublisher(redis: RedisLike): (namespace: string) => void {
  return (namespace) => {
    redis.publish(redisChannel(namespace), '1').catch(() => undefined);
  };
}
