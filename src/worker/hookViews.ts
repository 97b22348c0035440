/*
 * The views hooks get of the pipeline's entries and completions: one frozen object per entry or
 * completion, and the way back from an Attempt a hook emits to its entry.
 */
import type { Attempt, AttemptCompletion } from './hooks';
import type { Completion } from './executor';
import type { Entry } from './registry';
import { storedErrorSummary } from './storedError';

const viewOfEntry = new WeakMap<Entry, Attempt>();
export const entryOfView = new WeakMap<object, Entry>();
export const viewOfCompletion = new WeakMap<Completion, AttemptCompletion>();

/** The Attempt view of an entry (one per entry: hooks can compare them by identity). */
export function attemptOf(entry: Entry): Attempt {
  let view = viewOfEntry.get(entry);
  if (view === undefined) {
    const { row } = entry;
    view = Object.freeze({ jobId: row.id, definition: row.definition, attempt: row.attempts + 1, execution: row.execution, priority: row.priority, payload: row.payload });
    viewOfEntry.set(entry, view);
    entryOfView.set(view, entry);
  }
  return view;
}

/** The AttemptCompletion view of a completion (one per completion). */
export function completionOf(completion: Completion): AttemptCompletion {
  let view = viewOfCompletion.get(completion);
  if (view === undefined) {
    const { entry, row } = completion;
    const failed = row.outcome === 'failed' || row.outcome === 'failed_final';
    view = Object.freeze({
      attempt: attemptOf(entry),
      outcome: row.outcome,
      durationMs: entry.startedAt >= 0 && entry.endedAt >= 0 ? entry.endedAt - entry.startedAt : null,
      ...(failed ? { error: storedErrorSummary(row.error) } : {}),
      ...(row.outcome === 'failed' || row.outcome === 'rate_limited' ? { retryDelayMs: row.retryDelayMs } : {}),
    });
    viewOfCompletion.set(completion, view);
  }
  return view;
}
