import type { SchedulerLike } from 'rxjs';
import { outboxSettings } from '../recurring/outbox';
import { checkSchedules } from '../recurring/schedules';
import type { BatchCarry, BatchSettings } from '../recurring/batches';
import { outboxOption, type SystemOptions, systemDefinitions } from '../recurring/system';
import type { Registry as PromRegistry } from 'prom-client';
import { DEFAULT_SAFETY_POLL_MS, DEFAULT_SHUTDOWN_TIMEOUT_MS, DEFAULT_START_TIMEOUT_MS, defaultExecutors, intOption, knownKeys, type LeaseClock, leaseClock, MAX_EXECUTORS, MAX_NAME_BYTES, MAX_TIMER_MS, nameOption, schedulerOption } from '../config';
import type { Db } from '../db/Db';
import { type Ledger, sqlLedger } from '../ledger';
import { checkDefinition, type Definition } from '../definition';
import { ConfigError } from '../errors';
import { shown } from '../client/jobId';
import type { WorkerEventsOptions } from './events';
import { HOOK_KEYS, type WorkerHooks } from './hooks';
import { createLogger, type Logger } from '../logger';
import { monotonicScheduler } from '../../operators';
import type { RedisLike } from './wakeups';

/** The keys of WorkerOptions: createWorker refuses any other (a misspelt option is a ConfigError, not ignored). */
const WORKER_OPTION_KEYS = ['db', 'definitions', 'executors', 'namespace', 'heartbeatIntervalMs', 'safetyPollMs', 'shutdownTimeoutMs', 'startTimeoutMs', 'listen', 'redis', 'metricsPort', 'metricsRegistry', 'logger', 'scheduler', 'random', 'build', 'ledger', 'hooks', 'events', 'retention', 'alerts', 'outbox'];

/** Options of {@link createWorker}. Only H, N and the safety poll are timing knobs (docs/DESIGN.md, "The lease clock"). */
export interface WorkerOptions extends SystemOptions {
  /** The database. Required unless `ledger` is given. */
  db?: Db;
  /**
   * The ledger the worker's calls go to instead of `db`'s SQL functions (src/ledger.ts): acta/testing's
   * in-memory ledger, or a wrapper that injects faults. Default: `sqlLedger(db)`.
   */
  ledger?: Ledger;
  /** The definitions this worker runs; it claims only these. */
  definitions: Definition<any, any>[];
  /** Executor count N (default 4 per core, clamped to 8..64; docs/DESIGN.md). */
  executors?: number;
  /** Queue namespace (default "default"). */
  namespace?: string;
  /**
   * The build this worker runs (a version, a commit), declared with its definitions' policies: the
   * namespace applies the newest live worker's declaration, and while builds disagree the
   * strictest concurrency and rate limits (docs/DESIGN.md, "Policies"). Default: not declared.
   */
  build?: string;
  /** Heartbeat interval H, ms (default 45 000); lease 4 H, deadline 2.5 H, dead after 7 H. */
  heartbeatIntervalMs?: number;
  /** Safety poll, ms (default 1 000): the longest idle sleep. */
  safetyPollMs?: number;
  /** How long stop() waits for running handlers before aborting them, ms (default 10 000). */
  shutdownTimeoutMs?: number;
  /**
   * How long start() keeps trying to reach the database (schema check and registration, transient
   * errors repeated with back-off) before it rejects with StartTimeoutError, ms (default 30 000).
   * The first failure is logged at once (warn, with the error).
   */
  startTimeoutMs?: number;
  /** LISTEN for NOTIFY wakeups (default true). */
  listen?: boolean;
  /** Also take wakeups from Redis pub/sub (an ioredis client). */
  redis?: RedisLike;
  /** Serve Prometheus metrics on this port at /metrics (default: not served), until a stop begins: the port is free then. */
  metricsPort?: number;
  /** prom-client registry to register into (default: a registry of this worker's own). */
  metricsRegistry?: PromRegistry;
  logger?: Logger;
  /**
   * Time source (default monotonicScheduler: asyncScheduler's timers, `now()` from
   * `performance.now()`, so wall-clock steps cannot fire deadlines); acta/testing's
   * `VirtualClock.scheduler` runs the whole worker in virtual time (a TestScheduler's one
   * synchronous flush cannot wait for the ledger's answers: a start under it times out).
   */
  scheduler?: SchedulerLike;
  /**
   * Uniform [0, 1) source of the worker's jitter: the idle claimer's (+ random() · 100 ms) and the
   * repeats of its own database calls (registration, heartbeat, completion write: the delay × (1 ±
   * 25 %), so `() => 0` repeats at 0.75 × and `() => 0.5` at 1 ×). A job's back-off has none.
   * Default Math.random; a test in virtual time passes a constant for repeatable times.
   */
  random?: () => number;
  /** Your operators at the pipeline's named points (hooks.ts; docs/rx.md). */
  hooks?: WorkerHooks;
  /** `worker.events$`: `{ payloads: true }` puts each job's payload on its per-attempt events (default: no payloads). */
  events?: WorkerEventsOptions;
}

