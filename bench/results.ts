/** The result model shared by the orchestrator, the report and the smoke test. */
import { isActaPolicySystem, type SystemName } from './common';

export type RowSystem = SystemName | 'floor';

export interface ScenarioInfo {
  id: string;
  label: string;
  unit: string;
  better: 'higher' | 'lower';
}

/** Every row the bench can produce, in report order. */
export const SCENARIOS: ScenarioInfo[] = [
  { id: 'enqueue', label: '1. bulk enqueue, N jobs in one call', unit: 'jobs/s', better: 'higher' },
  { id: 'drain1-fresh', label: '2. drain, 1 process, fresh table', unit: 'jobs/s', better: 'higher' },
  { id: 'drain1-analyzed', label: '2. drain, 1 process, after ANALYZE', unit: 'jobs/s', better: 'higher' },
  { id: 'drain2-fresh', label: '3. drain, 2 processes, fresh table', unit: 'jobs/s', better: 'higher' },
  { id: 'drain2-analyzed', label: '3. drain, 2 processes, after ANALYZE', unit: 'jobs/s', better: 'higher' },
  { id: 'drain8-fresh', label: '3. drain, 8 processes, fresh table', unit: 'jobs/s', better: 'higher' },
  { id: 'drain8-analyzed', label: '3. drain, 8 processes, after ANALYZE', unit: 'jobs/s', better: 'higher' },
  { id: 'drain-keys-1000', label: 'policies: drain, 1 process, fresh, jobs round-robin over 1,000 concurrency keys of limit 1 (acta only)', unit: 'jobs/s', better: 'higher' },
  { id: 'keys-1000-vs-plain', label: 'policies: 1,000-key drain ÷ the same run\'s plain drain (2., fresh)', unit: '×', better: 'higher' },
  { id: 'keys-1000-inflight-max', label: 'policies: 1,000-key drain, most attempts of one key in flight at once (attempt ledger; limit 1)', unit: 'attempts', better: 'lower' },
  { id: 'drain-hot-key', label: 'policies: drain, 1 process, fresh, every job on one concurrency key of limit 10 (acta only)', unit: 'jobs/s', better: 'higher' },
  { id: 'hot-key-vs-plain', label: 'policies: hot-key drain ÷ the same run\'s plain drain (2., fresh)', unit: '×', better: 'higher' },
  { id: 'hot-key-bound', label: 'policies: hot-key bound, limit 10 ÷ mean slot hold (claim → completion write, from the attempt ledger)', unit: 'jobs/s', better: 'higher' },
  { id: 'drain-held', label: 'drain, 1 process, fresh, 10 × the jobs while another connection holds a transaction open (its snapshot)', unit: 'jobs/s', better: 'higher' },
  { id: 'drain-rate-1m', label: 'policies: drain, 1 process, fresh, every job through one rate meter of 1,000,000 an hour (acta only)', unit: 'jobs/s', better: 'higher' },
  { id: 'rate-1m-vs-plain', label: 'policies: rate-limited drain ÷ the same run\'s plain drain (2., fresh)', unit: '×', better: 'higher' },
  { id: 'hot-key-inflight-max', label: 'policies: hot-key drain, most attempts in flight at once (attempt ledger; limit 10)', unit: 'attempts', better: 'lower' },
  { id: 'drain1-warm', label: '3. drain, 1 warm process (after a warm-up; not an original target)', unit: 'jobs/s', better: 'higher' },
  { id: 'drain8-warm', label: '3. drain, 8 warm processes (after a warm-up; not an original target)', unit: 'jobs/s', better: 'higher' },
  { id: 'latency-p50', label: '4. latency enqueue→handler start, p50', unit: 'ms', better: 'lower' },
  { id: 'latency-p99', label: '4. latency enqueue→handler start, p99', unit: 'ms', better: 'lower' },
  { id: 'xacts-per-job', label: '5. transactions per job, 1 process (drain)', unit: 'tx/job', better: 'lower' },
  { id: 'cpu-worker', label: '5. CPU per job, 1 process (drain, fresh): worker process', unit: 'µs/job', better: 'lower' },
  { id: 'cpu-server', label: '5. CPU per job, 1 process (drain, fresh): database (BullMQ: Redis)', unit: 'µs/job', better: 'lower' },
  { id: 'idle-xacts', label: 'idle worker, transactions per second', unit: 'tx/s', better: 'lower' },
  { id: 'memory-rss', label: '6. worker RSS max with a large backlog', unit: 'MiB', better: 'lower' },
  { id: 'backpressure-claims', label: 'backpressure: claims during a completion stall', unit: 'rows', better: 'lower' },
  { id: 'floor-enqueue', label: '7. floor: enqueue_jobs in the server', unit: 'jobs/s', better: 'higher' },
  { id: 'floor-drain-fresh', label: '7. floor: claim+complete loop in the server, fresh table', unit: 'jobs/s', better: 'higher' },
  { id: 'floor-drain-analyzed', label: '7. floor: claim+complete loop in the server, after ANALYZE', unit: 'jobs/s', better: 'higher' },
];

