import { randomUUID } from 'node:crypto';
import { createWorkflow, ledgerWorkflowStore } from '../workflows/workflow';
import type { Server } from 'node:http';
import { BehaviorSubject, combineLatest, defer, EMPTY, filter, map, merge, type Observable, skip, Subject, Subscription, takeUntil, tap } from 'rxjs';
import { PIPELINE } from '../config';
import { completionsWritten } from './completionsWritten';
import { type Completion, handBackCompletion, runEntry, type ExecutorDeps } from './executor';
import { fatalStop } from './fatalStop';
import { Finalizer } from './finalizer';
import { gracefulStop } from './gracefulStop';
import { heartbeat } from './heartbeat';
import { ConfigError, type HookFailedError } from '../errors';
import { type WorkerEvent, WorkerEvents } from './events';
import { serveMetrics, WorkerMetrics } from './metrics';
import { ALERTS_NAME, alertMetric } from '../recurring/alerts';
import { outboxPoker } from '../recurring/outbox';
import { Permits } from './permits';
import { pipeline } from './pipeline';
import { createPolicies } from '../policies/policies';
import { ProgressReporter } from './progress';
import { register, type Registration } from './register';
import { type Entry, Registry } from './registry';
import { createStep, persistentCall } from './steps';
import { Timeouts } from './timeouts';
import { notifyWakeups, redisWakeups } from './wakeups';
import { workerPasses } from './workerPasses';
import { type WorkerOptions, workerSettings } from './workerOptions';

export type { WorkerOptions } from './workerOptions';

/** A running worker. */
export interface Worker {
  /** This incarnation's id (a fresh UUID per start; DESIGN.md: a restarted process never renews its old rows). */
  readonly id: string;
  readonly metrics: WorkerMetrics;
  /** Checks the schema, registers, and starts the pipeline. Throws SchemaNotMigratedError on an unmigrated schema. */
  start(): Promise<void>;
  /**
   * Graceful stop: claims nothing more, hands back unstarted claims at once, waits up to the
   * shutdown timeout for running handlers, then aborts them and hands their rows back uncharged,
   * writes every completion, and marks the worker stopped. Idempotent.
   */
  stop(): Promise<void>;
  /** Resolves after stop(); rejects if the worker had to stop itself (no heartbeat for a lease, non-transient error). */
  readonly done: Promise<void>;
  /** Ends the claimer's idle sleep now (e.g. after enqueueing in the same process). */
  wake(): void;
  /** The metrics server's port, when `metricsPort` was given, until a stop begins (it closes the server then). */
  readonly metricsServerPort?: number;
  /**
   * What the worker does, as typed events (events.ts, WorkerEvent; docs/reference.md, "Events"):
   * hot, nothing is replayed; `stopped` is the last, then it completes. Built only while
   * subscribed: with no subscriber it costs the hot path close to nothing.
   */
  readonly events$: Observable<WorkerEvent>;
}

/**
 * Creates a worker (docs/DESIGN.md, "The pipeline inside one worker"): its pipeline (pipeline.ts:
 * claimer → executors as `mergeMap(run, N)` → finalizer), the heartbeat that renews what
 * the registry holds and runs the periodic passes it takes (workerPasses.ts), and the lifecycle around them: start
 * (schema check, registration: register.ts), graceful stop (gracefulStop.ts, shutdown.ts) and the fatal stop
 * (fatalStop.ts). Throws ConfigError, before touching the database, for options workerSettings refuses.
 */
