import type { Queryable } from './Db';

/** What pause and resume take: a namespace, or one definition of it. */
export interface PauseScope {
  namespace: string;
  /** Absent or null: the whole namespace. */
  definition?: string | null;
}

/** A pause as stored (migration 0015, acta.pauses). */
export interface PauseRecord {
  namespace: string;
  /** null: the whole namespace is paused. */
  definition: string | null;
  /** Who paused, as the caller said (null: not said). */
  pausedBy: string | null;
  reason: string | null;
  /** Since when, on the database clock. */
  pausedAt: Date;
}

/** What acta.pause answers: the pause that stands, and whether this call made it. */
export interface PauseAnswer extends PauseRecord {
  created: boolean;
}

/** acta.pause (sql/functions/pause.sql): the pause that stands for the scope after the call. */
export async function pause(q: Queryable, scope: PauseScope & { by?: string | null; reason?: string | null }): Promise<PauseAnswer> {
  const { rows } = await q.query<{ paused_by: string | null; reason: string | null; paused_at: Date; created: boolean }>(
    'select paused_by, reason, paused_at, created from acta.pause($1, $2, $3, $4)',
    [scope.namespace, scope.definition ?? null, scope.by ?? null, scope.reason ?? null],
  );
  if (rows.length === 0) {
    // A concurrent pause of the scope committed after this statement's snapshot: it stands.
    const standing = (await listPauses(q, scope.namespace)).find((p) => p.definition === (scope.definition ?? null));
    if (standing) return { ...standing, created: false };
    throw new Error(`acta.pause answered nothing for ${JSON.stringify(scope)}`);
  }
  const r = rows[0];
  return { namespace: scope.namespace, definition: scope.definition ?? null, pausedBy: r.paused_by, reason: r.reason, pausedAt: r.paused_at, created: r.created };
}

/** acta.resume (sql/functions/resume.sql): true when the scope was paused. */
export async function resume(q: Queryable, scope: PauseScope): Promise<boolean> {
  const { rows } = await q.query<{ resumed: boolean }>('select acta.resume($1, $2) as resumed', [scope.namespace, scope.definition ?? null]);
  return rows[0].resumed;
}

/** The pauses of a namespace, the namespace's own first, then by definition. */
export async function listPauses(q: Queryable, namespace: string): Promise<PauseRecord[]> {
  const { rows } = await q.query<{ definition: string; paused_by: string | null; reason: string | null; paused_at: Date }>(
    'select definition, paused_by, reason, paused_at from acta.pauses where namespace = $1 order by definition',
    [namespace],
  );
  return rows.map((r) => ({ namespace, definition: r.definition === '' ? null : r.definition, pausedBy: r.paused_by, reason: r.reason, pausedAt: r.paused_at }));
}
