/*
 * A job's life after the claim, and a client's calls: enqueue, completion, recovery, cancel, steps,
 * and the read of a job (docs/DESIGN.md, "The ledger" and "Delivery").
 */
import { PIPELINE } from '../../config';
import { missingPolicyKeys, unusedPolicyKeys } from '../../policies/enqueueRule';
import { retryDelayParam } from '../../db/executions';
import { attemptLimit, type DepthStatus, type EnqueueRows, EXECUTIONS_SHOWN, type JobCount, type ProgressRow } from '../../db/jobs';
import type { CancelAnswer, CompletionAck, CompletionOutcome, CompletionRow, ExecutionOutcome, JobId, JobRecord, JobStatus, RecoveredRow, StepRecord, StoredError } from '../../db/types';
import { recheckGates, releaseGate } from './gates';
import { deleteAtCompletion } from './retention';
import { fireEnded } from './schedules';
import { copyJson, type GateKind, jobIdOf, type MemoryJob, parseJsonb, SqlStateError, type Store, type Tx } from './state';
import { refreshDefinitions } from './workers';
import { settleWaits, tellParents } from './workflows';

/** An enqueue wakes idle workers for a job due within this (enqueue_jobs.sql, Wakeup). */
const WAKE_WITHIN_MS = 1_000;

/** acta.enqueue_jobs (sql/functions/enqueue_jobs.sql): a job per element, or the id its idempotency key names. */
export function enqueueJobs(store: Store, tx: Tx, namespace: string, rows: EnqueueRows): { id: JobId | null; created: boolean }[] {
  const payloads = parseJsonb(`[${rows.payloads.join(',')}]`) as unknown[];
  const at = <T>(values: (T | null)[] | undefined, i: number): T | null => values?.[i] ?? null;
  rows.maxAttempts.forEach((m) => {
    if (m !== null && m < 1) throw new SqlStateError('23514', 'new row for relation "jobs" violates check constraint "jobs_max_attempts_check"');
  });
  refuseUndeclared(store, namespace, rows);
  const byKey = new Map<string, number>();
  for (const j of store.jobsIn(namespace)) if (j.idempotencyKey !== null) byKey.set(j.idempotencyKey, j.id);
  const out = rows.definitions.map((definition, i) => {
    const id = store.nextId();
    const key = at(rows.idempotencyKeys, i);
    const taken = key === null ? undefined : byKey.get(key);
    if (taken !== undefined) return { id: String(taken), created: false };
    if (key !== null) byKey.set(key, id);
    const runAt = at(rows.runAts, i);
    store.insertJob({
      id,
      namespace,
      definition,
      payload: payloads[i],
      status: 'ready',
      priority: at(rows.priorities, i) ?? 0,
      runAt: runAt === null ? tx.now : runAt.getTime(),
      execution: 0,
      attempts: 0,
      maxAttempts: at(rows.maxAttempts, i),
      unchargedReturns: 0,
      leaseHolder: null,
      leaseExpiresAt: null,
      claimedAt: null,
      started: false,
      idempotencyKey: key,
      concurrencyKey: at(rows.concurrencyKeys, i),
      rateKey: at(rows.rateKeys, i),
      lane: at(rows.lanes, i),
      blockedBy: null,
      fairTag: null,
      progress: null,
      cancelRequestedAt: null,
      watched: false,
      result: null,
      error: null,
      createdAt: tx.now,
      finishedAt: null,
      waitNames: null,
      waitStep: null,
      waitUntil: null,
      parentId: null,
      childrenOpen: null,
      failParent: null,
      childrenFailed: null,
      schedule: null,
      scheduledAt: null,
    });
    return { id: String(id), created: true };
  });
  if (rows.runAts.every((r) => r === null) || rows.runAts.some((r) => r === null || r.getTime() <= tx.now + WAKE_WITHIN_MS)) tx.notify(namespace);
  return out;
}

/**
 * enqueue_jobs.sql's Rule: the first checked element whose definition no worker declared in the
 * namespace, that lacks a key one of its declared policies needs, or that gives a concurrency or
 * rate key for a policy it does not declare, refuses the call (AC001).
 */
