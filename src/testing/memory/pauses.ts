/* Pause and resume (sql/functions/pause.sql, resume.sql): the rows the claim reads (claim.ts). */
import type { PauseAnswer, PauseRecord, PauseScope } from '../../db/pauses';
import type { Store, Tx } from './state';

/** acta.pause: the pause that stands for the scope; the namespace's workers woken. */
export function pause(store: Store, tx: Tx, args: PauseScope & { by?: string | null; reason?: string | null }): PauseAnswer {
  const definition = args.definition ?? '';
  tx.notify(args.namespace);
  const standing = store.pause(args.namespace, definition);
  if (standing) return { ...record(standing), created: false };
  const row = { namespace: args.namespace, definition, pausedBy: args.by ?? null, reason: args.reason ?? null, pausedAt: tx.now };
  store.insertPause(row);
  return { ...record(row), created: true };
}

/** acta.resume: true when the scope was paused (then its workers are woken). */
export function resume(store: Store, tx: Tx, args: PauseScope): boolean {
  if (!store.deletePause(args.namespace, args.definition ?? '')) return false;
  tx.notify(args.namespace);
  return true;
}

export function listPauses(store: Store, namespace: string): PauseRecord[] {
  return store.pausesIn(namespace).map(record);
}

function record(p: { namespace: string; definition: string; pausedBy: string | null; reason: string | null; pausedAt: number }): PauseRecord {
  return { namespace: p.namespace, definition: p.definition === '' ? null : p.definition, pausedBy: p.pausedBy, reason: p.reason, pausedAt: new Date(p.pausedAt) };
}
