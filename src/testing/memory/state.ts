/*
 * The in-memory ledger's tables: acta's schema (sql/migrations/) as plain records, with the
 * columns' names in camelCase and times in ms on the ledger's scheduler. Only the decisions of
 * sql/functions/ change them (claim.ts, gates.ts, jobs.ts, workers.ts).
 */
import type { DeclaredPolicy, ExecutionOutcome, JobStatus } from '../../db/types';
import type { MemoryAlert } from './alerts';

export type GateKind = 'lane' | 'concurrency' | 'rate';

/** A row of acta.jobs. */
export interface MemoryJob {
  id: number;
  namespace: string;
  definition: string;
  payload: unknown;
  status: JobStatus;
  priority: number;
  runAt: number;
  execution: number;
  attempts: number;
  maxAttempts: number | null;
  unchargedReturns: number;
  leaseHolder: string | null;
  leaseExpiresAt: number | null;
  claimedAt: number | null;
  started: boolean;
  idempotencyKey: string | null;
  concurrencyKey: string | null;
  rateKey: string | null;
  lane: string | null;
  blockedBy: GateKind | null;
  fairTag: number | null;
  progress: unknown;
  cancelRequestedAt: number | null;
  watched: boolean;
  result: unknown;
  error: unknown;
  createdAt: number;
  finishedAt: number | null;
  /** Migration 0016 (workflows): the wait of a Waiting row, and a parent's and a child's counters. */
  waitNames: string[] | null;
  waitStep: string | null;
  waitUntil: number | null;
  parentId: number | null;
  childrenOpen: number | null;
  failParent: boolean | null;
  childrenFailed: boolean | null;
  /** Migration 0013 (schedules): a fire's schedule and scheduled instant; null on every other job. */
  schedule: string | null;
  scheduledAt: number | null;
}

/** A row of acta.schedules (migration 0013; docs/schedules.md). */
export interface MemorySchedule {
  namespace: string;
  name: string;
  definition: string;
  cron: string;
  timeZone: string;
  payload: unknown;
  catchUp: 'latest' | 'all' | 'none';
  catchUpWindowMs: number | null;
  priority: number;
  /** Each fire's policy keys (migration 0021). */
  concurrencyKey: string | null;
  rateKey: string | null;
  lane: string | null;
  source: 'declared' | 'runtime';
  paused: boolean;
  version: number;
  /** The fire armed or running now, and its instant. */
  jobId: number | null;
  nextFireAt: number | null;
  /** The last fire that ended: its instant, job and outcome. */
  lastFireAt: number | null;
  lastJobId: number | null;
  lastOutcome: string | null;
  createdAt: number;
  updatedAt: number;
}

/** A row of acta.signals: one signal in a job's mailbox. */
export interface MemorySignal {
  id: number;
  jobId: number;
  name: string;
  payload: unknown;
  idempotencyKey: string | null;
  sentAt: number;
  consumedAt: number | null;
  consumedStep: string | null;
}

/** A row of acta.outbox (migration 0018): an event not fanned out yet. */
export interface MemoryEvent {
  id: number;
  namespace: string;
  topic: string;
  key: string | null;
  message: unknown;
  publishedAt: number;
}

/** A row of acta.executions: one finished attempt. */
export interface MemoryExecution {
  jobId: number;
  execution: number;
  workerId: string | null;
  claimedAt: number;
  finishedAt: number;
  outcome: ExecutionOutcome;
  charged: boolean;
  error: unknown;
}

/** A row of acta.steps. */
export interface MemoryStep {
  jobId: number;
  name: string;
  execution: number;
  result: unknown;
  recordedAt: number;
}

/** A row of acta.workers. */
export interface MemoryWorker {
  id: string;
  namespace: string;
  hostname: string;
  pid: number;
  definitions: string[];
  maxAttempts: (number | null)[] | null;
  build: string | null;
  policies: Record<string, DeclaredPolicy> | null;
  status: 'alive' | 'stopped' | 'dead';
  startedAt: number;
  lastHeartbeatAt: number;
  stoppedAt: number | null;
}

/** A row of acta.definitions: a definition's policy as it applies (acta.refresh_definitions). */
export interface MemoryDefinition {
  namespace: string;
  name: string;
  maxAttempts: number | null;
  timeoutMs: number | null;
  concurrencyLimit: number | null;
  rateLimit: number | null;
  ratePerMs: number | null;
  fair: boolean;
  build: string | null;
  policy: DeclaredPolicy | null;
  registeredAt: number;
}

/** A row of acta.namespaces. */
export interface MemoryNamespace {
  name: string;
  createdAt: number;
  policyVersion: number;
}

