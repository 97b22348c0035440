import * as os from 'node:os';
import { ConfigError } from './errors';
import type { SchedulerLike } from 'rxjs';
import { badString, bytesOver } from './json';

/**
 * The lease clock: every timing derives from one knob, the heartbeat interval H
 * (docs/DESIGN.md, "The lease clock").
 */
export interface LeaseClock {
  /** H, ms. Default 45 000. */
  heartbeatIntervalMs: number;
  /** 4 H, ms: how long a row stays a worker's without a renewal. */
  leaseMs: number;
  /** (H + 4 H) / 2 = 2.5 H, ms, after the last confirmed renewal's start: the handler is cancelled there. */
  attemptDeadlineMs: number;
  /** 7 H, ms: no heartbeat for this long and recovery marks the worker dead. */
  workerDeadAfterMs: number;
  /** = lease, ms: how often a namespace's recovery pass runs. */
  recoveryIntervalMs: number;
  /**
   * H, at least CALL_DEADLINE_FLOOR_MS: a worker's own statement (heartbeat, claim, completion, ...)
   * unanswered this long has its connection destroyed and fails as transient, so a silent network
   * holds no call, and no pooled connection, for good (docs/how-it-works.md, "Database faults";
   * test/faults/partition.test.ts). At H it leaves a hung beat's retry (from 2 H) room before the
   * attempt deadline (2.5 H); the floor spares a slow but live server at the short H of tests.
   */
  callDeadlineMs: number;
}

/** The least deadline of a worker's own statements, ms (LeaseClock.callDeadlineMs). */
export const CALL_DEADLINE_FLOOR_MS = 5_000;

/** Default heartbeat interval H (docs/DESIGN.md, "The lease clock"): 45 s. */
export const DEFAULT_HEARTBEAT_INTERVAL_MS = 45_000;

/** Accepted heartbeat intervals H, ms (inclusive): 100 ms to one hour. */
export const HEARTBEAT_INTERVAL_RANGE_MS = { min: 100, max: 3_600_000 } as const;

/** The most executors one worker accepts. */
export const MAX_EXECUTORS = 10_000;

/** Derives the lease clock from H (ms). Throws ConfigError unless H is within HEARTBEAT_INTERVAL_RANGE_MS. */
export function leaseClock(heartbeatIntervalMs = DEFAULT_HEARTBEAT_INTERVAL_MS): LeaseClock {
  const { min, max } = HEARTBEAT_INTERVAL_RANGE_MS;
  if (!Number.isFinite(heartbeatIntervalMs) || heartbeatIntervalMs < min || heartbeatIntervalMs > max) {
    throw new ConfigError(`heartbeatIntervalMs must be between ${min} and ${max}, got ${heartbeatIntervalMs}`);
  }
  const h = heartbeatIntervalMs;
  return {
    heartbeatIntervalMs: h,
    leaseMs: 4 * h,
    attemptDeadlineMs: (h + 4 * h) / 2,
    workerDeadAfterMs: 7 * h,
    recoveryIntervalMs: 4 * h,
    callDeadlineMs: Math.max(h, CALL_DEADLINE_FLOOR_MS),
  };
}

