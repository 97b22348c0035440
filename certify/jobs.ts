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
 * Workflows (docs/workflows.md): some jobs wait for a signal the run sends them (certify/signals.ts),
 * some are parents of CHILDREN_PER_PARENT plain children; certify/workflowChecks.ts judges both.
 */
import { Pool } from 'pg';
import { defineJob, SignalTimeoutError, type EnqueueItem, type JobContext } from '../src';

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
/**
 * Shares of signalled jobs and of parents, with floors for small runs. Every child is a job of the
 * run: a parent and its children take 1 + CHILDREN_PER_PARENT of the `jobs`. A third of the
 * signalled jobs wait with a timeout, SIGNAL_TIMEOUT_MS at most.
 */
export const SIGNALLED_SHARE = 0.02;
export const SIGNALLED_MIN = 20;
export const PARENT_SHARE = 0.01;
export const PARENTS_MIN = 10;
export const CHILDREN_PER_PARENT = 4;
export const SIGNAL_TIMEOUT_MS = 5_000;
/** The signal each signalled job waits for (certify/signals.ts sends it). */
export const SIGNAL_NAME = 'go';

interface Payload {
  steps: number;
  workMs: number;
  key?: string;
  lane?: string;
  /** A signalled job: its first step's work before the wait, ms (a window for a signal sent during the attempt). */
  beforeWaitMs?: number;
  /** A signalled job's wait timeout, ms (absent: none). */
  timeoutMs?: number;
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

/** Step `s<k>`: logs its run in certify.effects, then works up to `workMs`; returns k. */
const effectStep = (ctx: JobContext, k: number, workMs: number) =>
  ctx.step(`s${k}`, async () => {
    await effects().query('insert into certify.effects (job_id, step, execution) values ($1, $2, $3)', [ctx.jobId, `s${k}`, ctx.execution]);
    await sleep(Math.random() * workMs);
    return k;
  });

const retries = { maxAttempts: 50, backoff: { delayMs: 100, maxDelayMs: 2_000 } };

const common = {
  ...retries,
  async handler({ steps, workMs }: Payload, ctx: JobContext) {
    let sum = 0;
    for (let k = 1; k <= steps; k++) sum += await effectStep(ctx, k, workMs);
    return { sum };
  },
};

export const certifyJob = defineJob<Payload, { sum: number }>({ name: 'certify', ...common });

/** `certify.limit<L>`: at most L attempts of a key at once; the key is the payload's. */
export const keyedJobs = KEY_LIMITS.map((limit) =>
  defineJob<Payload, { sum: number }>({ name: `certify.limit${limit}`, ...common, concurrency: { key: (p) => p.key as string, limit } }),
);

/** `certify.lane`: one at a time per lane, in commit order; the lane is the payload's. */
export const lanedJob = defineJob<Payload, { sum: number }>({ name: 'certify.lane', ...common, lane: (p) => p.lane as string });

/**
 * `certify.signal`: step s1, a wait for signal SIGNAL_NAME (with the payload's timeout, if any; after
 * a timeout, a second wait without one), step s2. It ends only once it consumed the one signal the
 * run sends it, so the verdict can ask every signal to be consumed.
 */
export const signalledJob = defineJob<Payload, { sum: number; timedOut: boolean }>({
  name: 'certify.signal',
  ...retries,
  async handler({ workMs, beforeWaitMs, timeoutMs }, ctx) {
    let sum = await effectStep(ctx, 1, beforeWaitMs ?? workMs);
    let timedOut = false;
    try {
      await ctx.waitForSignal(SIGNAL_NAME, timeoutMs === undefined ? undefined : { timeoutMs });
    } catch (err) {
      if (!(err instanceof SignalTimeoutError)) throw err;
      timedOut = true;
      await ctx.waitForSignal(SIGNAL_NAME);
    }
    sum += await effectStep(ctx, 2, workMs);
    return { sum, timedOut };
  },
});

/**
 * `certify.parent`: step s1, CHILDREN_PER_PARENT plain children (all but one by spawnMany, the last
 * by spawn: two spawn steps), a wait for them, step s2. Its result counts the children that
 * succeeded.
 */
export const parentJob = defineJob<Payload, { sum: number; succeeded: number }>({
  name: 'certify.parent',
  ...retries,
  async handler({ steps, workMs }, ctx) {
    let sum = await effectStep(ctx, 1, workMs);
    const child = () => ({ definition: certifyJob, payload: { steps, workMs }, maxAttempts: retries.maxAttempts });
    await ctx.spawnMany(Array.from({ length: CHILDREN_PER_PARENT - 1 }, child));
    await ctx.spawn(certifyJob, child().payload, { maxAttempts: retries.maxAttempts });
    const outcomes = await ctx.waitForChildren();
    sum += await effectStep(ctx, 2, workMs);
    return { sum, succeeded: outcomes.filter((o) => o.status === 'succeeded').length };
  },
});

/**
 * `certify.tick`: a schedule every second ('latest' catch-up), beside the jobs, at a priority above
 * the backlog so that it keeps time (docs/schedules.md); the checker holds its fires (certify/fires.ts).
 */
export const tickJob = defineJob({
  name: 'certify.tick',
  maxAttempts: 50,
  schedule: { name: 'certify.tick', cron: '* * * * * *', catchUp: 'latest', priority: 10 },
  handler: async (_payload, ctx) => ({ scheduledAt: ctx.scheduledAt?.toISOString() ?? null }),
});

export const definitions = [certifyJob, ...keyedJobs, lanedJob, signalledJob, parentJob, tickJob];

/** How many of the run's `jobs` are keyed, laned, signalled, parents and their children (the rest plain). */
export function certifyMix(jobs: number) {
  const slots = KEY_LIMITS.reduce((n, limit) => n + limit * KEYS_PER_LIMIT, 0);
  const keyed = Math.min(jobs, Math.max(Math.round(jobs * KEYED_SHARE), slots * KEYED_PER_SLOT_MIN));
  const laned = Math.min(jobs - keyed, Math.max(Math.round(jobs * LANED_SHARE), LANE_LENGTH));
  const signalled = Math.min(jobs - keyed - laned, Math.max(Math.round(jobs * SIGNALLED_SHARE), SIGNALLED_MIN));
  const parents = Math.min(Math.floor((jobs - keyed - laned - signalled) / (1 + CHILDREN_PER_PARENT)), Math.max(Math.round(jobs * PARENT_SHARE), PARENTS_MIN));
  const children = parents * CHILDREN_PER_PARENT;
  return { keyed, laned, signalled, parents, children, plain: jobs - keyed - laned - signalled - parents - children };
}

/**
 * The run's items, in enqueue order: the keyed ones first, then the laned ones, so that keys and
 * lanes start with their whole backlog waiting (contended from the first claim); then the plain
 * ones with the signalled jobs and the parents spread evenly among them, so that their waits
 * happen all through the run. Children are spawned by their parents, so they are not items: the
 * items are `jobs` minus the children. Keyed jobs are spread over the keys in proportion to their
 * limits (each slot gets as many), laned ones round-robin over lanes of about LANE_LENGTH.
 */
export function certifyItems(jobs: number, workMs: number): EnqueueItem<Payload>[] {
  const mix = certifyMix(jobs);
  const keys = KEY_LIMITS.flatMap((limit, d) => Array.from({ length: KEYS_PER_LIMIT }, (_, k) => ({ definition: keyedJobs[d], key: `limit${limit}-${k}`, limit })));
  // Slot s takes keyed jobs s, s + slots, ...: a key of limit L has L slots.
  const slots = keys.flatMap((k) => Array.from({ length: k.limit }, () => k));
  const lanes = Math.max(1, Math.round(mix.laned / LANE_LENGTH));
  const payload = (extra: Partial<Payload>): Payload => ({ steps: 2 + Math.round(Math.random()), workMs, ...extra });
  const items: EnqueueItem<Payload>[] = [];
  for (let i = 0; i < mix.keyed; i++) {
    const slot = slots[i % slots.length];
    items.push({ definition: slot.definition, payload: payload({ key: slot.key }) });
  }
  for (let i = 0; i < mix.laned; i++) items.push({ definition: lanedJob, payload: payload({ lane: `lane-${i % lanes}` }) });
  // The workflow jobs at even spacings over the plain ones, each kind on its own.
  const at = (n: number) => (i: number) => (i + 0.5) / n;
  const spread = [
    ...Array.from({ length: mix.signalled }, (_, i) => ({
      at: at(mix.signalled)(i),
      item: { definition: signalledJob, payload: payload({ beforeWaitMs: Math.round(Math.random() * 1_000), ...(i % 3 === 0 ? { timeoutMs: Math.round(Math.random() * SIGNAL_TIMEOUT_MS) } : {}) }) },
    })),
    ...Array.from({ length: mix.parents }, (_, i) => ({ at: at(mix.parents)(i), item: { definition: parentJob, payload: payload({}) } })),
  ].sort((x, y) => x.at - y.at);
  let next = 0;
  for (let i = 0; i < mix.plain; i++) {
    while (next < spread.length && spread[next].at * mix.plain <= i) items.push(spread[next++].item);
    items.push({ definition: certifyJob, payload: payload({}) });
  }
  while (next < spread.length) items.push(spread[next++].item);
  return items;
}