/** A row of acta.passes. */
export interface MemoryPass {
  namespace: string;
  pass: string;
  dueAt: number;
}

/** A row of acta.pauses (migration 0015): definition '' is the whole namespace. */
export interface MemoryPause {
  namespace: string;
  definition: string;
  pausedBy: string | null;
  reason: string | null;
  pausedAt: number;
}

/** A row of acta.gates: a lane, a concurrency key or a rate meter with parked rows, or a meter's counts. */
export interface MemoryGate {
  namespace: string;
  kind: GateKind;
  key: string;
  recheckAt: number | null;
  /** A rate meter's starts, all counted (its newest meter_starts row's upto). */
  starts: number;
  /** A rate meter's count up to the last meter_starts row deleted. */
  startsPruned: number;
  shutUntil: number | null;
}

/** A row of acta.meter_starts (migration 0011): a rate meter's starts at one admission instant. */
export interface MemoryMeterStart {
  namespace: string;
  key: string;
  /** The admission instant (its rows' claimedAt). */
  at: number;
  /** The meter's count of starts up to and including this instant's. */
  upto: number;
}

/**
 * One call, as one transaction: its now() (ms on the scheduler, the same for the whole call, as a
 * transaction's now() is) and the namespaces it wakes with pg_notify('acta_jobs', namespace) at
 * its commit (one notification per namespace per call, as PostgreSQL folds a transaction's
 * duplicates).
 */
export interface Tx {
  readonly now: number;
  /** NOTIFY acta_jobs with `payload` (a namespace, or a running job's 'cancel:…'), delivered after the call. */
  notify(payload: string): void;
}

/** An error as PostgreSQL raises it: `code` is its SQLSTATE (src/db/transient.ts reads it). */
export class SqlStateError extends Error {
  constructor(
    readonly code: string,
    message: string,
    /** The error's DETAIL, as pg's DatabaseError carries it. */
    readonly detail?: string,
  ) {
    super(message);
    this.name = 'SqlStateError';
  }
}

/** Claim order: priority (higher first), due time, id (acta.claim_jobs, jobs_claim_idx). */
export const byClaimOrder = (a: MemoryJob, b: MemoryJob): number => b.priority - a.priority || a.runAt - b.runAt || a.id - b.id;
/** Due order: due time, id (jobs_due_idx). */
export const byDueOrder = (a: MemoryJob, b: MemoryJob): number => a.runAt - b.runAt || a.id - b.id;

/** A text as jsonb takes it (`$1::jsonb`): parsed, or refused with PostgreSQL's SQLSTATE. */
export function parseJsonb(text: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new SqlStateError('22P02', `invalid input syntax for type json: ${(err as Error).message}`);
  }
  checkJsonbStrings(value);
  return jsonbKeyOrder(value);
}

/**
 * `value` with every object's keys in jsonb's order: shorter first, then by their UTF-8 bytes
 * (PostgreSQL, "JSON Types": jsonb does not keep key order). A test then sees the bytes a server
 * would return, e.g. JSON.stringify of a payload or an event's message (test/ledger/contract.ts).
 */
function jsonbKeyOrder(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(jsonbKeyOrder);
  if (value === null || typeof value !== 'object') return value;
  const keys = Object.keys(value).map((k) => [k, Buffer.from(k, 'utf8')] as const);
  keys.sort(([, a], [, b]) => a.length - b.length || Buffer.compare(a, b));
  const out: Record<string, unknown> = {};
  // defineProperty: a key "__proto__" stays a key, as JSON.parse made it.
  for (const [k] of keys) Object.defineProperty(out, k, { value: jsonbKeyOrder((value as Record<string, unknown>)[k]), enumerable: true, writable: true, configurable: true });
  return out;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** jsonb holds no NUL (22P05) and no lone surrogate (22P02), in strings and keys alike. */
function checkJsonbStrings(value: unknown): void {
  const check = (s: string) => {
    if (s.includes('\u0000')) throw new SqlStateError('22P05', 'unsupported Unicode escape sequence');
    if (LONE_SURROGATE.test(s)) throw new SqlStateError('22P02', 'invalid input syntax for type json: a lone surrogate');
  };
  if (typeof value === 'string') check(value);
  else if (Array.isArray(value)) value.forEach(checkJsonbStrings);
  else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      check(k);
      checkJsonbStrings(v);
    }
  }
}

/** A stored JSON value as a read returns it: a copy, so no caller can change the ledger's. */
export const copyJson = <T>(value: T): T => (value === undefined || value === null ? value : (JSON.parse(JSON.stringify(value)) as T));

