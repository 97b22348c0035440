import type { Logger } from 'pino';
import type { WorkerEvents } from './events';
import type { FinalizerConfig } from './finalizer';
import type { WorkerMetrics } from './metrics';
import type { Registry } from './registry';

/** The most job ids the line about a batch's fenced-out completions names. */
const FENCED_IDS_LOGGED = 10;

/** What the bookkeeping after a completion write touches; worker.ts wires it. */
export interface CompletionsWrittenDeps {
  registry: Registry;
  metrics: WorkerMetrics;
  logger: Logger;
  events: WorkerEvents;
  /** The database answered: a failing heartbeat's retry may try at once. */
  sawDatabase: () => void;
  /** The worker's wakeups of its claimer. */
  wakeups: { next(): void };
}

/**
 * The finalizer's `onWritten` (finalizer.ts): after each batch committed (or was fenced out), the
 * entries leave the registry, the batch is counted (per batch, by outcome), the fenced-out ones are
 * logged in one line, events$ tells each, and a retry made due wakes the claimer.
 */
export function completionsWritten(deps: CompletionsWrittenDeps): FinalizerConfig['onWritten'] {
  const { registry, metrics, logger, events, sawDatabase, wakeups } = deps;
  return (batch, acks) => {
    sawDatabase();
    metrics.batchSize.observe(batch.length);
    let retried = false;
    // Counted per batch, not per job: a labelled inc hashes its labels each time.
    const byOutcome = new Map<string, number>();
    let stale = 0;
    let staleIds: string[] | undefined;
    for (let i = 0; i < batch.length; i++) {
      const { row, entry } = batch[i];
      const ack = acks[i];
      registry.remove(entry);
      if (!ack || ack.status === 'stale') {
        if (stale++ < FENCED_IDS_LOGGED) (staleIds ??= []).push(row.id);
      } else {
        // A job cancelled while it ran ends Cancelled whatever its attempt sent (complete_executions.sql).
        const outcome = ack.status === 'cancelled' ? 'cancelled' : row.outcome;
        byOutcome.set(outcome, (byOutcome.get(outcome) ?? 0) + 1);
        if (ack.status === 'ready') retried = true; // the next claim then sees its due time (and sleeps only until it)
      }
    }
    for (const [outcome, n] of byOutcome) metrics.completions.inc({ outcome }, n);
    if (stale > 0) {
      metrics.completionsStale.inc(stale);
      // One line per batch, not per completion: after a stall every attempt the worker held comes
      // back fenced out, and a line each made 128 of a full batch (test/faults/fencedLog.spec.ts).
      // events$ still tells each ('stale').
      logger.warn({ completions: stale, jobIds: staleIds }, 'completions fenced out: their rows had moved on');
    }
    events.written(batch, acks);
    if (retried) wakeups.next();
  };
}
