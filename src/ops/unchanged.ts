/*
 * Why a retry, cancel or delete left a job it was given as it was: the one rule behind `acta jobs
 * retry|cancel|delete`'s lines on stderr, their `--json` (`reasons`) and the dashboard's answer to an
 * action (docs/operating.md, "Admin commands"; test/adminCli.spec.ts, test/cliJson.test.ts,
 * test/dashboard.test.ts). Ids are read as the client reads them (jobIdText): beyond bigint, no job.
 */
import { jobIdText } from '../client/jobId';
import type { Queryable } from '../db/Db';
import type { JobStatus } from '../db/types';

export type BulkAction = 'retry' | 'cancel' | 'delete';

/** The statuses each action takes, and its rule in words. */
export const BULK_RULES: Record<BulkAction, { acts: readonly JobStatus[]; rule: string }> = {
  retry: { acts: ['failed', 'cancelled'], rule: 'only Failed or Cancelled jobs are retried' },
  cancel: { acts: ['ready', 'waiting', 'executing'], rule: 'only Ready, Waiting or Executing jobs are cancelled' },
  delete: { acts: ['succeeded', 'failed', 'cancelled'], rule: 'only finished jobs (Succeeded, Failed, Cancelled) are deleted: cancel it first' },
};

/** One id the action did not change: as given, its status after the action (null: the namespace has no such job), and why in words. */
export interface UnchangedJob {
  id: string;
  status: JobStatus | null;
  message: string;
}

/** Why `action` left job `id` (as given) of `namespace` in `status` (null: no such job). */
export function unchangedMessage(action: BulkAction, id: string, status: JobStatus | null, namespace: string): string {
  if (status === null) return `no job ${id} in namespace "${namespace}"`;
  const { acts, rule } = BULK_RULES[action];
  // A job that reached a status the action takes after it ran: not blamed on the rule.
  if (acts.includes(status)) return `job ${id} is ${status} now, and was not when the ${action} ran: run it again`;
  return `job ${id} is ${status}: ${rule}`;
}

/** Each of `ids` (as given) with why `action` left it: its status read after the action, in one statement by primary key. */
export async function unchangedJobs(db: Queryable, namespace: string, action: BulkAction, ids: readonly string[]): Promise<UnchangedJob[]> {
  const texts = ids.map((id) => jobIdText(id));
  const known = [...new Set(texts.filter((t): t is string => t !== null))];
  const statuses = new Map<string, JobStatus>();
  if (known.length > 0) {
    const { rows } = await db.query<{ id: string; status: JobStatus }>('select id::text as id, status from acta.all_jobs where namespace = $1 and id = any ($2::bigint[])', [namespace, known]);
    for (const r of rows) statuses.set(r.id, r.status);
  }
  return ids.map((id, i) => {
    const status = texts[i] === null ? null : (statuses.get(texts[i] as string) ?? null);
    return { id, status, message: unchangedMessage(action, id, status, namespace) };
  });
}
