import { runStatement } from './call';
import type { Queryable } from './Db';
import { INT4_MAX, type CompletionAck, type CompletionRow } from './types';

/** complete_executions' answer letters (sql/functions/complete_executions.sql). */
const ACK_STATUS: Record<string, CompletionAck['status']> = { s: 'succeeded', f: 'failed', r: 'ready', c: 'cancelled', w: 'waiting', x: 'stale' };

/**
 * A completion's retry delay as it is sent: clamped to 0..2^31-1 ms, a non-finite one as 0 (the
 * parameter is an integer, and an out-of-range value would fail the batch's statement).
 */
export const retryDelayParam = (ms: number): number => (Number.isFinite(ms) ? Math.min(INT4_MAX, Math.max(0, Math.round(ms))) : 0);

/**
 * acta.complete_executions: the whole batch in one call; acks in batch order, retry delays as
 * retryDelayParam sends them.
 * Encoding: ids, executions and outcomes go as array literals joined here (decimal digits and
 * fixed words: nothing to quote), and the results, errors, delays and next fires as a null array when no
 * element has one (the function reads a null array as all-null elements, a null delay as 0): less
 * client CPU than the driver quoting every element (docs/decisions/2026-12-01-completion-encoding.md;
 * test/db/fencing.test.ts, "complete_executions stores result and error texts as given").
 */
export async function completeExecutions(q: Queryable, workerId: string, batch: CompletionRow[]): Promise<CompletionAck[]> {
  const n = batch.length;
  const ids = new Array<string>(n);
  const executions = new Array<number>(n);
  const outcomes = new Array<string>(n);
  const results = new Array<string | null>(n);
  const errors = new Array<string | null>(n);
  const delays = new Array<number>(n);
  let anyResult = false;
  let anyError = false;
  let anyDelay = false;
  let fires: (string | null)[] | null = null;
  for (let i = 0; i < n; i++) {
    const c = batch[i];
    ids[i] = c.id;
    executions[i] = c.execution;
    outcomes[i] = c.outcome;
    results[i] = c.result;
    errors[i] = c.error;
    const delay = retryDelayParam(c.retryDelayMs);
    delays[i] = delay;
    anyResult ||= c.result !== null;
    anyError ||= c.error !== null;
    anyDelay ||= delay !== 0;
    if (c.nextFireAt) (fires ??= new Array<string | null>(n).fill(null))[i] = c.nextFireAt.toISOString();
  }
  const { rows } = await runStatement<{ answer: string }>(q, 'acta_complete_executions', 'select acta.complete_executions($1, $2, $3, $4, $5::jsonb[], $6::jsonb[], $7, $8::timestamptz[]) as answer', [
    workerId,
    `{${ids.join(',')}}`,
    `{${executions.join(',')}}`,
    `{${outcomes.join(',')}}`,
    anyResult ? results : null,
    anyError ? errors : null,
    anyDelay ? delays : null,
    fires,
  ]);
  const answer = rows[0]?.answer ?? '';
  if (answer.length !== batch.length) throw new Error(`complete_executions answered ${answer.length} statuses for ${batch.length} completions`);
  return batch.map((c, i) => ({ id: c.id, execution: c.execution, status: ACK_STATUS[answer[i]] ?? 'stale' }));
}