function refuseUndeclared(store: Store, namespace: string, rows: EnqueueRows): void {
  if (!rows.checks?.some((c) => c)) return;
  rows.checks.forEach((checked, i) => {
    if (!checked) return;
    const name = rows.definitions[i];
    const d = store.definition(namespace, name);
    const keys = { concurrencyKey: rows.concurrencyKeys?.[i], rateKey: rows.rateKeys?.[i], lane: rows.lanes?.[i] };
    const missing = !d ? [] : missingPolicyKeys(d.policy, keys);
    const unused = !d ? [] : unusedPolicyKeys(d.policy, keys);
    if (!d || missing.length > 0 || unused.length > 0) {
      const detail = { item: i, name, missing, ...(unused.length > 0 ? { unused } : {}) };
      throw new SqlStateError('AC001', `acta.enqueue_jobs: definition ${name} refused in namespace ${namespace} (see detail)`, JSON.stringify(detail));
    }
  });
}

/** A row of complete_executions.sql's `decision` table. */
interface Decision {
  status: JobStatus;
  charged: boolean;
  unchargedReturn: boolean;
  settles: boolean;
  due: 'kept' | 'now' | 'retry' | 'wait';
  finished: boolean;
  recordedAs: ExecutionOutcome;
  shutsMeter: boolean;
}

const decide = (outcome: CompletionOutcome, lastAttempt: boolean): Decision | undefined => {
  const d = (status: JobStatus, charged: boolean, due: Decision['due'], recordedAs: ExecutionOutcome, more: Partial<Decision> = {}): Decision => ({
    status,
    charged,
    unchargedReturn: false,
    settles: false,
    due,
    finished: status === 'succeeded' || status === 'failed' || status === 'cancelled',
    recordedAs,
    shutsMeter: false,
    ...more,
  });
  switch (outcome) {
    case 'succeeded':
      return d('succeeded', true, 'kept', 'succeeded', { settles: true });
    case 'failed':
      return lastAttempt ? d('failed', true, 'kept', 'failed_final') : d('ready', true, 'retry', 'failed');
    case 'failed_final':
      return d('failed', true, 'kept', 'failed_final');
    case 'handed_back':
      return d('ready', false, 'now', 'handed_back');
    case 'expired':
      return d('ready', false, 'now', 'expired', { unchargedReturn: true });
    case 'rate_limited':
      return d('ready', false, 'retry', 'rate_limited', { shutsMeter: true });
    case 'cancelled':
      return d('cancelled', false, 'kept', 'cancelled');
    case 'skipped':
      return d('cancelled', false, 'kept', 'skipped');
    case 'signal_wait':
    case 'children_wait':
      return d('waiting', false, 'wait', outcome);
    default:
      return undefined; // names no shape: not applied
  }
};

