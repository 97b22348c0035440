import { randomUUID } from 'node:crypto';
import * as os from 'node:os';
import type { Server } from 'node:http';
import {
  BehaviorSubject,
  combineLatest,
  defer,
  EMPTY,
  finalize,
  firstValueFrom,
  map,
  merge,
  mergeMap,
  type SchedulerLike,
  Subject,
  type Subscription,
  takeUntil,
} from 'rxjs';
import type { Registry as PromRegistry } from 'prom-client';
import { claimer } from './claimer';
import { DEFAULT_SAFETY_POLL_MS, DEFAULT_SHUTDOWN_TIMEOUT_MS, defaultExecutors, intOption, knownKeys, leaseClock, MAX_EXECUTORS, MAX_NAME_BYTES, MAX_TIMER_MS, nameOption, PIPELINE } from './config';
import type { Db } from './db/Db';
import { completeExecutions } from './db/executions';
import { claimJobs, recoverJobs } from './db/jobs';
import { releaseRecoveryPass } from './db/namespaces';
import { heartbeat as heartbeatCall, registerWorker, stopWorker } from './db/workers';
import { assertMigrated } from './db/migrator';
import { isTransientDbError } from './db/transient';
import { checkDefinition, type Definition } from './definition';
import { ConfigError } from './errors';
import { type Completion, handBackCompletion, runEntry, type ExecutorDeps } from './executor';
import { Finalizer } from './finalizer';
import { heartbeat } from './heartbeat';
import { createLogger, type Logger } from './logger';
import { serveMetrics, WorkerMetrics } from './metrics';
import { Permits } from './permits';
import { recoveryPass } from './recovery';
import { Registry } from './registry';
import { createStep } from './steps';
import { raceTimeout, shutdown } from './shutdown';
import { monotonicScheduler, retryBackoff } from '../operators';
import { Timeouts } from './timeouts';
import { notifyWakeups, type RedisLike, redisWakeups } from './wakeups';

/** The keys of WorkerOptions: createWorker refuses any other (a misspelt option is a ConfigError, not ignored). */
const WORKER_OPTION_KEYS = ['db', 'definitions', 'executors', 'namespace', 'heartbeatIntervalMs', 'safetyPollMs', 'shutdownTimeoutMs', 'listen', 'redis', 'metricsPort', 'metricsRegistry', 'logger', 'scheduler'];

/** Options of {@link createWorker}. Only H, N and the safety poll are timing knobs (DESIGN.md). */
export interface WorkerOptions {
  db: Db;
  /** The definitions this worker runs; it claims only these. */
  definitions: Definition<any, any>[];
  /** Executor count N (default 4 per core, clamped to 8..64; DESIGN.md). */
  executors?: number;
  /** Queue namespace (default "default"). */
  namespace?: string;
  /** Heartbeat interval H, ms (default 45 000); lease 4 H, deadline 2.5 H, dead after 7 H. */
  heartbeatIntervalMs?: number;
  /** Safety poll, ms (default 1 000): the longest idle sleep. */
  safetyPollMs?: number;
  /** How long stop() waits for running handlers before aborting them, ms (default 10 000). */
  shutdownTimeoutMs?: number;
  /** LISTEN for NOTIFY wakeups (default true). */
  listen?: boolean;
  /** Also take wakeups from Redis pub/sub (an ioredis client). */
  redis?: RedisLike;
  /** Serve Prometheus metrics on this port at /metrics (default: not served). */
  metricsPort?: number;
  /** prom-client registry to register into (default: a registry of this worker's own). */
  metricsRegistry?: PromRegistry;
  logger?: Logger;
  /**
   * Time source (default monotonicScheduler: asyncScheduler's timers, `now()` from
   * `performance.now()`, so wall-clock steps cannot fire deadlines); a TestScheduler runs the
   * pipeline in virtual time.
   */
  scheduler?: SchedulerLike;
}

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
  /** The metrics server's port, when `metricsPort` was given. */
  readonly metricsServerPort?: number;
}

