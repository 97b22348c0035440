/**
 * The certification jobs, run by `acta worker dist/certify/jobs.js` processes, and the mix the run
 * enqueues (certifyItems). Each job runs 2–3 recorded steps; each step's function first logs one
 * row in certify.effects (outside the step's record, as any external effect would be), then does a
 * little random work. The checker compares effects with recorded steps: a recorded step must never
 * run again.
 *
 * Besides the plain jobs, some carry a concurrency key (one definition per limit, 1..4, each with
 * KEYS_PER_LIMIT keys) and some belong to lanes (docs/DESIGN.md, "Policies"); the checker holds
 * their limits and their order from the ledger (certify/checker.ts). A schedule fires every second
 * meanwhile (tickJob): one fire per instant, no gap beyond its catch-up policy (certify/fires.ts).
 */
import { Pool } from 'pg';
import { defineJob, type EnqueueItem, type JobContext } from '../src';

/** The concurrency limits of the keyed definitions, one definition each. */
export const KEY_LIMITS = [1, 2, 3, 4] as const;
/** Keys per keyed definition. */
export const KEYS_PER_LIMIT = 2;
/**
 * Shares of the run's jobs that are keyed and laned, with floors for small runs (keyed jobs per
 * slot, a lane's length). A key runs at most `limit` attempts at once, so each slot's backlog must
 * drain well within the run: at 100,000 jobs, 100 jobs per slot and lanes of 50.
 */
export const KEYED_SHARE = 0.02;
export const KEYED_PER_SLOT_MIN = 5;
export const LANED_SHARE = 0.01;
export const LANE_LENGTH = 50;

interface Payload {
  steps: number;
  workMs: number;
  key?: string;
  lane?: string;
}

// Opened at the first step, so that the run can import the definitions without a pool.
let pool: Pool | undefined;
const effects = () => {
  if (!pool) {
    pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 4 });
    pool.on('error', () => undefined);
  }
  return pool;
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const common = {
  maxAttempts: 50,
  backoff: { delayMs: 100, maxDelayMs: 2_000 },
  async handler({ steps, workMs }: Payload, ctx: JobContext) {
    let sum = 0;
    for (let k = 1; k <= steps; k++) {
      sum += await ctx.step(`s${k}`, async () => {
        await effects().query('insert into certify.effects (job_id, step, execution) values ($1, $2, $3)', [ctx.jobId, `s${k}`, ctx.execution]);
        await sleep(Math.random() * workMs);
        return k;
      });
    }
    return { sum };
  },
};

export const certifyJob = defineJob<Payload, { sum: number }>({ name: 'certify', ...common });

/** `certify.limit<L>`: at most L attempts of a key at once; the key is the payload's. */
export const keyedJobs = KEY_LIMITS.map((limit) =>
  defineJob<Payload, { sum: number }>({ name: `certify.limit${limit}`, ...common, concurrency: { key: (p) => p.key as string, limit } }),
);

/** `certify.lane`: one at a time per lane, in enqueue order; the lane is the payload's. */
export const lanedJob = defineJob<Payload, { sum: number }>({ name: 'certify.lane', ...common, lane: (p) => p.lane as string });

/** `certify.tick`: a schedule every second ('latest' catch-up), beside the jobs; the checker holds its fires (certify/fires.ts). */
export const tickJob = defineJob({
  name: 'certify.tick',
  maxAttempts: 50,
  schedule: { name: 'certify.tick', cron: '* * * * * *', catchUp: 'latest' },
  handler: async (_payload, ctx) => ({ scheduledAt: ctx.scheduledAt?.toISOString() ?? null }),
});

export const definitions = [certifyJob, ...keyedJobs, lanedJob, tickJob];

/**
 * The run's `jobs` jobs, in enqueue order: the keyed ones first, then the laned ones, then the
 * plain ones, so that keys and lanes start with their whole backlog waiting (contended from the
 * first claim). Keyed jobs are spread over the keys in proportion to their limits (each slot gets
 * as many), laned ones round-robin over lanes of about LANE_LENGTH.
 */
export function certifyItems(jobs: number, workMs: number): EnqueueItem<Payload>[] {
  const keys = KEY_LIMITS.flatMap((limit, d) => Array.from({ length: KEYS_PER_LIMIT }, (_, k) => ({ definition: keyedJobs[d], key: `limit${limit}-${k}`, limit })));
  // Slot s takes keyed jobs s, s + slots, ...: a key of limit L has L slots.
  const slots = keys.flatMap((k) => Array.from({ length: k.limit }, () => k));
  const keyed = Math.min(jobs, Math.max(Math.round(jobs * KEYED_SHARE), slots.length * KEYED_PER_SLOT_MIN));
  const laned = Math.min(jobs - keyed, Math.max(Math.round(jobs * LANED_SHARE), LANE_LENGTH));
  const lanes = Math.max(1, Math.round(laned / LANE_LENGTH));
  const payload = (extra: Partial<Payload>): Payload => ({ steps: 2 + Math.round(Math.random()), workMs, ...extra });
  const items: EnqueueItem<Payload>[] = [];
  for (let i = 0; i < keyed; i++) {
    const slot = slots[i % slots.length];
    items.push({ definition: slot.definition, payload: payload({ key: slot.key }) });
  }
  for (let i = 0; i < laned; i++) items.push({ definition: lanedJob, payload: payload({ lane: `lane-${i % lanes}` }) });
  for (let i = keyed + laned; i < jobs; i++) items.push({ definition: certifyJob, payload: payload({}) });
  return items;
}
