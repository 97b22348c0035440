import * as os from 'node:os';
import type { Logger } from 'pino';
import { defer, firstValueFrom, type Observable, takeUntil, throwError, timeout } from 'rxjs';
import { retryBackoff } from '../../operators';
import { PIPELINE } from '../config';
import { embeddedHolder } from '../db/connectShared';
import { dbWaiting } from '../db/pgDb';
import { isTransientDbError } from '../db/transient';
import type { PassSchedule } from '../db/types';
import { declaredPolicy, schedulesOf } from '../definition';
import { StartTimeoutError } from '../errors';
import { retryErrorFields } from '../logger';
import type { Policies } from '../policies/policies';
import type { WorkerSettings } from './workerOptions';

/** What a start's registration left, for the stop and the run that follow it. */
export interface Registration {
  /** The registration call in flight: stop() during start() waits for it before marking the worker stopped. */
  call: Promise<void>;
  /** The registration call was made (it may commit even if its answer is lost): a stop during the start undoes it. */
  sent: boolean;
  /** The passes the registration took: run() starts them. */
  duePasses: string[];
}

/** What the registration needs; worker.ts wires it. */
export interface RegisterDeps {
  settings: WorkerSettings;
  id: string;
  logger: Logger;
  /** The periodic passes this worker runs, as registered. */
  passes: PassSchedule[];
  policies: Policies;
  armSchedules: () => Promise<void>;
  /** Written as the registration goes. */
  registration: Registration;
  /** The worker is still starting: false once stop() came. */
  starting: () => boolean;
  /** stop() during start(): ends the registration's retries at once. */
  cancel$: Observable<void>;
}

/**
 * Schema check and registration; a transient error is repeated with back-off, the first one
 * logged at once, until `startTimeoutMs` after the start: then StartTimeoutError (a call still
 * in flight is left to land, and its registration is undone: stopWorker).
 */
export function register(deps: RegisterDeps): Promise<void> {
  const { settings, id, logger, policies, registration } = deps;
  const { ledger, namespace, names, definitions, clock, scheduler, random } = settings;
  let lastError: unknown;
  let timedOut = false;
  return firstValueFrom(
    defer(() => {
      registration.call = (async () => {
        await ledger.assertReady();
        if (!deps.starting() || timedOut) return; // stop() or the start timeout came meanwhile: do not register at all
        const taken = await takenScheduleNames(settings);
        registration.sent = true;
        const registered = await ledger.registerWorker({
          workerId: id,
          namespace,
          hostname: os.hostname(),
          pid: process.pid,
          definitions: names,
          maxAttempts: settings.maxAttempts,
          leaseMs: clock.leaseMs,
          passes: deps.passes,
          build: settings.build,
          policies: Object.fromEntries([...definitions].map(([name, d]) => [name, declaredPolicy(d)])),
        });
        registration.duePasses = registered.duePasses;
        for (const t of taken) {
          logger.warn(
            { ...t, namespace },
            "a declared schedule has the name of another definition's schedule in the namespace: one name is one schedule, the newest declaration wins and the other definition's fires stop; moved to this definition in this deploy, nothing to do, else give one of them another name",
          );
        }
        await policies.load();
        // An onAlert no worker of the namespace declares is likely a typo: its alert jobs would wait
        // until one does (docs/alerts.md). Said, not refused: another service may declare it later.
        if (settings.onAlertElsewhere !== undefined && (await ledger.loadPolicies(namespace, [settings.onAlertElsewhere])).policies.length === 0) {
          logger.warn({ onAlert: settings.onAlertElsewhere, namespace }, 'alerts.onAlert names a definition no worker of the namespace has declared: its alert jobs wait until one does');
        }
        // Declared schedules this registration added or changed are armed at once (a worker
        // that declares none changes nothing to arm: the pass finds the rest).
        if ([...definitions.values()].some((d) => d.schedule !== undefined)) await deps.armSchedules();
      })();
      return registration.call;
    }).pipe(
      retryBackoff<void>({
        initialMs: Math.min(1_000, clock.heartbeatIntervalMs / 4),
        maxMs: Math.min(clock.heartbeatIntervalMs, PIPELINE.unreachableRetryMaxMs),
        jitter: 0.25,
        shouldRetry: (err: unknown) => {
          lastError = err;
          return isTransientDbError(err);
        },
        onRetry: (err, retry, delayMs) =>
          logger.warn(
            { ...retryErrorFields(err, retry), retry, delayMs, startTimeoutMs: settings.startTimeoutMs },
            'worker start: the database has not been reached since the start; repeating until startTimeoutMs',
          ),
        scheduler,
        random,
      }),
      // The start's bound (WorkerOptions.startTimeoutMs; test/startTimeout.spec.ts).
      timeout({
        first: settings.startTimeoutMs,
        scheduler,
        with: () => {
          timedOut = true;
          // No error yet: what the Db still waits on, when it can say (a connect whose connect_timeout is later).
          const unanswered = lastError === undefined ? dbWaiting(settings.db) : undefined;
          // Through an embedded folder's holder: named, not the server's address (test/faults/embeddedHolder.test.ts).
          const err = new StartTimeoutError(settings.startTimeoutMs, lastError, unanswered, embeddedHolder(settings.db), isTestScheduler(scheduler));
          logger.error({ err: lastError, unanswered, startTimeoutMs: settings.startTimeoutMs }, 'worker start: the database was not reached within startTimeoutMs; giving up');
          // The call in flight may still register this worker: undo it when it lands.
          void registration.call.then(async () => {
            if (registration.duePasses.length > 0) await ledger.releasePasses(namespace, registration.duePasses);
            await ledger.stopWorker(id);
          }).catch(() => undefined);
          return throwError(() => err);
        },
      }),
      takeUntil(deps.cancel$),
    ),
    { defaultValue: undefined },
  );
}

/** An rxjs/testing TestScheduler, told by its own methods (not imported: rxjs/testing stays out of a worker). */
function isTestScheduler(scheduler: unknown): boolean {
  return typeof (scheduler as { createHotObservable?: unknown }).createHotObservable === 'function';
}

/**
 * The schedules this worker declares whose name the namespace has as another definition's declared
 * schedule, one this worker does not run (read before the registration reconciles them). A
 * schedule's name is one schedule in the namespace (docs/schedules.md, "Declared schedules:
 * reconciliation"): createWorker refuses two of one worker; two services' workers would otherwise
 * take one row from each other in silence (test/recurring/scheduleNames.test.ts).
 */
async function takenScheduleNames(settings: WorkerSettings): Promise<{ schedule: string; definition: string; storedDefinition: string }[]> {
  const declared = [...settings.definitions.values()].flatMap((d) => (d.schedule === undefined ? [] : schedulesOf(d).map((s) => ({ schedule: s.name, definition: d.name }))));
  if (declared.length === 0 || !settings.ledger.listSchedules) return [];
  const stored = new Map((await settings.ledger.listSchedules(settings.namespace)).filter((s) => s.source === 'declared').map((s) => [s.name, s.definition]));
  return declared.flatMap((d) => {
    const other = stored.get(d.schedule);
    return other === undefined || settings.definitions.has(other) ? [] : [{ ...d, storedDefinition: other }];
  });
}