/** Constants of the pipeline (docs/DESIGN.md, "The pipeline inside one worker"). */
export const PIPELINE = {
  /** Completions in one complete_executions call. */
  batchMaxCount: 128,
  /** Result bytes in one call; a larger single result is written alone. */
  batchMaxBytes: 4 * 1024 * 1024,
  /** Extra wait to fill a batch, only when its first read found a backlog. */
  batchWindowMs: 50,
  /** Shortest idle sleep of the claimer. */
  pollFloorMs: 50,
  /** Spread added to the idle sleep so idle workers do not claim in lockstep. */
  idleJitterMs: 100,
  /** Completion write repeat: first back-off, cap, jitter (±25 %), warnings before errors. */
  writeRetryInitialMs: 1_000,
  writeRetryMaxMs: 30_000,
  writeRetryJitter: 0.25,
  writeRetryWarnings: 3,
  /** A recovery pass's call and a step's read or record repeat on transient errors: first back-off, cap, jitter (±25 %). */
  callRetryInitialMs: 250,
  callRetryMaxMs: 5_000,
  callRetryJitter: 0.25,
  /**
   * Longest back-off, before jitter (±25 %: at most 5 s), between tries of a call that repeats
   * while the database is unreachable: the heartbeat, the registration, a recovery pass. It does
   * not grow with H, so a server back after a long outage is found within about 5 s
   * (test/faults/outage.test.ts).
   */
  unreachableRetryMaxMs: 4_000,
  /** Default per-attempt execution timeout, 300 s (acta's own default), settable per definition. */
  executionTimeoutMs: 300_000,
  /**
   * Uncharged returns a job may have in its life: acta.recover_jobs' bound on lost attempts that
   * never started (sql/functions/recover_jobs.sql, the same 3), also applied by the executor to a
   * claim that reaches it after its attempt deadline; beyond it such a return costs an attempt.
   */
  unchargedReturnsMax: 3,
  /** ctx.progress: at most one acta.report_progress call per worker per this many ms, carrying each running attempt's latest value. */
  progressIntervalMs: 250,
  /** ctx.progress: the largest value, as JSON text in UTF-8 bytes. */
  progressMaxBytes: 65_536,
  /** Default maximum attempts of a job (graphile-worker's default, also the schema default). */
  maxAttempts: 25,
  /**
   * Longest message and stack stored of an attempt's error, in UTF-16 code units each; the rest
   * is cut with a note of how much. An error's text is for people and logs, and is stored twice
   * per attempt (the job's last error and the attempt's ledger row); an unbounded one can make
   * serialising the error throw, and the job would go back at every claim
   * (test/faults/completion.test.ts, "a user's code that throws where acta reads it").
   */
  errorTextMaxChars: 65_536,
} as const;

/** Default safety poll (docs/DESIGN.md, "The lease clock"): the longest idle sleep and the failed-claim back-off, ms. */
export const DEFAULT_SAFETY_POLL_MS = 1_000;

/** Default shutdown timeout (acta's own default): how long stop() waits for running handlers, ms. */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 10_000;

/**
 * Default start timeout (acta's own default): how long worker.start() keeps trying to reach the
 * database before it fails with StartTimeoutError, ms. Well under a lease (180 s by default), so a
 * wrong address fails a deploy quickly; long enough for a database that is restarting.
 */
export const DEFAULT_START_TIMEOUT_MS = 30_000;

/** Executor count N: 4 per core, clamped to 8..64 (docs/DESIGN.md, "The lease clock"). */
export function defaultExecutors(cores = os.availableParallelism?.() ?? os.cpus().length): number {
  return Math.min(64, Math.max(8, 4 * cores));
}

/**
 * The longest delay a Node.js timer honours: 2^31 − 1 ms (~24.8 days); a longer one fires after
 * 1 ms (Node.js docs, setTimeout). Every duration setting that becomes a timer is bounded by it.
 */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * A call deadline's wait as a timer: capped at MAX_TIMER_MS. A statement deadline may be longer (a
 * batch timeout near its maximum plus the worker's own deadline) and would otherwise fail at once
 * (test/db/longDeadline.test.ts, test/embeddedShare.test.ts).
 */
export const timerDelay = (ms: number): number => Math.min(Math.max(0, ms), MAX_TIMER_MS);

/**
 * Validates a name (a definition's name, a namespace, an idempotency key): a non-empty string
 * without \u0000 or a lone UTF-16 surrogate. PostgreSQL text refuses \u0000 and stores a lone
 * surrogate as U+FFFD, so two different names could become one. Throws ConfigError naming `what`.
 */
export function nameOption(what: string, value: unknown, maxBytes?: number): string {
  if (typeof value !== 'string' || value.length === 0 || badString(value) !== undefined) {
    throw new ConfigError(`${what} must be a non-empty string without \\u0000 or a lone UTF-16 surrogate, got ${(JSON.stringify(value) ?? String(value)).slice(0, 80)}`);
  }
  const bytes = maxBytes === undefined ? undefined : bytesOver(value, maxBytes);
  if (bytes !== undefined) throw new ConfigError(`${what} must be at most ${maxBytes} bytes in UTF-8, got ${bytes}: ${JSON.stringify(value.slice(0, 40))}…`);
  return value;
}

/**
 * The longest namespace and definition name, in UTF-8 bytes. B-tree entries hold at most 2,704
 * bytes (PostgreSQL, "B-Tree" limits: a third of an 8 kB page) and acta's hold a namespace with a
 * definition name (acta.definitions' key) or with an idempotency key of up to 2,000 bytes
 * (jobs_idempotency_key_idx); a NOTIFY payload (< 8,000 bytes) carries the namespace. A longer one
 * would pass here and fail later as a raw database error, at a worker's start or at every enqueue
 * (test/db/enqueue.test.ts, "createWorker and createClient refuse unknown options").
 */
