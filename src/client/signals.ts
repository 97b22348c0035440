/*
 * client.signal (docs/workflows.md): a signal to a job by id or by its idempotency key, in the
 * caller's transaction when given one. The mailbox and the wake are acta.send_signal's.
 */
import { knownKeys, MAX_IDEMPOTENCY_KEY_BYTES, nameOption, optionsOf } from '../config';
import type { Queryable } from '../db/Db';
import { ConfigError } from '../errors';
import { sendSignal } from '../db/workflows';
import { jobIdText } from './jobId';
import type { Ledger } from '../ledger';
import { checkSignalName, type SignalResult, signalResult } from '../workflows/signals';
import { payloadJson } from '../workflows/workflow';

export interface SignalOptions {
  /** Send inside the caller's transaction (a Queryable on which it ran BEGIN): delivered at its commit. */
  tx?: Queryable;
  /** The same key sent again to the same job under the same name is not delivered again ('duplicate'). */
  idempotencyKey?: string;
}

/**
 * The job is `{ id }` (or a job id as enqueue returned it) or `{ idempotencyKey }` (the key it was
 * enqueued with). Answers SignalResult; ConfigError on a bad name, job or option.
 */
export type SignalTarget = string | number | bigint | { id: string | number | bigint } | { idempotencyKey: string };

export function createSignal(deps: { ledger: Ledger; namespace: string; inTx: (tx: Queryable | undefined) => Queryable | undefined; verdict: (err: unknown, inTx: boolean) => Promise<unknown> }) {
  return async function signal(job: SignalTarget, name: string, payload?: unknown, options?: SignalOptions | null): Promise<SignalResult> {
    knownKeys('signal option', optionsOf('signal', options), ['tx', 'idempotencyKey']);
    checkSignalName(name);
    const target = typeof job === 'object' && job !== null ? job : { id: job };
    // One of the two forms: with both, which job was meant cannot be told (the id was ignored).
    if ('idempotencyKey' in target && 'id' in target) throw new ConfigError('signal: the job is { id } or { idempotencyKey }, not both');
    let jobId: string | null = null;
    let jobKey: string | null = null;
    if ('idempotencyKey' in target) {
      // As enqueue checks it: a lone surrogate, stored as U+FFFD, could name the job of another key; a NUL failed as 22021.
      jobKey = nameOption("signal: the job's idempotencyKey", target.idempotencyKey, MAX_IDEMPOTENCY_KEY_BYTES);
    } else {
      // As getJob and cancel read an id: leading zeros allowed; beyond bigint, no such job.
      jobId = jobIdText(target.id);
      if (jobId === null) return signalResult(null, 'not_found');
    }
    // Two keys differing in a lone surrogate were one key (U+FFFD), the second signal dropped as a
    // 'duplicate'; beyond signals_idempotency_idx's btree entry, a raw 54000 (test/db/badInput.test.ts).
    const key = options?.idempotencyKey === undefined ? undefined : nameOption('signal: idempotencyKey', options.idempotencyKey, MAX_IDEMPOTENCY_KEY_BYTES);
    const args = { namespace: deps.namespace, jobId, jobKey, name, payloadJson: payloadJson(payload), idempotencyKey: key ?? null };
    const tx = deps.inTx(options?.tx ?? undefined);
    try {
      const answer = tx ? await sendSignal(tx, args) : await deps.ledger.sendSignal(args);
      return signalResult(answer.jobId, answer.outcome);
    } catch (err) {
      throw await deps.verdict(err, tx !== undefined);
    }
  };
}
