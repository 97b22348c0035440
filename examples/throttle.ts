/**
 * A per-tenant throttle before execution (docs/rx.md, "Operators in the pipeline"): attempts of
 * one tenant start at least `spacingMs` apart, other tenants' are not held up. A held attempt
 * keeps its executor permit, so the worker claims no more than it can start. Run:
 * `node dist/examples/throttle.js` (DATABASE_URL, else PGlite in ./.acta/data; it migrates).
 */
import { concat, concatMap, filter, firstValueFrom, groupBy, ignoreElements, mergeMap, type MonoTypeOperatorFunction, of, type SchedulerLike, take, timer, toArray } from 'rxjs';
import { type Attempt, connect, createClient, createWorker, defineJob, migrate } from '../src';

/** Starts each tenant's attempts at least `spacingMs` apart (the first at once), on `scheduler`. */
export function perTenantThrottle(spacingMs: number, tenantOf: (attempt: Attempt) => string, scheduler?: SchedulerLike): MonoTypeOperatorFunction<Attempt> {
  return (attempts) =>
    attempts.pipe(
      groupBy(tenantOf),
      mergeMap((tenant$) => tenant$.pipe(concatMap((attempt) => concat(of(attempt), timer(spacingMs, scheduler).pipe(ignoreElements()))))),
    );
}

const SPACING_MS = 200;
const startedAt: { tenant: string; at: number }[] = [];

const report = defineJob<{ tenant: string; n: number }, void>({
  name: 'example-throttle-report',
  handler: async ({ tenant }) => {
    startedAt.push({ tenant, at: performance.now() });
  },
});

async function main(): Promise<void> {
  const db = await connect();
  await migrate(db);
  const worker = createWorker({
    db,
    definitions: [report],
    hooks: { beforeExecution: (attempts, { scheduler }) => attempts.pipe(perTenantThrottle(SPACING_MS, (a) => (a.payload as { tenant: string }).tenant, scheduler)) },
  });
  const jobs = [...['a', 'a', 'a', 'b'].entries()].map(([n, tenant]) => ({ definition: report, payload: { tenant, n } }));
  // Subscribed before the start: the worker's events are hot.
  const done = firstValueFrom(worker.events$.pipe(filter((e) => e.type === 'succeeded' && e.definition === report.name), take(jobs.length), toArray()));
  await worker.start();
  await createClient({ db }).enqueueMany(jobs);
  await done;
  await worker.stop();
  await db.close();
  const starts = (tenant: string) => startedAt.filter((s) => s.tenant === tenant).map((s) => s.at);
  const [a, b] = [starts('a'), starts('b')];
  // Node's timers count from the event loop's cached time, which a long synchronous stretch (PGlite
  // runs its queries in this thread) leaves behind: a gap may look shorter than the spacing by as
  // much. Half of it still tells the throttle's spacing from none (the three would start together).
  console.log(`tenant a: ${a.length} started, spaced by the throttle: ${a.slice(1).every((at, i) => at - a[i] >= SPACING_MS / 2)}`);
  console.log(`tenant b: ${b.length} started, before tenant a's second: ${b[0] < a[1]}`);
}

if (require.main === module) void main();
