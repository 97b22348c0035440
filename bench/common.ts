/**
 * Shared between the orchestrator (bench/run.ts) and the worker processes (bench/child.ts): the
 * systems under test, their settings, and the IPC messages.
 */

export const SYSTEMS = ['acta-default', 'acta-best', 'acta-zero', 'graphile-default', 'graphile-perf', 'pgboss-best', 'bullmq'] as const;
export type SystemName = (typeof SYSTEMS)[number];
/** The acta systems the policy scenarios (keys, rate), memory and backpressure run: acta-zero differs from acta-best only in what a success leaves behind. */
export const isActaPolicySystem = (system: string): system is 'acta-default' | 'acta-best' => system === 'acta-default' || system === 'acta-best';
export type SystemKind = 'acta' | 'graphile' | 'pgboss' | 'bullmq';

export function kindOf(system: SystemName): SystemKind {
  if (system.startsWith('acta')) return 'acta';
  if (system.startsWith('graphile')) return 'graphile';
  if (system.startsWith('pgboss')) return 'pgboss';
  return 'bullmq';
}

export const usesPostgres = (system: SystemName) => kindOf(system) !== 'bullmq';

/** The job name / queue name / task identifier every system uses. */
export const JOB_NAME = 'noop';
export const PGBOSS_QUEUE = 'bench';

/**
 * The settings of each system, in one place (the report prints them). Pool sizes are the
 * system's own default or documented value, capped in multi-process runs (see poolCap).
 */
export const SETTINGS = {
  'acta-default': { label: 'acta, createWorker defaults', executors: undefined as number | undefined, pool: 10 },
  'acta-best': { label: 'acta, executors 128', executors: 128, pool: 10 },
  'acta-zero': {
    label: "acta, executors 128, retention zero (succeededMs 0: a succeeded job is deleted in its completion's call with its attempt, graphile-worker's shape; docs/retention.md)",
    executors: 128,
    pool: 10,
  },
  'graphile-default': { label: 'graphile-worker 0.18 defaults (concurrency 1, pool 10)', pool: 10 },
  'graphile-perf': {
    label: 'graphile-worker 0.18 perf preset (concurrentJobs 24, pool 25, localQueue 500, complete/failJobBatchDelay 0)',
    concurrentJobs: 24,
    pool: 25,
    localQueueSize: 500,
  },
  'pgboss-best': {
    label: 'pg-boss 12 (batchSize 1000, burstWhenBatchFull, localConcurrency 2, LISTEN/NOTIFY)',
    batchSize: 1000,
    localConcurrency: 2,
    pool: 10,
  },
  bullmq: { label: 'BullMQ 6.7 on Redis (concurrency 50)', concurrency: 50, pool: 0 },
} as const;

/**
 * Connections per worker process: the system's own pool size, capped so that 8 processes of any
 * system stay well inside a default max_connections of 100 (shared with whatever else runs).
 */
export function poolCap(system: SystemName, processes: number): number {
  return Math.min(SETTINGS[system].pool, Math.max(2, Math.floor(48 / processes)));
}

/** What a worker process does. */
export type ChildMode = 'drain' | 'latency' | 'idle';

export interface ChildConfig {
  system: SystemName;
  mode: ChildMode;
  /** PostgreSQL URL of this run's database (PG systems). */
  url?: string;
  /** Redis URL and key prefix (BullMQ). */
  redisUrl?: string;
  redisPrefix?: string;
  /** Connections of this process's pool. */
  pool: number;
  /** Executor count override for acta (profiling). */
  executors?: number;
  /**
   * acta keyed drains (bench/scenarios.ts, KeyedDrain): the no-op definition declares
   * `concurrency: { key, limit }` with this limit; the jobs carry their keys from the enqueue.
   */
  concurrencyLimit?: number;
  /** acta rate-limited drains: the no-op definition declares `rate: { key, limit, perMs }` with these; the jobs carry their rate keys. */
  rateLimit?: { limit: number; perMs: number };
}

export type ToChild =
  | { type: 'go' }
  | { type: 'stop' }
  | { type: 'ping'; id: number }
  | { type: 'count'; id: number }
  /** Warm drains: note when the next handler starts (`monotonicMs`); answered by `armed`. */
  | { type: 'arm'; id: number };
export type FromChild =
  | { type: 'ready' }
  | { type: 'started'; ms: number }
  | { type: 'job'; k: number }
  | { type: 'pong'; id: number }
  /** Answer to `count`: handlers this process has run so far. */
  | { type: 'counted'; id: number; handled: number; firstAfterArmMs?: number }
  | { type: 'armed'; id: number }
  | { type: 'stopped' }
  | { type: 'error'; message: string };

/**
 * Milliseconds on CLOCK_MONOTONIC (libuv's hrtime): one clock for every process on the machine,
 * unlike `performance.now()`, whose origin is each process's start.
 */
export const monotonicMs = (): number => Number(process.hrtime.bigint()) / 1e6;