/** A job id as `$1::bigint` reads it (leading zeros and all), or SQLSTATE 22P02. */
export function jobIdOf(id: string): number {
  if (!/^\s*[+-]?[0-9]+\s*$/.test(id)) throw new SqlStateError('22P02', `invalid input syntax for type bigint: "${id}"`);
  return Number(BigInt(id.trim()));
}

const key2 = (a: string, b: string) => `${a}\u0000${b}`;
const key3 = (a: string, b: string, c: string) => `${a}\u0000${b}\u0000${c}`;

/** The tables, and the lookups the decisions make on them. */
export class Store {
  /** acta.jobs by id, in id order (ids only grow). */
  readonly jobs = new Map<number, MemoryJob>();
  /** Each namespace's jobs in id order: every decision is within one namespace. */
  private readonly jobsByNamespace = new Map<string, MemoryJob[]>();
  readonly executions: MemoryExecution[] = [];
  /** acta.alerts by (namespace, rule, subject). */
  readonly alerts = new Map<string, MemoryAlert>();
  readonly steps = new Map<number, Map<string, MemoryStep>>();
  /** acta.signals in id order. */
  readonly signals: MemorySignal[] = [];
  /** acta.outbox in id order. */
  events: MemoryEvent[] = [];
  /** acta.outbox's id sequence. */
  private lastEventId = 0;
  /** acta.workers in registration order. */
  readonly workers = new Map<string, MemoryWorker>();
  readonly namespaces = new Map<string, MemoryNamespace>();
  private readonly definitionRows = new Map<string, MemoryDefinition>();
  private readonly passRows = new Map<string, MemoryPass>();
  private readonly gateRows = new Map<string, MemoryGate>();
  private readonly pauseRows = new Map<string, MemoryPause>();
  private readonly scheduleRows = new Map<string, MemorySchedule>();
  /** jobs_schedule_fire_idx: the fire of (namespace, schedule, instant). */
  private readonly fireRows = new Map<string, number>();
  /** acta.meter_starts, per meter in count (and time) order. */
  private readonly meterRows = new Map<string, MemoryMeterStart[]>();
  /** acta.jobs_id_seq: every element of an enqueue draws one, created or not. */
  private lastId = 0;

  /** A fresh schema at `now`: migration 0001's namespace 'default' and 0007's recovery pass for it, due. */
  constructor(now: number) {
    this.namespaces.set('default', { name: 'default', createdAt: now, policyVersion: 0 });
    this.passRows.set(key2('default', 'recovery'), { namespace: 'default', pass: 'recovery', dueAt: now });
  }

  nextId(): number {
    return ++this.lastId;
  }

  /** The id sequence has reached `id` (acta.jobs_id_seq's last_value). */
  issued(id: number): boolean {
    return id <= this.lastId;
  }

  nextEventId(): number {
    return ++this.lastEventId;
  }

  insertJob(job: MemoryJob): void {
    if (job.schedule !== null) {
      const k = key3(job.namespace, job.schedule, String(job.scheduledAt));
      if (this.fireRows.has(k)) throw new SqlStateError('23505', 'duplicate key value violates unique constraint "jobs_schedule_fire_idx"');
      this.fireRows.set(k, job.id);
    }
    this.jobs.set(job.id, job);
    let list = this.jobsByNamespace.get(job.namespace);
    if (!list) this.jobsByNamespace.set(job.namespace, (list = []));
    list.push(job);
  }

  /** Deletes jobs of one namespace with their executions, steps and signals (acta.delete_jobs). */
  deleteJobs(namespace: string, ids: ReadonlySet<number>): void {
    for (const id of ids) {
      const job = this.jobs.get(id);
      if (job?.schedule != null) this.fireRows.delete(key3(job.namespace, job.schedule, String(job.scheduledAt)));
      this.jobs.delete(id);
      this.steps.delete(id);
    }
    const list = this.jobsByNamespace.get(namespace);
    if (list) this.jobsByNamespace.set(namespace, list.filter((j) => !ids.has(j.id)));
    const kept = this.executions.filter((e) => !ids.has(e.jobId));
    this.executions.splice(0, this.executions.length, ...kept);
    const signals = this.signals.filter((g) => !ids.has(g.jobId));
    this.signals.splice(0, this.signals.length, ...signals);
  }

  /** Deletes a job row: an unstarted fire (no executions, no steps), as the schedules SQL does. */
  deleteJob(id: number): void {
    const job = this.jobs.get(id);
    if (!job) return;
    this.jobs.delete(id);
    if (job.schedule !== null) this.fireRows.delete(key3(job.namespace, job.schedule, String(job.scheduledAt)));
    const list = this.jobsByNamespace.get(job.namespace);
    if (list) list.splice(list.indexOf(job), 1);
  }