/** A worker's options, checked, with every default applied. */
export interface WorkerSettings {
  random: () => number;
  ledger: Ledger;
  /** The database given, if any: the hints of a refused spawn's message read it (src/policies/enqueueRule.ts). */
  db?: Db;
  definitions: ReadonlyMap<string, Definition>;
  /** The definitions' names, in the order given. */
  names: string[];
  executors: number;
  safetyPollMs: number;
  shutdownTimeoutMs: number;
  startTimeoutMs: number;
  clock: LeaseClock;
  namespace: string;
  scheduler: SchedulerLike;
  logger: Logger;
  listen: boolean;
  redis?: RedisLike;
  metricsPort?: number;
  metricsRegistry?: PromRegistry;
  /** The definitions' own maxAttempts, in `names` order (null: none given). */
  maxAttempts: (number | null)[];
  build: string | null;
  /** Undefined when none was given. */
  hooks?: WorkerHooks;
  events: WorkerEventsOptions;
  /** sys.outbox's settings when asked (`outbox`): the worker also fans out at each publish's wakeup; its slot's passes and these share `carry`. */
  outbox?: { settings: BatchSettings; carry: BatchCarry };
  /** sys.alerts' `onAlert` when it names a definition this worker does not run: checked against the namespace at the start. */
  onAlertElsewhere?: string;
}

/**
 * Checks a worker's options before anything touches the database. Throws ConfigError for an
 * unknown option, no or duplicate definitions, two schedules of one name, a definition checkDefinition refuses (name,
 * handler, maxAttempts, backoff), or a setting out of range: executors 1..10 000,
 * heartbeatIntervalMs 100..3 600 000, safetyPollMs 1..2^31−1, shutdownTimeoutMs 0..2^31−1, startTimeoutMs 1..2^31−1, a
 * definition's timeoutMs 1..2^31−1 (integers, ms; 2^31−1 is the longest Node.js timer: a longer
 * one would fire after 1 ms), hooks that are not functions, or events options other than `payloads`.
 */
export function workerSettings(options: WorkerOptions): WorkerSettings {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new ConfigError(`createWorker takes options: { db, definitions: [...] }, got ${options === undefined ? 'nothing' : shown(options)}`);
  }
  knownKeys('worker option', options, WORKER_OPTION_KEYS);
  if (!Array.isArray(options.definitions)) {
    // One definition given bare (definitions: sendEmail) is the likely slip: name it.
    const d = options.definitions as { name?: unknown } | undefined;
    const got = d === undefined ? 'nothing' : d !== null && typeof d === 'object' && typeof d.name === 'string' ? `one definition ("${d.name}") not in an array` : shown(d);
    throw new ConfigError(`definitions must be an array of definitions (definitions: [sendEmail, resize]), got ${got}`);
  }
  if (options.definitions.length === 0) throw new ConfigError('a worker needs at least one definition');
  for (const d of options.definitions) checkDefinition(d, true);
  if (options.ledger === undefined && (options.db === null || typeof options.db !== 'object')) throw new ConfigError('a worker needs a db (or a ledger)');
  const clock = leaseClock(options.heartbeatIntervalMs);
  // The worker's own statements each carry a deadline (LeaseClock.callDeadlineMs): a silent network
  // must not hold a beat, a claim or a completion, nor a pooled connection, for good.
  const ledger = options.ledger ?? sqlLedger(options.db as Db, { deadlineMs: clock.callDeadlineMs });
  const namespace = nameOption('namespace', options.namespace ?? 'default', MAX_NAME_BYTES);
  const scheduler = schedulerOption(options.scheduler, 'createWorker') ?? monotonicScheduler;
  // acta's own recurring definitions run beside the user's (src/recurring/system.ts).
  const outboxCarry: BatchCarry = {};
  const system = systemDefinitions({ ledger, namespace, scheduler, retention: options.retention, alerts: options.alerts, outbox: options.outbox, outboxCarry });
  const outbox = outboxOption(options.outbox);
  const onAlert = (options.alerts as { onAlert?: string } | undefined)?.onAlert; // checked by systemDefinitions
  const all = [...options.definitions, ...system.filter((d) => !options.definitions.some((o) => o.name === d.name))];
  const names = all.map((d) => d.name);
  if (new Set(names).size !== names.length) throw new ConfigError(`duplicate definition names: ${names.join(', ')}`);
  checkScheduleNames(all);
  checkServices(options);
  return {
    ledger,
    db: options.db,
    definitions: new Map(all.map((d) => [d.name, d as Definition])),
    names,
    executors: intOption('executors', options.executors ?? defaultExecutors(), 1, MAX_EXECUTORS),
    safetyPollMs: intOption('safetyPollMs', options.safetyPollMs ?? DEFAULT_SAFETY_POLL_MS, 1, MAX_TIMER_MS),
    shutdownTimeoutMs: intOption('shutdownTimeoutMs', options.shutdownTimeoutMs ?? DEFAULT_SHUTDOWN_TIMEOUT_MS, 0, MAX_TIMER_MS),
    startTimeoutMs: intOption('startTimeoutMs', options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS, 1, MAX_TIMER_MS),
    clock,
    namespace,
    // Monotonic: attempt deadlines, timeouts and retry windows are durations on this clock, so a
    // wall-clock step cannot fire them (docs/DESIGN.md: lease times are never a worker's clock;
    // test/db/clock.test.ts).
    scheduler,
    logger: options.logger ?? createLogger(),
    listen: options.listen !== false,
    redis: options.redis,
    metricsPort: options.metricsPort,
    metricsRegistry: options.metricsRegistry,
    maxAttempts: all.map((d) => d.maxAttempts ?? null),
    random: options.random === undefined ? Math.random : typeof options.random === 'function' ? options.random : badRandom(options.random),
    build: options.build === undefined ? null : nameOption('build', options.build, MAX_NAME_BYTES),
    hooks: hooksOption(options.hooks),
    events: eventsOption(options.events),
    ...(outbox ? { outbox: { settings: outboxSettings(outbox), carry: outboxCarry } } : {}),
    ...(onAlert !== undefined && !names.includes(onAlert) ? { onAlertElsewhere: onAlert } : {}),
  };
}

