import type { Logger } from 'pino';
import type { SchedulerLike } from 'rxjs';
import { knownKeys } from '../config';
import type { RetentionAges } from '../db/retention';
import { type Definition, defineJob } from '../definition';
import { ConfigError } from '../errors';
import type { Ledger } from '../ledger';
import { type BatchCarry, type BatchSettings, batchSettings, MAX_AGE_MS, type PassResult, payloadInt, runBatches } from './batches';

/**
 * sys.retention: deletes finished jobs (Succeeded, Cancelled, Failed) once they are older than
 * their state's age, with their attempts and steps (docs/retention.md). A recurring slot per
 * namespace fires it every minute (RETENTION_CRON); each fire runs one pass of bounded batches.
 * The model is River's internal/maintenance/job_cleaner.go.
 */
export const RETENTION_NAME = 'sys.retention';
/** Every minute. */
export const RETENTION_CRON = '* * * * *';

const DAY_MS = 86_400_000;
/** How long a Succeeded row is kept, ms (docs/DESIGN.md, "Decisions for recurring work"). */
export const DEFAULT_SUCCEEDED_AGE_MS = DAY_MS;
/** How long a Cancelled row is kept, ms. */
export const DEFAULT_CANCELLED_AGE_MS = DAY_MS;
/** How long a Failed row is kept, ms. */
export const DEFAULT_FAILED_AGE_MS = 7 * DAY_MS;
/** Rows per batch (one acta.prune_jobs call, one transaction) at the start of a pass. */
export const DEFAULT_BATCH_SIZE = 1_000;
/** Each batch's statement_timeout, ms: a batch past it rolls back and the next one is half its size. */
export const DEFAULT_BATCH_TIMEOUT_MS = 1_000;
/** A pass stops starting batches after this, ms, so that it ends before the next fire is due. */
export const DEFAULT_PASS_BUDGET_MS = 45_000;

/**
 * The sys.retention payload: stored and versioned with its schedule, so each namespace sets its
 * own. Ages in ms; `null` keeps that state for ever; `succeededMs: 0` deletes a Succeeded row in
 * its completion's call (retention zero; a child or a watched row at the next pass). A job's
 * idempotency key dedupes for as long as its row is kept (its age: with 0, until it succeeds).
 */
export interface RetentionPayload {
  succeededMs?: number | null;
  cancelledMs?: number | null;
  failedMs?: number | null;
  batchSize?: number;
  batchTimeoutMs?: number;
  passBudgetMs?: number;
}

export interface RetentionSettings extends BatchSettings {
  ages: RetentionAges;
}

const PAYLOAD_KEYS = ['succeededMs', 'cancelledMs', 'failedMs', 'batchSize', 'batchTimeoutMs', 'passBudgetMs'];

/** The payload over the defaults; throws ConfigError (ACTA_CONFIG) for a field out of range or unknown. */
export function retentionSettings(payload: RetentionPayload | null | undefined): RetentionSettings {
  const p = payload ?? {};
  if (typeof p !== 'object' || Array.isArray(p)) throw new ConfigError(`the ${RETENTION_NAME} payload must be an object { ${PAYLOAD_KEYS.join(', ')} }, got ${JSON.stringify(p)}`);
  knownKeys(`field of the ${RETENTION_NAME} payload`, p, PAYLOAD_KEYS);
  const age = (name: 'succeededMs' | 'cancelledMs' | 'failedMs', fallback: number): number | null =>
    p[name] === null ? null : payloadInt(RETENTION_NAME, p as Record<string, unknown>, name, fallback, 0, MAX_AGE_MS);
  return {
    ages: {
      succeededMs: age('succeededMs', DEFAULT_SUCCEEDED_AGE_MS),
      cancelledMs: age('cancelledMs', DEFAULT_CANCELLED_AGE_MS),
      failedMs: age('failedMs', DEFAULT_FAILED_AGE_MS),
    },
    ...batchSettings(RETENTION_NAME, p as Record<string, unknown>, { batchSize: DEFAULT_BATCH_SIZE, batchTimeoutMs: DEFAULT_BATCH_TIMEOUT_MS, passBudgetMs: DEFAULT_PASS_BUDGET_MS }),
  };
}

/** What one pass did: PassResult, its rows deleted. */
export type RetentionPassResult = Omit<PassResult, 'taken'> & { deleted: number };

/**
 * One pass (runBatches): batches of `batchSize` rows (or the size in `carry`), in each state's
 * finished order, until a batch finds fewer than it asked for, the budget is spent, or `signal` aborts.
 */
export async function runRetentionPass(
  ledger: Ledger,
  namespace: string,
  settings: RetentionSettings,
  options: { scheduler?: SchedulerLike; signal?: AbortSignal; logger?: Logger; carry?: BatchCarry } = {},
): Promise<RetentionPassResult> {
  const { taken, ...rest } = await runBatches((limit) => ledger.pruneJobs({ namespace, ages: settings.ages, limit, timeoutMs: settings.batchTimeoutMs }), settings, { ...options, what: 'retention' });
  return { deleted: taken, ...rest };
}

/**
 * The sys.retention definition for `namespace`, its handler running one pass on `ledger` with the
 * fire's payload over the defaults (a schedule of RETENTION_CRON fires it). The handler's result is
 * the pass's RetentionPassResult. Its passes carry their batch size (BatchCarry): a pass starts at
 * the size the last one ended with, not with the timeouts that halved it there (test/recurring/batches.spec.ts).
 */
export function retentionDefinition(options: { ledger: Ledger; namespace: string; scheduler?: SchedulerLike }): Definition<RetentionPayload | null, RetentionPassResult> {
  const carry: BatchCarry = {};
  return defineJob({
    name: RETENTION_NAME,
    // A pass is a sweep: a failed one is simply the next fire's work.
    maxAttempts: 1,
    handler: async (payload, ctx) => {
      const settings = retentionSettings(payload);
      const result = await runRetentionPass(options.ledger, options.namespace, settings, { scheduler: options.scheduler, signal: ctx.signal, logger: ctx.logger, carry });
      const quiet = result.deleted === 0 && result.timeouts === 0;
      ctx.logger[quiet ? 'debug' : 'info']({ ...result, pass: 'retention' }, 'retention pass');
      return result;
    },
  });
}
