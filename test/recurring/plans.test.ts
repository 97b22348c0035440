// The schedules' statements never scan acta.jobs (test/db/plans.test.ts's rule for every call on a
// job's path): the recurring fire of acta.complete_executions, the schedules pass (its read and
// acta.arm_schedules), the reconciliation at registration, and client.schedules' writes, on a
// jobs table of realistic size (40,000 finished rows, 20,000 of them one schedule's past fires),
// with statistics and in one session long enough for PL/pgSQL's generic plans (after 5 calls).
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { defineJob } from '../../src';
import { completeExecutions } from '../../src/db/executions';
import { claimJobs } from '../../src/db/jobs';
import { armSchedules, putRuntimeSchedule, removeSchedule, setSchedulePaused, triggerSchedule, unarmedSchedules } from '../../src/db/schedules';
import { registerWorker } from '../../src/db/workers';
import { declaredPolicy } from '../../src/definition';
import { cronSchedule } from '../../src/recurring/cron';
import { armInstants } from '../../src/recurring/schedules';
import { useTestDatabase } from '../helpers/db';

const { db, tdb } = useTestDatabase({ timeoutMs: 120_000 });
const NS = 'plans';
const SCHEDULES = 10;

test('a fire\'s completion, the schedules pass, the reconciliation and the runtime writes reach acta.jobs by key: no sequential scan', async () => {
  await db.query(`insert into acta.jobs (namespace, definition, payload, status, finished_at) select 'default', 'other', 'null', 'succeeded', now() from generate_series(1, 20000)`);
  await db.query(`insert into acta.jobs (namespace, definition, payload, status, finished_at, schedule, scheduled_at)
                  select $1, 'report', 'null', 'succeeded', now(), 'past', now() - i * interval '1 second' from generate_series(1, 20000) i`, [NS]);
  await db.query('vacuum analyze acta.jobs');

  const session = new Client({ connectionString: tdb.url });
  await session.connect();
  const q = { query: async <R>(text: string, params?: unknown[]) => ({ rows: (await session.query(text, params)).rows as R[] }) };
  const seqScans = async () => Number((await q.query<{ n: string }>(`select pg_stat_get_xact_numscans('acta.jobs'::regclass) as n`)).rows[0].n);
  const scans: Record<string, number> = {};
  /** Runs `fn` and counts the sequential scans of acta.jobs it made (this transaction's counter). */
  const counted = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    const before = await seqScans();
    const out = await fn();
    scans[what] = (scans[what] ?? 0) + (await seqScans()) - before;
    return out;
  };
  const pass = () => counted('schedules pass', async () => {
    const { names, versions, instants } = armInstants(await unarmedSchedules(q, NS));
    return armSchedules(q, NS, names, versions, instants);
  });
  try {
    await session.query('begin');
    const report = defineJob({ name: 'report', handler: () => undefined, schedule: Array.from({ length: SCHEDULES }, (_, i) => ({ name: `s${i}`, cron: '* * * * * *' })) });
    const workerId = randomUUID();
    const register = (build: string, d = report) => counted('reconcile', () => registerWorker(q, { workerId: randomUUID(), namespace: NS, hostname: 'h', pid: 1, definitions: ['report'], maxAttempts: [null], leaseMs: 60_000, build, policies: { report: declaredPolicy(d) } }));
    await register('b1');
    await registerWorker(q, { workerId, namespace: NS, hostname: 'h', pid: 1, definitions: ['report'], maxAttempts: [null], leaseMs: 60_000, build: 'b1', policies: { report: declaredPolicy(report) } });
    expect(await pass()).toBe(SCHEDULES);
    const cron = cronSchedule('* * * * * *');
    for (let round = 0; round < 7; round++) {
      await q.query(`update acta.jobs set run_at = now() - interval '1 second' where id in (select job_id from acta.schedules where namespace = $1)`, [NS]);
      const claim = await claimJobs(q, { namespace: NS, workerId, definitions: ['report'], limit: SCHEDULES, leaseMs: 60_000 });
      expect(claim.rows).toHaveLength(SCHEDULES);
      const acks = await counted('completion', () =>
        completeExecutions(q, workerId, claim.rows.map((r) => ({ id: r.id, execution: r.execution, outcome: 'succeeded' as const, result: 'null', error: null, retryDelayMs: 0, nextFireAt: cron.next(r.schedule!.at) }))));
      expect(acks.every((a) => a.status === 'succeeded')).toBe(true);
      expect(await pass()).toBe(0);
    }
    // A changed declaration (a newer build: one transaction has one now(), so the others started earlier), runtime writes, and the pass after each.
    await q.query(`update acta.workers set started_at = started_at - interval '1 minute' where namespace = $1`, [NS]);
    await register('b2', defineJob({ name: 'report', handler: () => undefined, schedule: Array.from({ length: SCHEDULES }, (_, i) => ({ name: `s${i}`, cron: '0 0 * * * *' })) }));
    expect(await pass()).toBe(SCHEDULES);
    const rt = { cron: '* * * * *', timeZone: 'UTC', payload: null, catchUp: 'latest' as const, catchUpWindowMs: null, priority: 0, concurrencyKey: null, rateKey: null, lane: null };
    for (let round = 0; round < 7; round++) {
      await counted('runtime writes', async () => {
        await putRuntimeSchedule(q, NS, 'report', { ...rt, name: `r${round}` });
        await putRuntimeSchedule(q, NS, 'report', { ...rt, name: `r${round}`, cron: '*/5 * * * *' });
        await setSchedulePaused(q, NS, 's0', true);
        await setSchedulePaused(q, NS, 's0', false);
        await triggerSchedule(q, NS, 's1');
      });
      await pass();
      await counted('runtime writes', () => removeSchedule(q, NS, `r${round}`));
    }
  } finally {
    await session.query('rollback').catch(() => undefined);
    await session.end();
  }
  expect(scans).toEqual({ reconcile: 0, 'schedules pass': 0, completion: 0, 'runtime writes': 0 });
}, 120_000);
