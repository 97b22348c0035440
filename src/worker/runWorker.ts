import { from, Observable, type ObservableInput, take } from 'rxjs';
import { ConfigError } from '../errors';
import type { WorkerEvent } from './events';
import { createWorker, type Worker } from './worker';
import type { WorkerOptions } from './workerOptions';

/** Options of {@link runWorker$}: a worker's options, and what ends it. */
export interface RunWorkerOptions extends WorkerOptions {
  /** Its first emission stops the worker gracefully; the stream completes once the stop has finished (after the `stopped` event). */
  stop$?: ObservableInput<unknown>;
}

/**
 * A worker as an Observable of its events (docs/DESIGN.md, "The Rx surface"; docs/rx.md).
 * Each subscription creates and starts a NEW worker (a new incarnation: a fresh id) and emits its
 * events (`worker.events$`: `running` once it has registered, `stopped` last).
 *
 * - Completes after a graceful stop has finished: when `stop$` emits.
 * - Errors when the worker cannot start (ConfigError at once; SchemaNotMigratedError,
 *   SchemaNewerError, or a database unreachable for a lease, from `start()`), or when it stops
 *   itself (no heartbeat for a lease, a non-transient error, HookFailedError): so `retry`
 *   starts a new incarnation, after the old one has ended.
 * - Unsubscribing (`takeUntil`, `take`, an unsubscribed `merge`) stops the worker gracefully;
 *   the stop cannot be awaited there: it runs on and logs "worker stopping" and "worker stopped".
 *
 * With `metricsRegistry`, an incarnation's metrics are removed from it when the worker has ended,
 * so the next one (`retry`, `repeat`) can register its own; a new subscription made while the
 * previous worker is still stopping (a resubscription right after an unsubscription) fails with
 * prom-client's "already registered" as a ConfigError.
 */
export function runWorker$(options: RunWorkerOptions): Observable<WorkerEvent> {
  return new Observable<WorkerEvent>((subscriber) => {
    const { stop$, ...workerOptions } = options;
    let worker: Worker;
    try {
      worker = createWorker(workerOptions);
    } catch (err) {
      subscriber.error(asConfigError(err));
      return undefined;
    }
    const events = worker.events$.subscribe((event) => subscriber.next(event));
    /** The worker has ended: its metrics leave a shared registry, then the stream ends. */
    const ended = (err?: unknown) => {
      if (workerOptions.metricsRegistry) worker.metrics.unregister();
      if (err === undefined) subscriber.complete();
      else subscriber.error(err);
    };
    worker.start().then(
      () => worker.done.then(() => ended(), ended),
      ended,
    );
    const stopping = stop$ === undefined ? undefined : from(stop$).pipe(take(1)).subscribe(() => void worker.stop());
    return () => {
      stopping?.unsubscribe();
      events.unsubscribe();
      void worker.stop();
    };
  });
}

/** prom-client's "already registered" (a shared metricsRegistry in use by a worker still stopping) as a ConfigError. */
function asConfigError(err: unknown): unknown {
  if (err instanceof Error && /already been registered/.test(err.message)) {
    return new ConfigError(`metricsRegistry: ${err.message} (a worker that registered there is still running or stopping)`);
  }
  return err;
}
