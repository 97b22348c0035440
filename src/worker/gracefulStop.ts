import type { Logger } from 'pino';
import type { SchedulerLike } from 'rxjs';
import type { Ledger } from '../ledger';
import type { Registration } from './register';
import { raceTimeout, shutdown, type ShutdownDeps } from './shutdown';

/** What worker.stop() drives; worker.ts wires it (after it marked the worker stopping and closed its metrics server). */
export interface GracefulStopDeps {
  id: string;
  ledger: Ledger;
  namespace: string;
  logger: Logger;
  scheduler: SchedulerLike;
  shutdownTimeoutMs: number;
  /** Given when the stop came during start(). */
  duringStart?: {
    /** Ends the registration's retries at once. */
    cancel: () => void;
    starting: Promise<void> | undefined;
    registration: Registration;
  };
  /** Nothing runs: no pipeline was started and no claim is held. */
  idle: () => boolean;
  /** The pipeline's side of the stop (shutdown.ts). */
  shutdown: ShutdownDeps;
  /** Still stopping: false once a fatal stop ended the worker meanwhile. */
  stopping: () => boolean;
  /** Ends the claimer, the heartbeat, the pipeline and the passes. */
  teardown: () => void;
  markStopped: () => void;
  /** Settles `done`: rejects with the hook failure that made the worker stop (HookFailedError), if any; resolves otherwise. */
  settleDone: () => void;
}

/**
 * The lifecycle of worker.stop() (the Worker interface's contract): a stop during start() cancels
 * the registration and undoes one that was sent; otherwise the pipeline's graceful shutdown
 * (shutdown.ts), the teardown, and the worker's row marked stopped. Never rejects.
 */
export async function gracefulStop(deps: GracefulStopDeps): Promise<void> {
  const { id, ledger, namespace, logger, scheduler, shutdownTimeoutMs } = deps;
  if (deps.duringStart) {
    const { registration } = deps.duringStart;
    deps.duringStart.cancel();
    await deps.duringStart.starting?.catch(() => undefined);
    if (deps.idle()) {
      // A registration cancelled in flight may still commit: after this stop, it would
      // leave the worker's row 'alive' (bounded: the database may be what start() waited for).
      // None was sent while the schema check still waited (none can be now): nothing to undo,
      // and no call to wait for, so a stop while the server does not answer is at once
      // (test/faults/unresponsive.test.ts).
      if (registration.sent) {
        await raceTimeout(registration.call.catch(() => undefined), shutdownTimeoutMs, scheduler);
        // Passes the registration took are not run by this worker: due again at once.
        if (registration.duePasses.length > 0) await ledger.releasePasses(namespace, registration.duePasses).catch(() => undefined);
        await ledger.stopWorker(id).catch(() => undefined);
      }
      deps.markStopped();
      deps.settleDone();
      return;
    }
  }
  logger.info({ shutdownTimeoutMs }, 'worker stopping');
  await shutdown(deps.shutdown);
  if (!deps.stopping()) return; // a fatal error ended it meanwhile
  deps.teardown();
  await ledger.stopWorker(id).catch((err) => logger.warn({ err }, 'could not mark the worker stopped'));
  deps.markStopped();
  logger.info('worker stopped');
  deps.settleDone();
}