  /** Is (namespace, schedule, instant) fired already (jobs_schedule_fire_idx)? */
  hasFire(namespace: string, schedule: string, at: number): boolean {
    return this.fireRows.has(key3(namespace, schedule, String(at)));
  }

  schedule(namespace: string, name: string): MemorySchedule | undefined {
    return this.scheduleRows.get(key2(namespace, name));
  }

  putSchedule(row: MemorySchedule): void {
    this.scheduleRows.set(key2(row.namespace, row.name), row);
  }

  deleteSchedule(namespace: string, name: string): boolean {
    return this.scheduleRows.delete(key2(namespace, name));
  }

  /** The namespace's schedules in name order. */
  schedulesIn(namespace: string): MemorySchedule[] {
    return [...this.scheduleRows.values()].filter((x) => x.namespace === namespace).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  allSchedules(): IterableIterator<MemorySchedule> {
    return this.scheduleRows.values();
  }

  /** The namespace's jobs in id order (the live records: decisions change them in place). */
  jobsIn(namespace: string): readonly MemoryJob[] {
    return this.jobsByNamespace.get(namespace) ?? [];
  }

  definition(namespace: string, name: string): MemoryDefinition | undefined {
    return this.definitionRows.get(key2(namespace, name));
  }

  ensureDefinition(namespace: string, name: string, now: number): void {
    const k = key2(namespace, name);
    if (!this.definitionRows.has(k)) {
      this.definitionRows.set(k, { namespace, name, maxAttempts: null, timeoutMs: null, concurrencyLimit: null, rateLimit: null, ratePerMs: null, fair: false, build: null, policy: null, registeredAt: now });
    }
  }

  allDefinitions(): IterableIterator<MemoryDefinition> {
    return this.definitionRows.values();
  }

  pass(namespace: string, pass: string): MemoryPass | undefined {
    return this.passRows.get(key2(namespace, pass));
  }

  insertPass(namespace: string, pass: string, dueAt: number): void {
    this.passRows.set(key2(namespace, pass), { namespace, pass, dueAt });
  }

  allPasses(): IterableIterator<MemoryPass> {
    return this.passRows.values();
  }

  gate(namespace: string, kind: GateKind, key: string): MemoryGate | undefined {
    return this.gateRows.get(key3(namespace, kind, key));
  }

  /** The gate's row, inserted with the columns' defaults when missing. */
  upsertGate(namespace: string, kind: GateKind, key: string): MemoryGate {
    const k = key3(namespace, kind, key);
    let gate = this.gateRows.get(k);
    if (!gate) this.gateRows.set(k, (gate = { namespace, kind, key, recheckAt: null, starts: 0, startsPruned: 0, shutUntil: null }));
    return gate;
  }

  deleteGate(namespace: string, kind: GateKind, key: string): void {
    this.gateRows.delete(key3(namespace, kind, key));
  }

  gatesIn(namespace: string): MemoryGate[] {
    return [...this.gateRows.values()].filter((g) => g.namespace === namespace);
  }

  allGates(): IterableIterator<MemoryGate> {
    return this.gateRows.values();
  }

  pause(namespace: string, definition: string): MemoryPause | undefined {
    return this.pauseRows.get(key2(namespace, definition));
  }

  insertPause(row: MemoryPause): void {
    this.pauseRows.set(key2(row.namespace, row.definition), row);
  }

  deletePause(namespace: string, definition: string): boolean {
    return this.pauseRows.delete(key2(namespace, definition));
  }

  /** The namespace's pauses in definition order (the namespace's own, '', first). */
  pausesIn(namespace: string): MemoryPause[] {
    return [...this.pauseRows.values()].filter((p) => p.namespace === namespace).sort((a, b) => (a.definition < b.definition ? -1 : a.definition > b.definition ? 1 : 0));
  }

  allPauses(): IterableIterator<MemoryPause> {
    return this.pauseRows.values();
  }

  /** A rate meter's acta.meter_starts rows, in count order (the array itself: callers append and delete). */
  meterLog(namespace: string, key: string): MemoryMeterStart[] {
    const k = key3(namespace, 'rate', key);
    let log = this.meterRows.get(k);
    if (!log) this.meterRows.set(k, (log = []));
    return log;
  }

  allMeterStarts(): MemoryMeterStart[] {
    return [...this.meterRows.values()].flat();
  }
}
