/**
 * The run's signals (certify/run.ts; docs/certification.md, "The mix"): one signal SIGNAL_NAME to
 * each signalled job (certify/jobs.ts), sent once its anchor has been claimed. The anchor is a
 * plain job up to SPREAD of the run's items before or after it in enqueue order, at random: plain
 * jobs are claimed in that order and need no signal, so every signal is sent, around its job's
 * turn — before its claim, while its attempt works toward the wait, while it is parked, or after
 * its wait timed out; the ledger tells which (certify/workflowChecks.ts).
 *
 * Every send carries one idempotency key, so a send repeated after an error (its answer lost to
 * a database restart) or on purpose (about a third of them: a sender's retry) is delivered once.
 */
import type { Pool } from 'pg';
import type { Client, EnqueueItem, SignalResult } from '../src';
import { certifyJob, SIGNAL_NAME, signalledJob } from './jobs';

export const SPREAD = 0.02;
/** Anchors asked about at each tick, the lowest ids first (an index probe each). */
const TICK_ANCHORS = 2_000;
/** Sends in flight at once. */
const SENDERS = 4;

/** What the sends were answered, counted: delivered (consumed at once or kept), or not, by reason. */
export type SignalAnswers = Record<'consumed' | 'queued' | 'duplicate' | 'ended' | 'not_found' | 'errors', number>;

export interface Signaller {
  /** Sends the signals whose anchor has been claimed (one query through `probe`); the sends go on in the background. */
  tick(probe: Pick<Pool, 'query'>): Promise<void>;
  /** Waits for the sends in flight; the answers. */
  drain(): Promise<SignalAnswers>;
}

/** The signalled jobs of `items` (enqueued with `ids`, in order), each with its anchor's id. */
export function signalPlan(items: EnqueueItem<unknown>[], ids: string[]): { id: string; anchor: string }[] {
  const plan: { id: string; anchor: string }[] = [];
  const plainNear = (a: number) => {
    for (let d = 0; d < items.length; d++) for (const k of [a - d, a + d]) if (items[k]?.definition === certifyJob) return k;
    return -1;
  };
  items.forEach((item, i) => {
    if (item.definition !== signalledJob) return;
    const a = plainNear(i + Math.round((Math.random() * 2 - 1) * SPREAD * items.length));
    // No plain job at all (a tiny run): the job is its own anchor, its signal sent once it is claimed.
    plan.push({ id: ids[i], anchor: ids[a < 0 ? i : a] });
  });
  return plan;
}

export function createSignaller(client: Pick<Client, 'signal'>, plan: { id: string; anchor: string }[]): Signaller {
  let waiting = plan.map((p) => ({ ...p, twice: Math.random() < 1 / 3 })).sort((a, b) => Number(a.anchor) - Number(b.anchor));
  const answers: SignalAnswers = { consumed: 0, queued: 0, duplicate: 0, ended: 0, not_found: 0, errors: 0 };
  const count = (r: SignalResult) => answers[r.delivered ? (r.consumed ? 'consumed' : 'queued') : r.reason]++;
  const sending = new Set<Promise<void>>();
  const queue: typeof waiting = [];

  const send = async (job: (typeof waiting)[number]): Promise<void> => {
    for (let n = 0; n < (job.twice ? 2 : 1); n++) {
      // Repeated until answered: the database may be restarting.
      for (;;) {
        try {
          count(await client.signal(job.id, SIGNAL_NAME, { id: job.id }, { idempotencyKey: 'certify' }));
          break;
        } catch {
          answers.errors++;
          await new Promise((r) => setTimeout(r, 500));
        }
      }
    }
  };
  const pump = () => {
    while (sending.size < SENDERS && queue.length > 0) {
      const p: Promise<void> = send(queue.shift() as (typeof waiting)[number]).finally(() => {
        sending.delete(p);
        pump();
      });
      sending.add(p);
    }
  };

  return {
    async tick(probe) {
      if (waiting.length === 0) return;
      // Plain jobs are claimed about in enqueue order: the lowest anchors are the next to be claimed.
      const { rows } = await probe.query<{ id: string }>('select id::text from acta.all_jobs where id = any($1::bigint[]) and execution > 0', [waiting.slice(0, TICK_ANCHORS).map((w) => w.anchor)]);
      const claimed = new Set(rows.map((r) => r.id));
      queue.push(...waiting.filter((w) => claimed.has(w.anchor)));
      waiting = waiting.filter((w) => !claimed.has(w.anchor));
      pump();
    },
    async drain() {
      while (sending.size > 0) await Promise.all([...sending]);
      return answers;
    },
  };
}
