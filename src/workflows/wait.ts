/*
 * A handler's wait: what ends its attempt as a signal wait or a children wait, and the step that
 * carries the wait's answer to the next attempt (docs/workflows.md).
 *
 * A wait is a recorded step whose name is its call's ordinal in the handler: the n-th
 * waitForSignal of an attempt is step `acta:signal:<n>`, the n-th waitForChildren
 * `acta:children:<n>`, the n-th spawn `acta:spawn:<n>`. The wake records the step (acta.wake_job),
 * so the same call of the next attempt finds it and returns. A handler must therefore reach its
 * waits and spawns in the same order on every attempt, as it reaches its steps.
 */
import type { CompletionOutcome } from '../db/types';

/** The wait an attempt ends with: the completion's outcome and its result, {names?, step, timeoutMs}. */
export interface WaitRequest {
  outcome: Extract<CompletionOutcome, 'signal_wait' | 'children_wait'>;
  step: string;
  /** Signal names (signal_wait). */
  names?: string[];
  /** The signal wait's timeout, ms (null: none). */
  timeoutMs: number | null;
}

/**
 * Thrown by a wait that is not answered yet: the attempt ends, parked. A handler should let it
 * through; once thrown, the attempt parks whatever the handler does next (as ctx.rateLimited).
 */
export class WaitRequestedError extends Error {
  constructor(readonly wait: WaitRequest) {
    super(`the attempt parks: ${wait.outcome === 'signal_wait' ? `waiting for signal ${wait.names?.join(' or ')}` : 'waiting for its children'}`);
    this.name = 'WaitRequestedError';
  }
}

/** The completion's result text of a wait (complete_executions reads names, step, timeoutMs). */
export const waitResultJson = (w: WaitRequest): string => JSON.stringify({ names: w.names, step: w.step, timeoutMs: w.timeoutMs });

/** The step names of a handler's n-th wait or spawn. */
export const waitStep = (kind: 'signal' | 'children' | 'spawn', n: number): string => `acta:${kind}:${n}`;