/**
 * A schedule's name is one schedule in the namespace (docs/schedules.md): two definitions of one
 * worker declaring the same name would leave one of them never firing. Throws ConfigError.
 */
function checkScheduleNames(definitions: readonly Definition[]): void {
  const owner = new Map<string, string>();
  for (const d of definitions) {
    if (d.schedule === undefined) continue;
    for (const { name } of checkSchedules(d.name, d.schedule)) {
      const first = owner.get(name);
      if (first !== undefined) throw new ConfigError(`schedule "${name}" is declared by definitions ${first} and ${d.name}: a schedule's name is unique in the namespace, give one of them another name`);
      owner.set(name, d.name);
    }
  }
}

/** `hooks`: an object of the known hooks, each a function; undefined when it names none. Throws ConfigError. */
function hooksOption(hooks: WorkerHooks | undefined): WorkerHooks | undefined {
  if (hooks === undefined) return undefined;
  if (hooks === null || typeof hooks !== 'object') throw new ConfigError(`hooks must be an object of ${HOOK_KEYS.join(', ')}, got ${hooks === null ? 'null' : typeof hooks}`);
  knownKeys('hook', hooks, HOOK_KEYS);
  for (const key of HOOK_KEYS) {
    if (hooks[key] !== undefined && typeof hooks[key] !== 'function') throw new ConfigError(`hooks.${key} must be a function, got ${typeof hooks[key]}`);
  }
  return HOOK_KEYS.some((key) => hooks[key] !== undefined) ? { ...hooks } : undefined;
}

/** `events`: `{ payloads?: boolean }`. Throws ConfigError. */
function eventsOption(events: WorkerEventsOptions | undefined): WorkerEventsOptions {
  if (events === undefined) return {};
  if (events === null || typeof events !== 'object') throw new ConfigError(`events must be an object { payloads?: boolean }, got ${events === null ? 'null' : typeof events}`);
  knownKeys('events option', events, ['payloads']);
  if (events.payloads !== undefined && typeof events.payloads !== 'boolean') throw new ConfigError(`events.payloads must be a boolean, got ${typeof events.payloads}`);
  return { payloads: events.payloads === true };
}

/**
 * Throws ConfigError unless `value` is undefined or an object with each of `methods` a function:
 * what the worker calls on it. One of another kind failed later as a TypeError, at createWorker (a
 * logger), at start() or, for a Redis client, in a subscription callback, as an uncaught exception
 * that ended the process (test/db/badInput.test.ts).
 */
function withMethods(what: string, value: unknown, methods: readonly string[], kind: string): void {
  if (value === undefined) return;
  const missing = value !== null && typeof value === 'object' ? methods.find((m) => typeof (value as Record<string, unknown>)[m] !== 'function') : methods[0];
  if (missing === undefined) return;
  throw new ConfigError(`${what} must be ${kind}, got ${value !== null && typeof value === 'object' ? `an object without ${missing}` : shown(value)}`);
}

/** The options that name services the worker uses (Redis, a metrics port and registry, a logger) and `listen`, checked (ConfigError). */
function checkServices(options: WorkerOptions): void {
  withMethods('redis', options.redis, ['duplicate', 'subscribe', 'publish', 'on', 'quit'], 'a Redis client (ioredis: duplicate, subscribe, publish, on, quit)');
  withMethods('logger', options.logger, ['child', 'debug', 'info', 'warn', 'error'], 'a pino logger (or one with child, debug, info, warn and error)');
  withMethods('metricsRegistry', options.metricsRegistry, ['registerMetric', 'getSingleMetric', 'metrics'], 'a prom-client Registry');
  if (options.metricsPort !== undefined) intOption('metricsPort', options.metricsPort, 0, 65_535);
  if (options.listen !== undefined && typeof options.listen !== 'boolean') throw new ConfigError(`listen must be a boolean, got ${shown(options.listen)}`);
}

function badRandom(value: unknown): never {
  throw new ConfigError(`random must be a function returning a number in [0, 1), got ${typeof value}`);
}
