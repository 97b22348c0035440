import type { Logger } from 'pino';
import { finalize, type SchedulerLike, type Subscription } from 'rxjs';
import { type LeaseClock, PIPELINE } from '../config';
import type { PassSchedule } from '../db/types';
import type { Ledger } from '../ledger';
import type { UnparsableSchedule } from '../recurring/schedules';
import type { WorkerMetrics } from './metrics';
import { recoveryPass } from './recovery';

/** What the worker's periodic passes need; worker.ts wires them. */
export interface WorkerPassesDeps {
  ledger: Ledger;
  namespace: string;
  clock: LeaseClock;
  logger: Logger;
  metrics: WorkerMetrics;
  /** The worker's wakeups of its claimer: rows a recovery returned are due. */
  wakeups: { next(): void };
  scheduler: SchedulerLike;
  random: () => number;
}

/** The periodic passes one worker runs. */
export interface WorkerPasses {
  /** Each pass with its interval: what the registration and each beat send. */
  readonly schedules: PassSchedule[];
  /** Runs the pass named (the registration or a beat took it); a name this worker does not run is ignored. */
  readonly start: (name: string) => void;
  /** The schedules pass: one at a time; a failure is logged and the next pass tries again. */
  readonly armSchedules: () => Promise<void>;
  /** Ends a recovery pass still running (the worker's teardown). */
  readonly close: () => void;
}

/**
 * The periodic passes this worker runs, taken by whichever worker's beat finds one due
 * (acta.take_passes, migration 0007): a new pass is an entry here and its function.
 */
export function workerPasses(deps: WorkerPassesDeps): WorkerPasses {
  const { ledger, namespace, clock, logger, metrics, wakeups, scheduler, random } = deps;
  const recoveries = new Set<Subscription>();

  // A stored schedule this worker cannot parse stays unarmed: said once per schedule and spec, not
  // at every pass (test/recurring/unparsable.test.ts).
  const unparsableSaid = new Set<string>();
  const onUnparsable = (u: UnparsableSchedule) => {
    const key = JSON.stringify([u.name, u.cron, u.timeZone]);
    if (unparsableSaid.has(key)) return;
    if (unparsableSaid.size > 1_000) unparsableSaid.clear();
    unparsableSaid.add(key);
    logger.warn(
      { schedule: u.name, cron: u.cron, timeZone: u.timeZone, err: u.err, namespace },
      `a stored schedule this worker cannot parse (a zone its Node's ICU does not know, or a cron a newer build accepted) stays unarmed: upgrade this worker's Node, or change the schedule`,
    );
  };

  let arming: Promise<void> | undefined;
  const armSchedules = (): Promise<void> =>
    (arming ??= Promise.resolve(ledger.armSchedules?.(namespace, onUnparsable))
      .then((armed) => {
        if (armed) logger.debug({ armed }, 'schedules armed');
      })
      .catch((err: unknown) => logger.warn({ err }, 'schedules pass failed; the next pass arms them'))
      .finally(() => {
        arming = undefined;
      }));

  const runRecovery = () => {
    if (recoveries.size > 0) return; // the pass still running sweeps on until it finds no more
    const subscription = recoveryPass({
      recover: (limit) => ledger.recoverJobs({ namespace, deadAfterMs: clock.workerDeadAfterMs, limit }),
      logger: logger.child({ component: 'recovery' }),
      onRecovered: (rows) => {
        for (const r of rows) metrics.recovered.inc({ charged: String(r.charged) });
        wakeups.next();
      },
      retryInitialMs: Math.min(1_000, clock.heartbeatIntervalMs / 4),
      retryMaxMs: Math.min(clock.heartbeatIntervalMs, PIPELINE.unreachableRetryMaxMs),
      scheduler,
      random,
    })
      .pipe(finalize(() => recoveries.delete(subscription)))
      .subscribe();
    if (!subscription.closed) recoveries.add(subscription);
  };

  const passes: { schedule: PassSchedule; run: () => void }[] = [
    { schedule: { name: 'recovery', intervalMs: clock.recoveryIntervalMs }, run: runRecovery },
    // Arms the namespace's schedules that need a fire (added, changed, resumed, or whose fire ended
    // outside a completion: docs/schedules.md), every heartbeat interval.
    { schedule: { name: 'schedules', intervalMs: clock.heartbeatIntervalMs }, run: () => void armSchedules() },
  ];
  return {
    schedules: passes.map((p) => p.schedule),
    start: (name) => passes.find((p) => p.schedule.name === name)?.run(),
    armSchedules,
    close: () => {
      for (const s of recoveries) s.unsubscribe();
      recoveries.clear();
    },
  };
}
