import type { Logger } from 'pino';
import type { SchedulerLike } from 'rxjs';
import { knownKeys } from '../config';
import { type Definition, defineJob } from '../definition';
import { ConfigError } from '../errors';
import type { Ledger } from '../ledger';
import { type BatchCarry, type BatchSettings, batchSettings, type PassResult, runBatches } from './batches';

/**
 * sys.outbox: fans the namespace's published events out to their subscribers (docs/outbox.md):
 * each event one job per subscribed definition, exactly once, then deleted (acta.fan_out_events).
 * A worker asked for it (createWorker({ outbox: true })) runs a pass at each publish's wakeup, and a
 * recurring slot per namespace fires one every 10 s (OUTBOX_CRON) as the safety net for a lost one.
 */
export const OUTBOX_NAME = 'sys.outbox';
/** Every 10 s (croner's six-field form, seconds first). */
export const OUTBOX_CRON = '*/10 * * * * *';

/** Events per batch (one acta.fan_out_events call, one transaction) at the start of a pass. */
export const DEFAULT_BATCH_SIZE = 500;
/** Each batch's statement_timeout, ms: a batch past it rolls back and the next one is half its size. */
export const DEFAULT_BATCH_TIMEOUT_MS = 2_000;
/** A pass stops starting batches after this, ms (under the 10 s cadence). */
export const DEFAULT_PASS_BUDGET_MS = 8_000;
/**
 * The longest event key, in UTF-8 bytes: a keyed event's job takes the lane 'acta:outbox:<n>:<definition>:<key>'
 * (acta.fan_out_events), which must stay within a policy key's 1,000 bytes (MAX_KEY_BYTES) with a
 * definition name of up to 255.
 */
export const MAX_EVENT_KEY_BYTES = 700;

/**
 * The largest event message, in UTF-8 bytes of its JSON: 1 MiB. A fan-out batch passes every
 * (event × subscriber) payload to acta.enqueue_jobs as one jsonb, which holds at most 256 MiB; an
 * event past that at a batch of one would fail every pass and hold back the namespace's outbox
 * behind it (test/recurring/outbox.test.ts). Put larger content in your tables and publish its key.
 */
export const MAX_EVENT_MESSAGE_BYTES = 1_048_576;

/** A subscriber's job payload: the event as published (docs/outbox.md). */
export interface OutboxEvent<M = unknown> {
  /** The event's id (bigint as a decimal string): unique, never reused; ids of one key grow in publish order. */
  id: string;
  topic: string;
  key: string | null;
  message: M;
  /** When the publish's statement ran, ISO 8601 (database clock). */
  publishedAt: string;
}

/** The sys.outbox payload (and createWorker's `outbox` object): batch settings over the defaults. */
export interface OutboxPayload extends Partial<BatchSettings> {}

/** What one pass did: PassResult's `taken` as events, and the jobs made. */
export type OutboxPassResult = Omit<PassResult, 'taken'> & { events: number; jobs: number };

/** The payload over the defaults; throws ConfigError (ACTA_CONFIG) for a field out of range or unknown. */
export function outboxSettings(payload: OutboxPayload | null | undefined): BatchSettings {
  const p = payload ?? {};
  if (typeof p !== 'object' || Array.isArray(p)) throw new ConfigError(`the ${OUTBOX_NAME} payload must be an object { batchSize, batchTimeoutMs, passBudgetMs }, got ${JSON.stringify(p)}`);
  knownKeys(`field of the ${OUTBOX_NAME} payload`, p, ['batchSize', 'batchTimeoutMs', 'passBudgetMs']);
  return batchSettings(OUTBOX_NAME, p as Record<string, unknown>, { batchSize: DEFAULT_BATCH_SIZE, batchTimeoutMs: DEFAULT_BATCH_TIMEOUT_MS, passBudgetMs: DEFAULT_PASS_BUDGET_MS });
}

/**
 * One pass (runBatches): batches of the oldest events until one finds fewer than it asked for, the
 * budget is spent, or `signal` aborts; from the size in `carry` (the worker's: its slot fires and
 * its wakeup passes share it), which the pass leaves at the size it ended with (BatchCarry).
 */
export async function runOutboxPass(
  ledger: Ledger,
  namespace: string,
  settings: BatchSettings,
  options: { scheduler?: SchedulerLike; signal?: AbortSignal; logger?: Logger; carry?: BatchCarry } = {},
): Promise<OutboxPassResult> {
  let jobs = 0;
  const { taken, ...rest } = await runBatches(
    async (limit) => {
      const batch = await ledger.fanOutEvents({ namespace, limit, timeoutMs: settings.batchTimeoutMs });
      jobs += batch.jobs;
      return batch.events;
    },
    settings,
    { ...options, what: 'outbox' },
  );
  return { events: taken, jobs, ...rest };
}

/** The sys.outbox definition for `namespace`: each fire runs one pass with its payload over the defaults, from the worker's `carry`. */
export function outboxDefinition(options: { ledger: Ledger; namespace: string; scheduler?: SchedulerLike; carry?: BatchCarry }): Definition<OutboxPayload | null, OutboxPassResult> {
  return defineJob({
    name: OUTBOX_NAME,
    // A pass is a sweep: a failed one is simply the next fire's (or wakeup's) work.
    maxAttempts: 1,
    handler: async (payload, ctx) => {
      const result = await runOutboxPass(options.ledger, options.namespace, outboxSettings(payload), { scheduler: options.scheduler, signal: ctx.signal, logger: ctx.logger, carry: options.carry });
      ctx.logger[result.events === 0 && result.timeouts === 0 ? 'debug' : 'info']({ ...result, pass: 'outbox' }, 'outbox pass');
      return result;
    },
  });
}

/**
 * The prompt path: `poke()` at each publish's wakeup runs a pass now, outside the slot (no job
 * row). Pokes during a pass run one more pass after it (a publish committed after the running
 * batch's snapshot is not lost, nor is a poke dropped); concurrent passes of other workers wait on
 * the fan-out's namespace lock. Errors are logged: the slot is the safety net. `close()` aborts.
 */
export function outboxPoker(options: { ledger: Ledger; namespace: string; settings: BatchSettings; carry?: BatchCarry; scheduler?: SchedulerLike; logger: Logger }): { poke(): void; close(): void } {
  const abort = new AbortController();
  let running = false;
  let again = false;
  const run = async () => {
    running = true;
    do {
      again = false;
      try {
        const result = await runOutboxPass(options.ledger, options.namespace, options.settings, { scheduler: options.scheduler, signal: abort.signal, logger: options.logger, carry: options.carry });
        options.logger.debug({ ...result }, 'outbox pass at a publish wakeup');
      } catch (err) {
        options.logger.warn({ err }, 'outbox pass at a publish wakeup failed; sys.outbox fires again within 10 s');
      }
    } while (again && !abort.signal.aborted);
    running = false;
  };
  return {
    poke() {
      if (abort.signal.aborted) return;
      if (running) again = true;
      else void run();
    },
    close: () => abort.abort(),
  };
}
