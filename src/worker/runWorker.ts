import { from, Observable, type ObservableInput, take } from 'rxjs';
import { ConfigError } from '../errors';
import type { WorkerEvent } from './events';
import { describeValue } from './describeValue';
import { createWorker, type Worker } from './worker';
import type { WorkerOptions } from './workerOptions';

/** Options of {@link runWorker$}: a worker's options, and what ends it. */
export interface RunWorkerOptions extends WorkerOptions {
  /** Its first emission stops the worker gracefully; the stream completes once the stop has finished (after the `stopped` event). Its error stops the worker too, and the stream then errors with it. */
  stop$?: ObservableInput<unknown>;
}

/**
 * A worker as an Observable of its events (docs/DESIGN.md, "The Rx surface"; docs/rx.md).
 * Each subscription creates and starts a NEW worker (a new incarnation: a fresh id) and emits its
 * events (`worker.events$`: `running` once it has registered, `stopped` last).
 *
 * - Completes after a graceful stop has finished: when `stop$` emits. If `stop$` errors, the
 *   worker stops gracefully too and the stream then errors with that error. A `stop$` that is
 *   not an ObservableInput errors the stream with ConfigError before any worker is made.
 * - Errors when the worker cannot start (ConfigError at once; SchemaNotMigratedError,
 *   SchemaNewerError, or a database unreachable for a lease, from `start()`), or when it stops
 *   itself (no heartbeat for a lease, a non-transient error, HookFailedError): so `retry`
 *   starts a new incarnation, after the old one has ended.
 * - Unsubscribing (`takeUntil`, `take`, an unsubscribed `merge`) stops the worker gracefully;
 *   the stop cannot be awaited there: it runs on and logs "worker stopping" and "worker stopped".
 *
 * With `metricsRegistry`, an incarnation's metrics leave it when its worker has ended (as any
 * worker's), or at once when the stream is unsubscribed (its stop runs on unseen there), so the
 * next one (`retry`, `repeat`, a `switchMap` restart) can register its own; two subscriptions at
 * once on one registry: createWorker's ConfigError (test/runWorker.spec.ts, "a switchMap restart
 * with a shared metricsRegistry"). With `metricsPort`, the old one's server closes when its stop
 * begins, so the next listens on the port at once (test/db/runWorker.test.ts).
 */
export function runWorker$(options: RunWorkerOptions): Observable<WorkerEvent> {
  return new Observable<WorkerEvent>((subscriber) => {
    if (options === null || typeof options !== 'object' || Array.isArray(options)) {
      subscriber.error(new ConfigError(`runWorker$ takes options: { db, definitions: [...], stop$? }, got ${options === undefined ? 'nothing' : describeValue(options)}`));
      return;
    }
    const { stop$, ...workerOptions } = options;
    // Checked before the worker exists: a stop$ found bad after start() would leave a running
    // worker that nothing can stop (test/runWorker.spec.ts).
    let stopInput: Observable<unknown> | undefined;
    try {
      stopInput = stop$ === undefined ? undefined : from(stop$);
    } catch {
      subscriber.error(new ConfigError(`stop$ must be an Observable, a Promise or another ObservableInput, got ${describeValue(stop$)}`));
      return undefined;
    }
    let worker: Worker;
    try {
      worker = createWorker(workerOptions);
    } catch (err) {
      subscriber.error(err);
      return undefined;
    }
    const events = worker.events$.subscribe((event) => subscriber.next(event));
    /** The worker has ended (its metrics have left a shared registry): the stream ends. */
    const ended = (err?: unknown) => {
      const failure = err ?? stopFailure?.err;
      if (failure === undefined) subscriber.complete();
      else subscriber.error(failure);
    };
    /** stop$'s error: the worker stops gracefully, as on an emission, and the stream then errors with it (as takeUntil's notifier's error does). */
    let stopFailure: { err: unknown } | undefined;
    worker.start().then(
      () => worker.done.then(() => ended(), ended),
      ended,
    );
    const stopping = stopInput?.pipe(take(1)).subscribe({
      next: () => void worker.stop(),
      error: (err: unknown) => {
        stopFailure = { err };
        void worker.stop();
      },
    });
    return () => {
      stopping?.unsubscribe();
      events.unsubscribe();
      // Unsubscribed: a resubscription (a switchMap restart) registers at once, while this one stops
      // (unregister removes only this worker's own metrics, once).
      worker.metrics.unregister();
      void worker.stop();
    };
  });
}
