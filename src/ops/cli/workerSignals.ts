/*
 * `acta worker`'s SIGINT and SIGTERM (docs/operating.md, "Workers in production", Signals): the
 * first stops the worker gracefully, exit 0; a second exits 1 at once, but only while something is
 * still held or stopping. Installed before the start's slow parts (loading the module, connect():
 * seconds on a new embedded folder), so a signal then ends the start cleanly instead of killing the
 * process (test/faults/workerSignals.test.ts).
 */
import type { Logger } from '../../logger';

export interface WorkerSignals {
  /** A signal has come: the start ends at its next step (close what it opened, exit 0). */
  readonly stopping: boolean;
  /** The worker to stop on a signal, once created; a signal already come stops it at once. */
  attach(worker: { stop(): Promise<void> }): void;
  /** The stop completed, nothing is held: a later signal leaves the exit under way as it is. */
  stopped(): void;
}

export function installWorkerSignals(logger: Logger): WorkerSignals {
  let signals = 0;
  let done = false;
  let worker: { stop(): Promise<void> } | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (done) return;
    signals++;
    if (signals > 1) {
      logger.warn({ signal }, worker ? 'second signal: exiting at once; held rows return through recovery' : 'second signal: exiting at once, during the start');
      process.exit(1);
    }
    logger.info({ signal }, 'signal: stopping gracefully (send it again to exit at once)');
    void worker?.stop();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    get stopping() {
      return signals > 0;
    },
    attach(w) {
      worker = w;
      if (signals > 0) void w.stop();
    },
    stopped() {
      done = true;
    },
  };
}