export function createWorker(options: WorkerOptions): Worker {
  const settings = workerSettings(options);
  const { ledger, definitions, names, executors, safetyPollMs, shutdownTimeoutMs, clock, namespace, scheduler, random } = settings;
  const id = randomUUID();
  const logger = settings.logger.child({ workerId: id });

  const registry = new Registry();
  const permits = new Permits(executors);
  /** The definitions as the namespace's policies apply them (policies.ts), reloaded by the heartbeat. */
  const policies = createPolicies({ ledger, namespace, definitions, logger: logger.child({ component: 'policies' }) });
  /** The heartbeat succeeds: claims are made only while it does. */
  const healthy = new BehaviorSubject<boolean>(true);
  /** The LISTEN connection is up (or not used). */
  let listening = true;
  const countJobs = ledger.countJobs?.bind(ledger);
  const metrics = new WorkerMetrics(
    {
      inflight: registry,
      permits,
      degraded: () => !healthy.value || !listening,
      jobs: countJobs && { namespace, definitions: names, count: (cap) => countJobs(namespace, cap), now: () => scheduler.now() },
      // The fleet's alerts as sys.alerts left them, on every worker that declares it (docs/alerts.md).
      extra: definitions.has(ALERTS_NAME) ? () => [alertMetric(ledger, namespace, [])] : undefined,
    },
    settings.metricsRegistry,
  );
  const events = new WorkerEvents(settings.events);
  /** A hook's failure (HookFailedError): the worker stops gracefully and `done` rejects with it. */
  let failure: HookFailedError | undefined;
  /** The worker's own wakeups of its claimer (a retry became due, a recovery returned rows, wake()). */
  const wakeups = new Subject<void>();
  /** Signs that the database answers again, while the heartbeat fails: its retry tries at once. */
  const reachable = new Subject<void>();
  const sawDatabase = () => {
    if (!healthy.value) reachable.next();
  };
  const stopClaiming = new Subject<void>();
  /** stop() during start(): ends the registration's retries at once. */
  const cancelStart = new Subject<void>();
  const stopAll = new Subject<void>();
  /** A stop's shutdown timeout passed: completions aroundHandler holds go on to the write (hooks.ts). */
  const releaseHeld = new Subject<void>();
  /** Completions no executor makes: rows handed back at shutdown. Completing it closes the finalizer. */
  const handBacks = new Subject<Completion>();
  const subscriptions: Subscription[] = [];
  let metricsServer: Server | undefined;
  let state: 'new' | 'starting' | 'running' | 'stopping' | 'stopped' = 'new';
  let starting: Promise<void> | undefined;
  let stopping: Promise<void> | undefined;
  let claimInFlight: Promise<unknown> = Promise.resolve();
  /** Scheduler time of the registration's start: the first confirmed renewal (register_worker.sql). */
  let registeredAt = scheduler.now();
  const registration: Registration = { call: Promise.resolve(), sent: false, duePasses: [] };
  let executorsDone: Promise<void> = Promise.resolve();
  let finalizerDone: Promise<void> = Promise.resolve();
  /** Settles the two promises above when the pipeline is torn down instead of completing. */
  const settleOnTeardown: (() => void)[] = [];
  let resolveDone!: () => void;
  let rejectDone!: (err: unknown) => void;
  const done = new Promise<void>((resolve, reject) => {
    resolveDone = resolve;
    rejectDone = reject;
  });
  done.catch(() => undefined); // a caller that never awaits `done` must not see an unhandled rejection
  // Ended (stopped, stopped itself, or failed to start): its metrics leave a registry it was given,
  // so a worker created after it can register there (test/metrics.spec.ts).
  if (settings.metricsRegistry) {
    const leave = () => metrics.unregister();
    void done.then(leave, leave);
  }
  done.then(
    () => events.stopped(id),
    (err: unknown) => events.stopped(id, err),
  );

  // ---- The batch window's "more is coming" -------------------------------------------------
  /** The last claim took every row it asked for: the backlog goes on. */
  let lastClaimFull = false;
  /** Completions may still come to fill a batch: an attempt is held and not yet handed over, or the last claim came back full. */
  const moreComing = new BehaviorSubject<boolean>(false);
  const updateMoreComing = () => {
    const more = registry.size > finalizer.backlog || lastClaimFull;
    if (more !== moreComing.value) moreComing.next(more);
  };

  /** After each written batch, the finalizer's or a fatal stop's last try: registry, metrics, events$. */
  const onWritten = completionsWritten({ registry, metrics, logger, events, sawDatabase, wakeups });
  const finalizer = new Finalizer({
    executors,
    logger: logger.child({ component: 'finalizer' }),
    scheduler,
    random,
    write: (rows) => ledger.completeExecutions(id, rows),
    onRetry: () => metrics.writeRetries.inc(),
    // The heartbeat succeeding again after failures: a write waiting up to 30 s is repeated now.
    retryNow$: healthy.pipe(skip(1), filter(Boolean)),
    moreComing$: moreComing,
    onWritten,
  });

  /** One claim call: what it claims is registered (state Claimed) before the claimer hands it on. */
  const claim = (n: number) =>
    defer(() => {
      const startedAt = scheduler.now();
      const end = metrics.claimDuration.startTimer();
      const call = ledger.claimJobs({ namespace, workerId: id, definitions: names, limit: n, leaseMs: clock.leaseMs }).then((result) => {
        end();
        metrics.claimRowsAsked.inc(n);
        metrics.claimRowsClaimed.inc(result.rows.length);
        const answeredAt = scheduler.now();
        events.claimed(n, result.rows.length, answeredAt - startedAt);
        // A job this worker still runs, claimed again (the server lost the earlier claim; the row came
        // back by recovery): addClaimed aborts that attempt as lost, and events$ tells it so (unless a
        // heartbeat told it already), before anything of the new one (test/events.spec.ts, "claims
        // again while it runs").
        const superseded = events.observed ? result.rows.map((row) => registry.get(row.id)).filter((e): e is Entry => e !== undefined && e.completion === undefined && e.abortCause !== 'lost') : [];
        const entries = registry.addClaimed(result.rows, startedAt + clock.attemptDeadlineMs, answeredAt);
        for (const entry of superseded) events.leaseLost(entry);
        lastClaimFull = result.rows.length > 0 && result.rows.length === n;
        updateMoreComing();
        return { rows: entries, nextDueInMs: result.nextDueInMs };
      });
      claimInFlight = call.catch(() => {
        lastClaimFull = false;
        updateMoreComing();
      });
      return call;
    });

  /**
   * A client cancelled a job this worker runs (NOTIFY 'cancel:…', or the heartbeat's 'cancel'):
   * the attempt is aborted with cause 'cancelled'; its completion ends the job Cancelled. An entry
   * still in the claimer's hands is written by its executor, which sees the cause before the handler.
   */
  const cancelAttempt = (jobId: string, execution: number) => {
    const entry = registry.get(jobId);
    if (!entry || entry.row.execution !== execution || entry.state === 'finalizing' || entry.aborted) return;
    logger.info({ jobId, execution, state: entry.state }, 'job cancelled by a client: aborting the attempt');
    registry.abort(entry, 'cancelled');
  };

  /** Hands an entry no executor will write for back uncharged; false when it is not: handed back already, no longer held, or the worker gave up (fatal() hands its rows back itself). */
  const handBack = (entry: Entry): boolean => {
    if (state === 'stopped' || entry.state === 'finalizing' || !registry.isCurrent(entry)) return false;
    entry.state = 'finalizing';
    handBacks.next((entry.completion = handBackCompletion(entry)));
    updateMoreComing();
    return true;
  };

  /** An executor's permit comes back: after its completion (or hand-back) entered the finalizer's channel. */
  const release = () => {
    permits.release(1);
    updateMoreComing();
  };

  const passes = workerPasses({ ledger, namespace, clock, logger, metrics, wakeups, scheduler, random });

  /**
   * Frees the metrics port when a stop begins (graceful or fatal) or a start fails, not when the
   * stop ends: a worker started next on the port (a switchMap restart of runWorker$) listens at
   * once, and this one's metrics are no longer served (test/db/runWorker.test.ts, "metricsPort").
   */
  const closeMetricsServer = () => {
    metricsServer?.close();
    metricsServer = undefined;
  };

  const teardown = () => {
    stopClaiming.next();
    stopAll.next();
    for (const s of subscriptions) s.unsubscribe();
    subscriptions.length = 0;
    passes.close();
    for (const settle of settleOnTeardown.splice(0)) settle();
    closeMetricsServer();
  };

  /** The worker gives up (fatalStop.ts): it marks itself stopped at once, so a later stop() or fatal does nothing more. */
  const fatal = (err: unknown) => {
    if (state === 'stopped' || state === 'new') return;
    state = 'stopped';
    fatalStop(err, { registry, logger, scheduler, heartbeatIntervalMs: clock.heartbeatIntervalMs, teardown, write: (rows) => ledger.completeExecutions(id, rows), rejectDone, onWritten });
  };

  /** Starts the pipeline and the heartbeat (after a successful registration). */
  const run = () => {
    const wakeupsLogger = logger.child({ component: 'wakeups' });
    /** Each connect of the listening connection, the first too: the heartbeat beats at once then. */
    const listening$ = new Subject<void>();
    // sys.outbox's prompt path (src/recurring/outbox.ts): a pass at each publish's wakeup.
    const outbox = settings.outbox && outboxPoker({ ledger, namespace, ...settings.outbox, scheduler, logger: logger.child({ component: 'outbox' }) });
    if (outbox) subscriptions.push(new Subscription(() => outbox.close()));
    // Events published while no worker listened: fanned out at start and after each reconnect.
    outbox?.poke();
    const wakeup$ = merge(
      wakeups,
      !settings.listen
        ? EMPTY
        : notifyWakeups(ledger, namespace, wakeupsLogger, {
            workerId: id,
            onCancel: cancelAttempt,
            onOutbox: outbox ? outbox.poke : undefined,
            // Found within interval + timeout (5 s): about 15 s at the default H.
            probeIntervalMs: Math.max(1_000, Math.min(10_000, clock.heartbeatIntervalMs)),
            onListening: (up) => {
              listening = up;
              events.health('listener', up);
              if (!up) return;
              outbox?.poke();
              metrics.listenerReconnects.inc();
              sawDatabase();
            },
          }).pipe(tap((wakeup) => wakeup === 'connect' && listening$.next())),
      settings.redis ? redisWakeups(settings.redis, namespace, wakeupsLogger) : EMPTY,
    );
    const claimerLogger = logger.child({ component: 'claimer' });
    const progress = new ProgressReporter((rows) => ledger.reportProgress(id, rows), registry, scheduler, logger.child({ component: 'progress' }));
    subscriptions.push(new Subscription(() => progress.close()));
    const executorDeps: ExecutorDeps = {
      definitions: policies.definitions,
      registry,
      logger: logger.child({ component: 'executor' }),
      scheduler,
      timeouts: new Timeouts(scheduler),
      stepFor: (entry) => createStep(ledger, id, entry, registry, scheduler),
      workflowFor: (entry) => createWorkflow(ledgerWorkflowStore(ledger, id, entry, persistentCall(entry, scheduler), { name: namespace, runs: definitions, db: settings.db }), entry, registry, scheduler),
      // Times are recorded only for what reads them: the hooks' views, an events$ subscriber.
      onStart: (entry) => {
        if (!settings.hooks && !events.observed) return;
        entry.startedAt = scheduler.now();
        events.started(entry);
      },
      onEnd: (entry) => {
        if (entry.startedAt >= 0) entry.endedAt = scheduler.now();
      },
      progress: (entry, value) => progress.report(entry, value),
      settleProgress: (entry) => progress.settle(entry),
    };

    let executorsEnded!: () => void;
    executorsDone = new Promise<void>((resolve) => (executorsEnded = resolve));
    settleOnTeardown.push(executorsEnded);
    finalizerDone = new Promise<void>((resolve) => {
      settleOnTeardown.push(resolve);
      subscriptions.push(
        pipeline({
          claimer: {
            permits,
            wakeup$,
            // Backpressure and health: no claims while the completed channel is full or the heartbeat fails.
            intakeOpen$: combineLatest([finalizer.intakeOpen$, healthy]).pipe(map(([room, ok]) => room && ok)),
            claim,
            safetyPollMs,
            pollFloorMs: PIPELINE.pollFloorMs,
            jitterMs: PIPELINE.idleJitterMs,
            scheduler,
            random,
            onClaimError: (err) => claimerLogger.warn({ err }, 'claim failed; backing off one safety poll'),
          },
          stopClaiming$: stopClaiming,
          executors,
          // The permit goes back after the completion entered the finalizer's channel (pipeline.ts).
          run: (entry, settled) => runEntry(entry, executorDeps, settled),
          release,
          handBack,
          handBacks$: handBacks,
          finalizer,
          hooks: settings.hooks && {
            hooks: settings.hooks,
            scheduler,
            logger: logger.child({ component: 'hooks' }),
            holdLimitMs: clock.attemptDeadlineMs,
            releaseHeld$: releaseHeld,
            onFailure: (err) => {
              failure ??= err;
              void worker.stop();
            },
          },
          onExecutorsDone: executorsEnded,
        }).subscribe({ error: fatal, complete: resolve }),
      );
    });
    // The registration was the first beat (it took the passes that were due: a recovery pass is a catch-up
    // for a fleet that was down; started below, after the first claim has its connection); the
    // heartbeat beats every H from it.
    subscriptions.push(
      heartbeat({
        registry,
        clock,
        beat: (held) => ledger.heartbeat({ workerId: id, namespace, held, leaseMs: clock.leaseMs, passes: passes.schedules }),
        startPass: passes.start,
        onPolicyVersion: (version) => policies.versionSeen(version),
        onHealth: (ok) => {
          if (!ok) metrics.heartbeatFailures.inc();
          healthy.next(ok);
          events.health('heartbeat', ok);
        },
        onLost: (entry) => events.leaseLost(entry),
        onCancel: (pair) => cancelAttempt(pair.id, pair.execution),
        onFatal: fatal,
        logger: logger.child({ component: 'heartbeat' }),
        scheduler,
        random,
        startedAt: registeredAt,
        reachable$: reachable,
        listening$,
      })
        .pipe(takeUntil(stopAll))
        .subscribe({ error: fatal }),
    );
    for (const name of registration.duePasses) passes.start(name);
  };

  const worker: Worker = {
    id,
    metrics,
    done,
    get metricsServerPort() {
      const address = metricsServer?.address();
      return address && typeof address === 'object' ? address.port : undefined;
    },
    wake: () => wakeups.next(),
    events$: events.events$,

    start() {
      if (state !== 'new') return Promise.reject(new ConfigError('a worker starts once; create another to start again'));
      state = 'starting';
      starting = (async () => {
        registeredAt = scheduler.now();
        try {
          // The metrics server first: a start that fails on it (a port in use) has not registered,
          // so it leaves no live worker row and takes no recovery pass it would never run.
          if (settings.metricsPort !== undefined) {
            metricsServer = await serveMetrics(metrics.registry, settings.metricsPort);
            // stop() came while it opened: its cancel of the registration's retries has passed,
            // so nothing is registered at all (test/stopDuringStart.test.ts).
            if (state !== 'starting') {
              closeMetricsServer();
              return;
            }
          }
          await register({ settings, id, logger, passes: passes.schedules, policies, armSchedules: passes.armSchedules, registration, starting: () => state === 'starting', cancel$: cancelStart });
        } catch (err) {
          closeMetricsServer();
          state = 'stopped';
          events.stopped(id, err);
          resolveDone();
          throw err;
        }
        if (state !== 'starting') return; // stop() was called meanwhile: it waits for us
        state = 'running';
        run();
        events.running(id, namespace);
        logger.info({ namespace, executors, heartbeatIntervalMs: clock.heartbeatIntervalMs, leaseMs: clock.leaseMs, definitions: names, metricsPort: worker.metricsServerPort }, 'worker started');
      })();
      return starting;
    },

    stop() {
      if (state === 'new') {
        state = 'stopped';
        resolveDone();
        return Promise.resolve();
      }
      if (stopping) return stopping;
      if (state === 'stopped') return done.catch(() => undefined);
      const wasStarting = state === 'starting';
      state = 'stopping';
      closeMetricsServer();
      stopping = gracefulStop({
        id,
        ledger,
        namespace,
        logger,
        scheduler,
        shutdownTimeoutMs,
        duringStart: wasStarting ? { cancel: () => cancelStart.next(), starting, registration } : undefined,
        idle: () => registry.size === 0 && subscriptions.length === 0,
        shutdown: {
          registry,
          logger,
          scheduler,
          shutdownTimeoutMs,
          stopClaiming: () => stopClaiming.next(),
          claimInFlight: () => claimInFlight,
          handBack,
          executorsDone: () => executorsDone,
          closeFinalizer: () => handBacks.complete(),
          finalizerDone: () => finalizerDone,
          abandonFinalizer: () => finalizer.abandon(),
          releaseHeld: () => releaseHeld.next(),
        },
        stopping: () => state === 'stopping',
        teardown,
        markStopped: () => {
          state = 'stopped';
        },
        settleDone: () => {
          if (failure) rejectDone(failure);
          else resolveDone();
        },
      });
      return stopping;
    },
  };
  return worker;
}