/** acta.complete_executions (sql/functions/complete_executions.sql): the batch, fenced, then the hand-on. */
export function completeExecutions(store: Store, tx: Tx, workerId: string, batch: CompletionRow[]): CompletionAck[] {
  const input = batch.map((c) => ({
    id: jobIdOf(c.id),
    execution: c.execution,
    outcome: c.outcome,
    result: c.result === null ? null : parseJsonb(c.result),
    error: c.error === null ? null : parseJsonb(c.error),
    delayMs: retryDelayParam(c.retryDelayMs),
    nextFireAt: c.nextFireAt?.getTime() ?? null,
  }));
  // Each row is updated once, from its values before this call (one UPDATE statement).
  const done = new Map<number, { execution: number; status: CompletionAck['status']; job: MemoryJob; decision: Decision; delayMs: number; outcome: CompletionOutcome; nextFireAt: number | null }>();
  for (const el of input) {
    const job = store.jobs.get(el.id);
    if (!job || done.has(el.id) || job.execution !== el.execution || job.status !== 'executing' || job.leaseHolder !== workerId) continue;
    // A cancel requested while the attempt ran ends the job Cancelled unless it succeeded.
    const outcome = job.cancelRequestedAt === null || el.outcome === 'succeeded' ? el.outcome : 'cancelled';
    const decision = decide(outcome, job.maxAttempts !== null && job.attempts + 1 >= job.maxAttempts);
    if (!decision) continue;
    store.executions.push({ jobId: job.id, execution: job.execution, workerId, claimedAt: job.claimedAt as number, finishedAt: tx.now, outcome: decision.recordedAs, charged: decision.charged, error: el.error });
    job.status = decision.status;
    job.attempts += decision.charged ? 1 : 0;
    job.unchargedReturns += decision.unchargedReturn ? 1 : 0;
    job.runAt = decision.due === 'now' ? tx.now : decision.due === 'retry' ? tx.now + el.delayMs : job.runAt;
    if (decision.settles) {
      job.result = el.result;
      job.error = null;
    } else {
      job.error = el.error ?? job.error;
    }
    job.leaseHolder = null;
    job.leaseExpiresAt = null;
    job.started = false;
    job.finishedAt = decision.finished ? tx.now : null;
    if (decision.due === 'retry') job.fairTag = null;
    const wait = decision.due === 'wait' ? (el.result as { names?: string[]; step?: string; timeoutMs?: number | null } | null) : null;
    job.waitNames = wait?.names ?? null;
    job.waitStep = wait?.step ?? null;
    job.waitUntil = wait?.timeoutMs === undefined || wait.timeoutMs === null ? null : tx.now + wait.timeoutMs;
    const status = decision.status === 'succeeded' || decision.status === 'failed' || decision.status === 'cancelled' || decision.status === 'waiting' ? decision.status : 'ready';
    done.set(el.id, { execution: el.execution, status, job, decision, delayMs: el.delayMs, outcome: el.outcome, nextFireAt: el.nextFireAt });
  }
  const acks = batch.map((c, i) => {
    const d = done.get(input[i].id);
    return { id: c.id, execution: c.execution, status: d && d.execution === c.execution ? d.status : ('stale' as const) };
  });

  // The hand-on, under the namespace of the applied rows.
  const applied = [...done.values()];
  let released = false;
  if (applied.length > 0) {
    const namespace = applied.map((d) => d.job.namespace).sort()[0];
    const gates = new Map<string, { kind: GateKind; key: string }>();
    const add = (kind: GateKind, key: string | null) => key !== null && gates.set(`${kind}\u0000${key}`, { kind, key });
    for (const { job, decision } of applied) {
      add('concurrency', job.concurrencyKey);
      if (decision.finished) add('lane', job.lane);
      if (decision.shutsMeter) add('rate', job.rateKey);
    }
    for (const { job, decision, delayMs } of applied) {
      if (!decision.shutsMeter || job.rateKey === null) continue;
      const gate = store.upsertGate(namespace, 'rate', job.rateKey);
      gate.shutUntil = Math.max(gate.shutUntil ?? -Infinity, tx.now + delayMs);
    }
    for (const { kind, key } of gates.values()) {
      if ((kind === 'lane' || store.gate(namespace, kind, key)) && releaseGate(store, tx, namespace, kind, key) > 0) released = true;
    }
  }
  // Recurring fire: a schedule's fire that ended for good arms the instant its worker sent.
  const fires = applied.filter((d) => d.job.schedule !== null && d.decision.finished);
  if (fireEnded(store, tx, fires.map((d) => ({ job: d.job, outcome: d.outcome === 'skipped' ? 'skipped' : d.job.status, nextAt: d.nextFireAt })))) released = true;
  // A finished child tells its parent; a parked row whose wait is answered already runs again.
  const ended = applied.filter((d) => d.job.parentId !== null && d.decision.finished).sort((a, b) => (a.job.parentId as number) - (b.job.parentId as number));
  if (ended.length > 0) tellParents(store, tx, ended.map((d) => d.job.parentId as number), ended.map((d) => d.job.failParent === true && d.decision.status !== 'succeeded'));
  if (acks.some((a) => a.status === 'waiting')) settleWaits(store, tx, applied.map((d) => d.job.id));
  if (applied.length > 0) deleteAtCompletion(store, applied.map((d) => d.job.namespace).sort()[0], applied.map((d) => d.job));
  const worker = store.workers.get(workerId);
  if (worker && (acks.some((a) => a.status === 'ready') || released)) tx.notify(worker.namespace);
  return acks;
}

