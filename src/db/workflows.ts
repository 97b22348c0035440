/* The SQL wrappers of signals and child jobs (sql/functions/send_signal.sql, spawn_children.sql). */
import type { Queryable } from './Db';
import { type EnqueueRows, unlessAllNull } from './jobs';
import type { Jsonified } from '../json';
import type { JobId, JobStatus, StepRecord, StoredError } from './types';

/** What acta.send_signal did with a signal. */
export type SignalOutcome = 'consumed' | 'queued' | 'duplicate' | 'ended' | 'not_found';

export interface SendSignalArgs {
  namespace: string;
  /** The job by id, or (jobId null) by its idempotency key. */
  jobId: JobId | null;
  jobKey: string | null;
  name: string;
  /** Checked JSON text. */
  payloadJson: string;
  idempotencyKey: string | null;
}

/** acta.send_signal: the signal into the job's mailbox, consumed at once by a wait for it. */
export async function sendSignal(q: Queryable, a: SendSignalArgs): Promise<{ jobId: JobId | null; outcome: SignalOutcome }> {
  const { rows } = await q.query<{ job_id: string | null; outcome: SignalOutcome }>('select * from acta.send_signal($1, $2, $3, $4, $5::jsonb, $6)', [
    a.namespace,
    a.jobId,
    a.jobKey,
    a.name,
    a.payloadJson,
    a.idempotencyKey,
  ]);
  return { jobId: rows[0].job_id, outcome: rows[0].outcome };
}

export interface SpawnArgs {
  workerId: string;
  parentId: JobId;
  execution: number;
  /** The step that records the spawn (src/workflows/children.ts). */
  step: string;
  rows: EnqueueRows;
  /** Per child: its failure fails the parent's wait ('fail-parent'). */
  failParent: boolean[];
}

/** acta.spawn_children: the children enqueued and their step recorded, fenced by the parent's attempt. Result {ids}. */
export async function spawnChildren(q: Queryable, a: SpawnArgs): Promise<StepRecord> {
  const r = a.rows;
  const { rows } = await q.query<StepRecord>('select * from acta.spawn_children($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11, $12, $13, $14, $15)', [
    a.workerId,
    a.parentId,
    a.execution,
    a.step,
    r.definitions,
    `[${r.payloads.join(',')}]`,
    unlessAllNull(r.priorities),
    unlessAllNull(r.runAts),
    unlessAllNull(r.maxAttempts),
    unlessAllNull(r.idempotencyKeys),
    r.concurrencyKeys ? unlessAllNull(r.concurrencyKeys) : null,
    r.rateKeys ? unlessAllNull(r.rateKeys) : null,
    r.lanes ? unlessAllNull(r.lanes) : null,
    a.failParent,
    r.checks?.some((c) => c) ? r.checks : null,
  ]);
  return rows[0];
}

/**
 * A child's outcome as waitForChildren returns it: `result` once it succeeded (the JSON form of its
 * handler's result `R`, as client.result reads it), else `error`; status 'deleted' when its row is
 * gone (neither). A job a spawn's idempotency key named (not a child, not waited for:
 * docs/workflows.md) is read as it is. `R`: the result type its id carries (JobId<R>).
 */
export type ChildOutcome<R = unknown> =
  | { id: JobId<R>; status: 'succeeded'; result: Jsonified<R>; error?: undefined }
  | { id: JobId<R>; status: Exclude<JobStatus, 'succeeded'> | 'deleted'; result?: undefined; error?: StoredError | null };

/**
 * The rows of `ids`, the ids `parentId`'s spawns recorded (by primary key), in the order of `ids`.
 * Read by id, not by parent: an id may be a job a spawn's idempotency key named, which has another
 * parent or none (test/db/workflows.test.ts, "a spawn whose idempotency key names an existing job").
 */
export async function readChildren(q: Queryable, _parentId: JobId, ids: JobId[]): Promise<ChildOutcome[]> {
  const { rows } = await q.query<{ id: string; status: JobStatus; result: unknown; error: StoredError | null }>(
    'select id::text as id, status, result, error from acta.jobs where id = any ($1::bigint[])',
    [ids],
  );
  return childOutcomes(ids, rows);
}

/** `ids` in order, each with its row's outcome: result when it succeeded, error otherwise. */
export function childOutcomes(ids: JobId[], rows: { id: string; status: JobStatus; result: unknown; error: StoredError | null }[]): ChildOutcome[] {
  const byId = new Map(rows.map((r) => [r.id, r]));
  return ids.map((id) => {
    const r = byId.get(id);
    if (!r) return { id, status: 'deleted' };
    return r.status === 'succeeded' ? { id, status: r.status, result: r.result } : { id, status: r.status, error: r.error };
  });
}
