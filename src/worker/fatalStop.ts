import type { Logger } from 'pino';
import type { SchedulerLike } from 'rxjs';
import type { CompletionAck, CompletionRow } from '../db/types';
import { type Completion, handBackCompletion } from './executor';
import type { FinalizerConfig } from './finalizer';
import type { Registry } from './registry';
import { raceTimeout } from './shutdown';

/** What a fatal stop drives; worker.ts wires it (after it marked the worker stopped). */
export interface FatalStopDeps {
  registry: Registry;
  logger: Logger;
  scheduler: SchedulerLike;
  heartbeatIntervalMs: number;
  /** Ends the claimer, the heartbeat, the pipeline and the passes, and closes the metrics server. */
  teardown: () => void;
  /** One completion write (ledger.completeExecutions with the worker's id). */
  write: (rows: CompletionRow[]) => Promise<CompletionAck[]>;
  /** Rejects the worker's `done`. */
  rejectDone: (err: unknown) => void;
  /** The bookkeeping of a written batch, the finalizer's own (completionsWritten.ts): what the last try wrote is told on events$ as any write is. */
  onWritten?: FinalizerConfig['onWritten'];
}

/**
 * The worker gives up (no heartbeat for a whole lease while it held attempts, or a
 * non-transient error): it stops claiming, aborts every handler (reason 'fatal') and tries ONCE,
 * briefly, to write what it holds, as a graceful stop would: the attempts that ended (their
 * completions waiting in the finalizer or held by an aroundHandler hook) as they ended, the
 * unfinished rows handed back uncharged; then it rejects `done`. Whatever that write did not
 * reach, the recovery pass of another worker returns once its lease expires
 * (test/faults/heartbeatLoss.test.ts; test/testing/virtualWorker.spec.ts, "a fatal stop writes").
 */
export function fatalStop(err: unknown, deps: FatalStopDeps): void {
  const { registry, logger } = deps;
  logger.error({ err }, 'worker stopping: fatal error');
  deps.teardown();
  const ended: Completion[] = [];
  const unfinished: Completion[] = [];
  for (const entry of registry.snapshot()) {
    registry.abort(entry, 'fatal');
    if (entry.completion) ended.push(entry.completion);
    else {
      // A running handler cut short: its time runs to this stop, as a graceful stop's does (events$ runMs).
      if (entry.startedAt >= 0 && entry.endedAt < 0) entry.endedAt = deps.scheduler.now();
      unfinished.push(handBackCompletion(entry));
    }
  }
  // Told before `stopped` (done rejects after the last try): a written end is an event whoever
  // wrote it (docs/reference.md, "Events"; test/events.spec.ts, "a fatal stop's last try").
  const write = async (batch: Completion[]): Promise<CompletionAck[] | undefined> => {
    if (batch.length === 0) return undefined;
    const acks = await deps.write(batch.map((c) => c.row));
    deps.onWritten?.(batch, acks);
    return acks;
  };
  // Two calls: a completion the database refuses for its content (the finalizer would have split
  // its batch: finalizer.ts) must not keep the hand-backs from landing.
  const lastTry = Promise.all([
    lastWrite(write, ended).then(
      (n) => n && logger.info({ written: n.applied, fencedOut: n.stale }, 'completions of ended attempts written'),
      (writeErr: unknown) => logger.warn({ err: writeErr, rows: ended.length }, 'could not write the completions of ended attempts; recovery returns their rows after their lease'),
    ),
    lastWrite(write, unfinished).then(
      (n) => n && logger.info({ handedBack: n.applied, fencedOut: n.stale }, 'unfinished rows handed back'),
      (writeErr: unknown) => logger.warn({ err: writeErr, rows: unfinished.length }, 'could not hand the unfinished rows back; recovery returns them after their lease'),
    ),
  ]);
  void raceTimeout(lastTry, Math.min(deps.heartbeatIntervalMs, 2_000), deps.scheduler).then(() => deps.rejectDone(err));
}

/** One call of a fatal stop's last try: how many rows it applied, and how many the fence refused (stale); undefined when there is nothing to write. */
async function lastWrite(write: (batch: Completion[]) => Promise<CompletionAck[] | undefined>, batch: Completion[]): Promise<{ applied: number; stale: number } | undefined> {
  const acks = await write(batch);
  if (acks === undefined) return undefined;
  const stale = acks.filter((a) => a.status === 'stale').length;
  return { applied: batch.length - stale, stale };
}
