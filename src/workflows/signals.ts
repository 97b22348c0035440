/*
 * Signals (docs/workflows.md; docs/DESIGN.md, "Decisions for recurring work, workflows and
 * operating"): the checks of a signal's name and a wait's timeout, and what a sender is told.
 * The mailbox and the decision are the database's (acta.send_signal, acta.settle_waits).
 */
import { MAX_NAME_BYTES, nameOption } from '../config';
import type { SignalOutcome } from '../db/workflows';
import { INT4_MAX } from '../db/types';
import { ConfigError } from '../errors';

/** A signal name: a non-empty string of at most MAX_NAME_BYTES bytes. */
export const checkSignalName = (name: unknown): string => nameOption('signal name', name, MAX_NAME_BYTES);

/** A wait's timeout: an integer 0..2^31−1 ms. */
export function checkTimeoutMs(ms: unknown): number {
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 0 || ms > INT4_MAX) throw new ConfigError(`timeoutMs must be an integer between 0 and ${INT4_MAX} (ms), got ${String(ms)}`);
  return ms;
}

/**
 * What client.signal answers. `delivered`: the signal is the job's (consumed by its wait now,
 * or kept in its mailbox until a wait of that name consumes it). Not delivered, with `reason`:
 * 'ended' (the job has finished; nothing kept), 'not_found' (no such job in the namespace),
 * 'duplicate' (this idempotency key was sent to the job under this name before: delivered once).
 */
export type SignalResult =
  | { delivered: true; jobId: string; consumed: boolean }
  | { delivered: false; jobId: string | null; reason: 'ended' | 'not_found' | 'duplicate' };

export function signalResult(jobId: string | null, outcome: SignalOutcome): SignalResult {
  if (outcome === 'consumed' || outcome === 'queued') return { delivered: true, jobId: jobId as string, consumed: outcome === 'consumed' };
  return { delivered: false, jobId, reason: outcome };
}