/**
 * Creates a worker: the pipeline of shared/DESIGN.md — permits and wakeups drive the claimer, whose
 * rows go to executors as `mergeMap(run, N)`, whose completions go through the finalizer's bounded
 * buffer into one complete_executions call per batch; the heartbeat renews what the registry holds.
 * Throws ConfigError, before touching the database, for an unknown option, no or duplicate
 * definitions, a definition checkDefinition refuses (name, handler, maxAttempts, backoff), or a setting
 * out of range: executors 1..10 000, heartbeatIntervalMs 100..3 600 000, safetyPollMs 1..2^31−1,
 * shutdownTimeoutMs 0..2^31−1, a definition's timeoutMs 1..2^31−1 (integers, ms; 2^31−1 is the
 * longest Node.js timer: a longer one would fire after 1 ms).
 */
export function createWorker(options: WorkerOptions): Worker {
  knownKeys('worker option', options, WORKER_OPTION_KEYS);
  if (!Array.isArray(options.definitions) || options.definitions.length === 0) throw new ConfigError('a worker needs at least one definition');
  for (const d of options.definitions) checkDefinition(d, true);
  const names = options.definitions.map((d) => d.name);
  if (new Set(names).size !== names.length) throw new ConfigError(`duplicate definition names: ${names.join(', ')}`);
  const executors = intOption('executors', options.executors ?? defaultExecutors(), 1, MAX_EXECUTORS);
  const safetyPollMs = intOption('safetyPollMs', options.safetyPollMs ?? DEFAULT_SAFETY_POLL_MS, 1, MAX_TIMER_MS);
  const shutdownTimeoutMs = intOption('shutdownTimeoutMs', options.shutdownTimeoutMs ?? DEFAULT_SHUTDOWN_TIMEOUT_MS, 0, MAX_TIMER_MS);
  const clock = leaseClock(options.heartbeatIntervalMs);
  const namespace = nameOption('namespace', options.namespace ?? 'default', MAX_NAME_BYTES);
  // Monotonic: attempt deadlines, timeouts and retry windows are durations on this clock, so a
  // wall-clock step cannot fire them (adversarial trial: Date.now moved 10 min ahead failed every
  // running attempt with "attempt deadline passed"; DESIGN.md: never a worker's clock for leases).
  const scheduler = options.scheduler ?? monotonicScheduler;
  const root = options.logger ?? createLogger();
  const id = randomUUID();
  const logger = root.child({ workerId: id });
  const { db } = options;
  const definitions = new Map(options.definitions.map((d) => [d.name, d as Definition]));

  const registry = new Registry();
  const permits = new Permits(executors);
  const healthy = new BehaviorSubject<boolean>(true);
  /** The LISTEN connection is up (or not used). */
  let listening = true;
  const metrics = new WorkerMetrics({ inflight: registry, permits, degraded: () => !healthy.value || !listening }, options.metricsRegistry);
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
  const subscriptions: Subscription[] = [];
  let claimInFlight: Promise<unknown> = Promise.resolve();
  let metricsServer: Server | undefined;
  let state: 'new' | 'starting' | 'running' | 'stopping' | 'stopped' = 'new';
  let starting: Promise<void> | undefined;
  let stopping: Promise<void> | undefined;
  let executorsDone: Promise<void> = Promise.resolve();
  let finalizerDone: Promise<void> = Promise.resolve();
  /** Settles the two promises above when the pipeline is torn down instead of completing. */
  const settleOnTeardown: (() => void)[] = [];
  const recoveries = new Set<Subscription>();
  let resolveDone!: () => void;
  let rejectDone!: (err: unknown) => void;
  const done = new Promise<void>((resolve, reject) => {
    resolveDone = resolve;
    rejectDone = reject;
  });
  done.catch(() => undefined); // a caller that never awaits `done` must not see an unhandled rejection

  /** Completions on their way to the finalizer's write. */
  const completions = new Subject<Completion>();
  /** Completions may still come to fill a batch: an attempt is running, or the last claim came back full. */
  const moreComing = new BehaviorSubject<boolean>(false);
  const updateMoreComing = () => {
    const more = registry.size > finalizer.backlog || lastClaimFull;
    if (more !== moreComing.value) moreComing.next(more);
  };
  const pushCompletion = (completion: Completion) => {
    completions.next(completion);
    updateMoreComing();
  };
  const finalizer = new Finalizer({
    executors,
    logger: logger.child({ component: 'finalizer' }),
    scheduler,
    write: (rows) => completeExecutions(db, id, rows),
    onRetry: () => metrics.writeRetries.inc(),
    // An attempt is running (held, i.e. claimed and not committed, but not yet handed over), or
    // the last claim took all it asked for, so the backlog goes on.
    moreComing$: moreComing,
    onWritten: (batch, acks) => {
      sawDatabase();
      metrics.batchSize.observe(batch.length);
      let retried = false;
      // Counted per batch, not per job: a labelled inc hashes its labels each time.
      const byOutcome = new Map<string, number>();
      for (let i = 0; i < batch.length; i++) {
        const { row, entry } = batch[i];
        const ack = acks[i];
        registry.remove(entry);
        if (!ack || ack.status === 'stale') {
          metrics.completionsStale.inc();
          logger.warn({ jobId: row.id, execution: row.execution, outcome: row.outcome }, 'completion fenced out: the row had moved on');
        } else {
          byOutcome.set(row.outcome, (byOutcome.get(row.outcome) ?? 0) + 1);
          if (ack.status === 'ready') retried = true; // the next claim then sees its due time (and sleeps only until it)
        }
      }
      for (const [outcome, n] of byOutcome) metrics.completions.inc({ outcome }, n);
      if (retried) wakeups.next();
    },
  });

  /** The last claim took every row it asked for (read by the finalizer's batch window). */
  let lastClaimFull = false;
  const claimAnswered = (full: boolean) => {
    lastClaimFull = full;
    updateMoreComing();
  };
  const claim = (n: number) =>
    defer(() => {
      const startedAt = scheduler.now();
      const end = metrics.claimDuration.startTimer();
      const call = claimJobs(db, { namespace, workerId: id, definitions: names, limit: n, leaseMs: clock.leaseMs }).then((result) => {
        end();
        metrics.claimRowsAsked.inc(n);
        metrics.claimRowsClaimed.inc(result.rows.length);
        registry.addClaimed(result.rows, startedAt + clock.attemptDeadlineMs);
        claimAnswered(result.rows.length > 0 && result.rows.length === n);
        return result;
      });
      claimInFlight = call.catch(() => claimAnswered(false));
      return call;
    });

  const teardown = () => {
    stopClaiming.next();
    stopAll.next();
    for (const s of subscriptions) s.unsubscribe();
    subscriptions.length = 0;
    for (const s of recoveries) s.unsubscribe();
    recoveries.clear();
    for (const settle of settleOnTeardown.splice(0)) settle();
    metricsServer?.close();
  };

  /**
   * The worker gives up (no heartbeat for a whole lease, or a non-transient error): it stops
   * claiming, aborts every handler (reason 'fatal'), tries ONCE, briefly, to hand its unfinished
   * rows back uncharged (seed 001), and rejects `done`; whatever that write did not reach, the
   * recovery pass of another worker returns once its lease expires.
   */
  const fatal = (err: unknown) => {
    if (state === 'stopped' || state === 'new') return;
    state = 'stopped';
    logger.error({ err }, 'worker stopping: fatal error');
    teardown();
    const held = registry.snapshot();
    for (const entry of held) registry.abort(entry, 'fatal');
    const rows = held.filter((e) => e.state !== 'finalizing').map((e) => handBackCompletion(e).row);
    const lastTry = rows.length === 0 ? Promise.resolve() : completeExecutions(db, id, rows).then(
      () => logger.info({ handedBack: rows.length }, 'unfinished rows handed back'),
      (writeErr) => logger.warn({ err: writeErr, rows: rows.length }, 'could not hand the unfinished rows back; recovery returns them after their lease'),
    );
    void raceTimeout(lastTry, Math.min(clock.heartbeatIntervalMs, 2_000), scheduler).then(() => rejectDone(err));
  };

  const runRecovery = () => {
    if (recoveries.size > 0) return; // the pass still running sweeps on until it finds no more
    const subscription = recoveryPass({
      recover: (limit) => recoverJobs(db, { namespace, deadAfterMs: clock.workerDeadAfterMs, limit }),
      logger: logger.child({ component: 'recovery' }),
      onRecovered: (rows) => {
        for (const r of rows) metrics.recovered.inc({ charged: String(r.charged) });
        wakeups.next();
      },
      retryInitialMs: Math.min(1_000, clock.heartbeatIntervalMs / 4),
      retryMaxMs: Math.min(clock.heartbeatIntervalMs, PIPELINE.unreachableRetryMaxMs),
      scheduler,
    })
      .pipe(finalize(() => recoveries.delete(subscription)))
      .subscribe();
    if (!subscription.closed) recoveries.add(subscription);
  };

  /** Schema check and registration; a transient error is repeated with back-off for up to one lease. */
  /** The registration call in flight: stop() during start() waits for it before marking the worker stopped. */
  let registering: Promise<void> = Promise.resolve();
  /** The registration took the namespace's recovery pass: run() starts it. */
  let recoveryDueAtStart = false;
  const register = () =>
    firstValueFrom(
      defer(() => {
        registering = (async () => {
          await assertMigrated(db);
          if (state !== 'starting') return; // stop() came meanwhile: do not register at all
          const registration = await registerWorker(db, {
            workerId: id,
            namespace,
            hostname: os.hostname(),
            pid: process.pid,
            definitions: names,
            maxAttempts: options.definitions.map((d) => d.maxAttempts ?? null),
            leaseMs: clock.leaseMs,
          });
          recoveryDueAtStart = registration.recoveryDue;
        })();
        return registering;
      }).pipe(
        retryBackoff<void>({
          initialMs: Math.min(1_000, clock.heartbeatIntervalMs / 4),
          maxMs: Math.min(clock.heartbeatIntervalMs, PIPELINE.unreachableRetryMaxMs),
          jitter: 0.25,
          shouldRetry: (() => {
            const since = scheduler.now();
            return (err: unknown) => isTransientDbError(err) && scheduler.now() - since < clock.leaseMs;
          })(),
          onRetry: (err, retry, delayMs) => logger.warn({ err, retry, delayMs }, 'worker start: database unavailable; repeating'),
          scheduler,
        }),
        takeUntil(cancelStart),
      ),
      { defaultValue: undefined },
    );

  const run = () => {
    const wakeup$ = merge(
      wakeups,
      options.listen === false
        ? EMPTY
        : notifyWakeups(db, namespace, logger.child({ component: 'wakeups' }), {
            // Found within interval + timeout (5 s): about 15 s at the default H.
            probeIntervalMs: Math.max(1_000, Math.min(10_000, clock.heartbeatIntervalMs)),
            onListening: (up) => {
              listening = up;
              if (!up) return;
              metrics.listenerReconnects.inc();
              sawDatabase();
            },
          }),
      options.redis ? redisWakeups(options.redis, namespace, logger.child({ component: 'wakeups' })) : EMPTY,
    );
    const intakeOpen$ = combineLatest([finalizer.intakeOpen$, healthy]).pipe(map(([room, ok]) => room && ok));
    const claimerLogger = logger.child({ component: 'claimer' });
    const executorDeps: ExecutorDeps = {
      definitions,
      registry,
      logger: logger.child({ component: 'executor' }),
      scheduler,
      timeouts: new Timeouts(scheduler),
      hand: pushCompletion,
      stepFor: (entry) => createStep(db, id, entry, registry, scheduler),
      settled: () => permits.release(1),
    };
    const heartbeatLogger = logger.child({ component: 'heartbeat' });

    const executors$ = claimer({
      permits,
      wakeup$,
      intakeOpen$,
      claim,
      safetyPollMs,
      pollFloorMs: PIPELINE.pollFloorMs,
      jitterMs: PIPELINE.idleJitterMs,
      scheduler,
      onClaimError: (err) => claimerLogger.warn({ err }, 'claim failed; backing off one safety poll'),
    }).pipe(
      takeUntil(stopClaiming),
      mergeMap((rows) => rows),
      mergeMap((row) => {
        const entry = registry.get(row.id);
        return entry ? runEntry(entry, executorDeps) : EMPTY;
      }, executors),
    );

    finalizerDone = new Promise<void>((resolve) => {
      settleOnTeardown.push(resolve);
      subscriptions.push(completions.pipe(finalizer.write).subscribe({ error: fatal, complete: resolve }));
    });
    // The registration was the first beat (it took the recovery pass if one was due: a catch-up
    // for a fleet that was down; started below, after the first claim has its connection); the
    // heartbeat beats every H from it. A beat at once, beside the first claim, cost every starting
    // worker one more server connection (issue 5).
    subscriptions.push(
      heartbeat({
        registry,
        clock,
        beat: (held) => heartbeatCall(db, { workerId: id, namespace, held, leaseMs: clock.leaseMs }),
        startRecovery: runRecovery,
        onHealth: (ok) => {
          if (!ok) metrics.heartbeatFailures.inc();
          healthy.next(ok);
        },
        onFatal: fatal,
        logger: heartbeatLogger,
        scheduler,
        startedAt: registeredAt,
        reachable$: reachable,
      })
        .pipe(takeUntil(stopAll))
        .subscribe({ error: fatal }),
    );
    executorsDone = new Promise<void>((resolve) => {
      settleOnTeardown.push(resolve);
      subscriptions.push(executors$.subscribe({ error: fatal, complete: resolve }));
    });
    if (recoveryDueAtStart) runRecovery();
  };
  let registeredAt = scheduler.now();

  const worker: Worker = {
    id,
    metrics,
    done,
    get metricsServerPort() {
      const address = metricsServer?.address();
      return address && typeof address === 'object' ? address.port : undefined;
    },
    wake: () => wakeups.next(),

    start() {
      if (state !== 'new') return Promise.reject(new ConfigError('a worker starts once; create another to start again'));
      state = 'starting';
      starting = (async () => {
        registeredAt = scheduler.now();
        try {
          // The metrics server first: a start that fails on it (a port in use) has not registered,
          // so it leaves no live worker row and takes no recovery pass it would never run.
          if (options.metricsPort !== undefined) metricsServer = await serveMetrics(metrics.registry, options.metricsPort);
          await register();
        } catch (err) {
          metricsServer?.close();
          metricsServer = undefined;
          state = 'stopped';
          resolveDone();
          throw err;
        }
        if (state !== 'starting') return; // stop() was called meanwhile: it waits for us
        state = 'running';
        run();
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
      stopping = (async () => {
        if (wasStarting) {
          cancelStart.next();
          await starting?.catch(() => undefined);
          if (registry.size === 0 && subscriptions.length === 0) {
            metricsServer?.close();
            // A registration cancelled in flight may still commit: after this stop, it would
            // leave the worker's row 'alive' (bounded: the database may be what start() waited for).
            await raceTimeout(registering.catch(() => undefined), shutdownTimeoutMs, scheduler);
            // A recovery pass the registration took is not run by this worker: due again at once.
            if (recoveryDueAtStart) await releaseRecoveryPass(db, namespace).catch(() => undefined);
            await stopWorker(db, id).catch(() => undefined);
            state = 'stopped';
            resolveDone();
            return;
          }
        }
        logger.info({ shutdownTimeoutMs }, 'worker stopping');
        await shutdown({
          registry,
          logger,
          scheduler,
          shutdownTimeoutMs,
          stopClaiming: () => stopClaiming.next(),
          claimInFlight: () => claimInFlight,
          handBack: (entry) => {
            entry.state = 'finalizing';
            pushCompletion(handBackCompletion(entry));
          },
          executorsDone: () => executorsDone,
          closeFinalizer: () => completions.complete(),
          finalizerDone: () => finalizerDone,
          abandonFinalizer: () => finalizer.abandon(),
        });
        if (state !== 'stopping') return; // a fatal error ended it meanwhile
        teardown();
        await stopWorker(db, id).catch((err) => logger.warn({ err }, 'could not mark the worker stopped'));
        state = 'stopped';
        logger.info('worker stopped');
        resolveDone();
      })();
      return stopping;
    },
  };
  return worker;
}