export interface Row {
  scenario: string;
  system: RowSystem;
  unit: string;
  samples: number[];
  median: number;
  min: number;
  max: number;
  errors: string[];
}

export interface TargetCheck {
  target: string;
  required: string;
  measured: string;
  met: boolean | null;
}

export interface BenchResult {
  meta: Record<string, unknown>;
  settings: Record<string, string>;
  rows: Row[];
  targets: TargetCheck[];
  /** Every measurement with its details, in the order taken. */
  raw: { run: number; scenario: string; system: RowSystem; value?: number; error?: string; details?: unknown }[];
}

/**
 * Systems measured by the warm drains: all but graphile-worker at its defaults, which works one job
 * at a time (~1,500 jobs/s here: its warm-up alone, 2 × 20,000 jobs, would take ~30 s a run).
 */
export function warmDrained(system: SystemName): boolean {
  return system !== 'graphile-default';
}

/**
 * The (scenario, system) rows a complete run must produce for these systems: drains after
 * ANALYZE, transactions and idle cost only for the PostgreSQL systems; warm drains for
 * `warmDrained` ones; keyed drains, memory and backpressure only for acta; the floor once.
 */
export function expectedRows(systems: readonly SystemName[]): { scenario: string; system: RowSystem }[] {
  const pg = systems.filter((s) => s !== 'bullmq');
  const acta = systems.filter(isActaPolicySystem);
  const out: { scenario: string; system: RowSystem }[] = [];
  const add = (scenario: string, list: readonly RowSystem[]) => list.forEach((system) => out.push({ scenario, system }));
  add('enqueue', systems);
  for (const p of [1, 2, 8]) {
    add(`drain${p}-fresh`, systems);
    add(`drain${p}-analyzed`, pg);
  }
  for (const p of [1, 8]) add(`drain${p}-warm`, systems.filter(warmDrained));
  for (const scenario of KEYED_ROWS) add(scenario, acta);
  for (const scenario of RATE_ROWS) add(scenario, acta);
  add('drain-held', pg);
  add('latency-p50', systems);
  add('latency-p99', systems);
  add('xacts-per-job', pg);
  add('idle-xacts', pg);
  add('memory-rss', acta);
  add('backpressure-claims', acta);
  if (acta.length > 0) {
    for (const scenario of ['floor-enqueue', 'floor-drain-fresh', 'floor-drain-analyzed']) add(scenario, ['floor']);
  }
  return out;
}

/** The rows of the keyed drains (acta only; bench/run.ts, group `keys`). */
export const KEYED_ROWS = ['drain-keys-1000', 'keys-1000-vs-plain', 'keys-1000-inflight-max', 'drain-hot-key', 'hot-key-vs-plain', 'hot-key-bound', 'hot-key-inflight-max'] as const;

/** The rows of the rate-limited drain (acta only; bench/run.ts, group `rate`). */
export const RATE_ROWS = ['drain-rate-1m', 'rate-1m-vs-plain'] as const;

/** Rows whose value may legitimately be 0 (a count or an idle rate); every other value must be > 0. */
export const MAY_BE_ZERO = new Set(['idle-xacts', 'backpressure-claims']);