/** acta.recover_jobs (sql/functions/recover_jobs.sql): dead workers, then the rows whose lease expired, then the hand-on. */
export function recoverJobs(store: Store, tx: Tx, args: { namespace: string; deadAfterMs: number; limit?: number }): RecoveredRow[] {
  const { namespace, deadAfterMs } = args;
  const limit = args.limit ?? 10_000;
  const dead = new Set<string>();
  for (const w of store.workers.values()) {
    if (w.namespace === namespace && w.status === 'alive' && w.lastHeartbeatAt < tx.now - deadAfterMs) {
      w.status = 'dead';
      w.definitions.forEach((d) => dead.add(d));
    }
  }
  const changed = dead.size > 0 && refreshDefinitions(store, tx, namespace, [...dead]);

  const expired = store
    .jobsIn(namespace)
    .filter((j) => j.status === 'executing' && j.leaseExpiresAt !== null && j.leaseExpiresAt < tx.now)
    .sort((a, b) => (a.leaseExpiresAt as number) - (b.leaseExpiresAt as number) || a.id - b.id)
    .slice(0, Math.max(limit, 0));
  const out: RecoveredRow[] = [];
  const gates = new Map<string, { kind: GateKind; key: string }>();
  for (const j of expired) {
    const charged = j.started || j.unchargedReturns >= PIPELINE.unchargedReturnsMax;
    const maxAttempts = j.maxAttempts ?? store.definition(namespace, j.definition)?.maxAttempts ?? PIPELINE.maxAttempts;
    const last = charged && j.attempts + 1 >= maxAttempts;
    const cancelled = j.cancelRequestedAt !== null;
    const holder = j.leaseHolder;
    if (charged) j.error = { name: 'WorkerLost', message: 'worker lost: the lease expired without a completion', workerId: holder };
    store.executions.push({
      jobId: j.id,
      execution: j.execution,
      workerId: holder,
      claimedAt: j.claimedAt as number,
      finishedAt: tx.now,
      outcome: charged ? 'lost' : 'lost_uncharged',
      charged,
      error: charged ? copyJson(j.error) : null,
    });
    j.status = cancelled ? 'cancelled' : last ? 'failed' : 'ready';
    j.attempts += charged ? 1 : 0;
    j.unchargedReturns += charged ? 0 : 1;
    j.finishedAt = cancelled || last ? tx.now : null;
    j.runAt = tx.now;
    j.leaseHolder = null;
    j.leaseExpiresAt = null;
    j.started = false;
    if (j.concurrencyKey !== null) gates.set(`concurrency\u0000${j.concurrencyKey}`, { kind: 'concurrency', key: j.concurrencyKey });
    if ((cancelled || last) && j.lane !== null) gates.set(`lane\u0000${j.lane}`, { kind: 'lane', key: j.lane });
    out.push({ id: String(j.id), execution: j.execution, status: j.status as RecoveredRow['status'], charged });
  }
  const ended = expired.filter((j) => j.parentId !== null && (j.status === 'failed' || j.status === 'cancelled')).sort((a, b) => (a.parentId as number) - (b.parentId as number));
  if (ended.length > 0) tellParents(store, tx, ended.map((j) => j.parentId as number), ended.map((j) => j.failParent === true));
  let released = false;
  for (const { kind, key } of gates.values()) {
    if ((kind === 'lane' || store.gate(namespace, kind, key)) && releaseGate(store, tx, namespace, kind, key) > 0) released = true;
  }
  if (released) tx.notify(namespace);
  if (changed) recheckGates(store, tx, namespace, [...dead]);
  return out;
}

/** acta.cancel_job (sql/functions/cancel_job.sql). */
export function cancelJob(store: Store, tx: Tx, namespace: string, id: string): CancelAnswer {
  const job = store.jobs.get(jobIdOf(id));
  if (!job || job.namespace !== namespace) return null;
  if (job.status === 'executing') {
    job.cancelRequestedAt ??= tx.now;
    tx.notify(`cancel:${job.leaseHolder}:${job.id}:${job.execution}`);
    cancelChildren(store, tx, job);
    return 'requested';
  }
  if (job.status !== 'ready' && job.status !== 'waiting') return null;
  job.status = 'cancelled';
  job.finishedAt = tx.now;
  job.waitNames = null;
  job.waitStep = null;
  job.waitUntil = null;
  if (job.parentId !== null) tellParents(store, tx, [job.parentId], [job.failParent === true]);
  cancelChildren(store, tx, job);
  if (job.lane !== null && releaseGate(store, tx, namespace, 'lane', job.lane) > 0) tx.notify(namespace);
  return 'cancelled';
}

/** A cancelled parent cancels its unfinished children, in id order (acta.cancel_job). */
function cancelChildren(store: Store, tx: Tx, parent: MemoryJob): void {
  if (!parent.childrenOpen) return;
  const open = store.jobsIn(parent.namespace).filter((c) => c.parentId === parent.id && (c.status === 'ready' || c.status === 'waiting' || c.status === 'executing'));
  for (const c of open) cancelJob(store, tx, parent.namespace, String(c.id));
}

/** acta.watch_job (sql/functions/watch_job.sql). */
export function watchJob(store: Store, namespace: string, id: string): boolean {
  const job = store.jobs.get(jobIdOf(id));
  if (!job || job.namespace !== namespace) return false;
  job.watched = true;
  return true;
}