export const MAX_NAME_BYTES = 255;

/**
 * The longest idempotency key (an enqueue's, a signal's), in UTF-8 bytes: under a btree entry's
 * 2,704 with room for the namespace or the signal's name (MAX_NAME_BYTES).
 */
export const MAX_IDEMPOTENCY_KEY_BYTES = 2_000;

/** The longest policy key (a concurrency key, a rate key, a lane), in UTF-8 bytes: it is part of B-tree entries (jobs_parked_idx) that hold at most 2,704 bytes. */
export const MAX_KEY_BYTES = 1_000;

/**
 * Throws ConfigError for a key of `options` outside `known`: a misspelt option (`executor: 4`,
 * `maxAttempt`, `delayMs`) would otherwise be ignored silently. `what` names the object in the
 * message; `hint`, if given, ends it. (for…in: no array per call, enqueueMany checks every item.)
 */
export function knownKeys(what: string, options: object, known: readonly string[], hint = ''): void {
  for (const key in options) {
    if (!known.includes(key)) throw new ConfigError(`unknown ${what} "${key}"; known: ${known.join(', ')}${hint}`);
  }
}

/**
 * A call's options: null or undefined is none (`{}`); anything else but an object is a ConfigError
 * naming `call`: a number or a string was ignored (enqueue wrote with the defaults), or read as keys
 * "0", "1"; null threw a raw TypeError (test/db/badInput.test.ts, "options").
 */
export function optionsOf<T extends object>(call: string, value: T | null | undefined): T {
  if (value === undefined || value === null) return {} as T;
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new ConfigError(`${call} takes an options object, got ${Array.isArray(value) ? 'an array' : typeof value === 'string' ? JSON.stringify(value).slice(0, 80) : typeof value === 'function' ? 'a function' : String(value).slice(0, 80)}`);
  }
  return value;
}

/** Validates an integer option in [min, max]; throws ConfigError naming the option (a string "5" is shown quoted). */
export function intOption(name: string, value: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer between ${min} and ${max}, got ${typeof value === 'number' ? value : JSON.stringify(value)}`);
  }
  return value;
}

/** The earliest timestamptz, 4713 BC, in ms since the epoch (PostgreSQL, "Date/Time Types"); JavaScript dates reach further. */
const MIN_TIMESTAMPTZ_MS = -210_866_803_200_000;

/**
 * A `runAt` option (enqueue's and a child's alike): a Date that timestamptz holds, else
 * ConfigError saying what was given; a number of ms or a string is named with its fix
 * (test/spawnOptions.spec.ts, test/db/enqueue.test.ts "bad options").
 */
export function runAtOption(value: unknown): Date {
  // NaN fails the comparison too. Dates before 4713 BC are valid in JavaScript, not in timestamptz (22008).
  if (value instanceof Date && value.getTime() >= MIN_TIMESTAMPTZ_MS) return value;
  const given =
    value instanceof Date
      ? Number.isNaN(value.getTime())
        ? 'an Invalid Date'
        : value.toISOString()
      : typeof value === 'number' || typeof value === 'string'
        ? `${typeof value} ${JSON.stringify(value)} (a Date is needed: new Date(${typeof value === 'number' ? 'ms' : 'text'}))`
        : typeof value;
  throw new ConfigError(`runAt must be a valid Date from 4713 BC on (timestamptz), got ${given}`);
}

/**
 * A `scheduler` option: an RxJS SchedulerLike (`now()` and `schedule()`), else ConfigError. Checked
 * where it is given: a VirtualClock passed for its `scheduler` (it has `now()` only) would fail
 * later, in a timer, as a TypeError (test/testing/virtualWorker.spec.ts).
 */
export function schedulerOption(value: SchedulerLike | undefined, where: string): SchedulerLike | undefined {
  if (value === undefined) return undefined;
  const v = value as { now?: unknown; schedule?: unknown } | null;
  if (v !== null && typeof v === 'object' && typeof v.now === 'function' && typeof v.schedule === 'function') return value;
  const hint = v !== null && typeof v === 'object' && typeof v.now === 'function' && 'scheduler' in v ? ' (a VirtualClock: give its clock.scheduler)' : '';
  throw new ConfigError(`${where}: scheduler must be an RxJS scheduler (now() and schedule())${hint}, got ${v === null ? 'null' : typeof v}`);
}