/** acta.report_progress (sql/functions/report_progress.sql). */
export function reportProgress(store: Store, workerId: string, rows: ProgressRow[]): number {
  let n = 0;
  for (const r of rows) {
    const job = store.jobs.get(jobIdOf(r.id));
    if (!job || job.execution !== r.execution || job.status !== 'executing' || job.leaseHolder !== workerId) continue;
    job.progress = parseJsonb(r.json);
    n++;
  }
  return n;
}

/** src/db/jobs.ts countJobs: each status's jobs in id order, up to `cap`, counted by definition (Executing ones with a lease). */
export function countJobs(store: Store, namespace: string, cap: number): JobCount[] {
  const out: JobCount[] = [];
  for (const status of ['ready', 'waiting', 'executing'] as DepthStatus[]) {
    const by = new Map<string, number>();
    let seen = 0;
    for (const j of store.jobsIn(namespace)) {
      if (seen >= cap) break;
      if (j.status !== status || (status === 'executing' && j.leaseExpiresAt === null)) continue;
      seen++;
      by.set(j.definition, (by.get(j.definition) ?? 0) + 1);
    }
    for (const [definition, count] of by) out.push({ definition, status, count });
  }
  return out;
}

/** src/db/jobs.ts readJob: the job of the namespace and its finished attempts (getJob's record), or null. */
export function readJob(store: Store, namespace: string, id: string): JobRecord | null {
  const j = store.jobs.get(jobIdOf(id));
  if (!j || j.namespace !== namespace) return null;
  const date = (ms: number | null) => (ms === null ? null : new Date(ms));
  const finished = store.executions.filter((e) => e.jobId === j.id).sort((a, b) => a.execution - b.execution);
  return {
    id: String(j.id),
    definition: j.definition,
    status: j.status,
    payload: copyJson(j.payload),
    result: copyJson(j.result),
    error: copyJson(j.error) as StoredError | null,
    attempts: j.attempts,
    maxAttempts: j.maxAttempts,
    ...attemptLimit(j.maxAttempts, store.definition(namespace, j.definition)?.maxAttempts),
    execution: j.execution,
    priority: j.priority,
    runAt: new Date(j.runAt),
    createdAt: new Date(j.createdAt),
    finishedAt: date(j.finishedAt),
    idempotencyKey: j.idempotencyKey,
    concurrencyKey: j.concurrencyKey,
    rateKey: j.rateKey,
    lane: j.lane,
    blockedBy: j.status === 'ready' ? j.blockedBy : null,
    progress: copyJson(j.progress),
    cancelRequestedAt: date(j.cancelRequestedAt),
    schedule: j.schedule,
    scheduledAt: date(j.scheduledAt),
    executions: finished.slice(-EXECUTIONS_SHOWN).map((e) => ({
        execution: e.execution,
        workerId: e.workerId,
        claimedAt: new Date(e.claimedAt),
        finishedAt: new Date(e.finishedAt),
        outcome: e.outcome,
        charged: e.charged,
      error: copyJson(e.error) as StoredError | null,
    })),
    executionCount: finished.length,
  };
}

/** acta.record_step (sql/functions/record_step.sql). */
export function recordStep(store: Store, tx: Tx, args: { workerId: string; jobId: JobId; execution: number; name: string; resultJson: string }): StepRecord {
  const result = parseJsonb(args.resultJson);
  const job = store.jobs.get(jobIdOf(args.jobId));
  if (!job || job.execution !== args.execution || job.status !== 'executing' || job.leaseHolder !== args.workerId) return { status: 'stale', result: null };
  job.started = true;
  let steps = store.steps.get(job.id);
  if (!steps) store.steps.set(job.id, (steps = new Map()));
  const recorded = steps.get(args.name);
  if (recorded) return { status: 'exists', result: copyJson(recorded.result) };
  steps.set(args.name, { jobId: job.id, name: args.name, execution: args.execution, result, recordedAt: tx.now });
  return { status: 'recorded', result: copyJson(result) };
}

/** src/db/steps.ts loadSteps: every recorded step of a job, name → result. */
export function loadSteps(store: Store, jobId: JobId): Map<string, unknown> {
  const steps = store.steps.get(jobIdOf(jobId));
  return new Map([...(steps?.values() ?? [])].map((s) => [s.name, copyJson(s.result)]));
}
