/**
 * Workflows with real worker processes on a real server (docs/workflows.md): signals sent at
 * random instants around each job's wait (before its claim, while its attempt runs, after it
 * parked) are each consumed exactly once, and parents whose children end while workers are
 * killed -9 and SIGSTOPped past their lease are never stranded nor spawn a child twice. Read
 * from the ledger (acta.signals, acta.steps, acta.all_jobs, acta.all_executions) once every job ended.
 * Scale: 200 signalled jobs and 100 parents of 5 children in the suite, for its time on 2 cores;
 * ACTA_WORKFLOW_SCALE=full runs 1,000 jobs and 1,000 parents of 10 with the same faults and checks.
 */
import { createClient, type Definition } from '../../src';
import { createPgDb } from '../../src/db/pgDb';
import type { Db } from '../../src/db/Db';
import { eventsFile, sleep, spawnWorker, useFaultServer, waitForStatus, type WorkerProcess, expectCleanExit } from './harness';

const H = 1000;
const MODULE = 'test/fixtures/workflow-jobs.js';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { definitions } = require('../fixtures/workflow-jobs.js') as { definitions: Definition[] };

const server = useFaultServer();

const FULL = process.env.ACTA_WORKFLOW_SCALE === 'full';
const SIGNALLED = FULL ? 1_000 : 200;
const PARENTS = FULL ? 1_000 : 100;
const CHILDREN = FULL ? 10 : 5;
/** Waits and test timeouts grow with the work. */
const SCALE = FULL ? 8 : 1;

function startWorker(ns: string, events: string): WorkerProcess {
  const args = ['--namespace', ns, '--heartbeat', String(H), '--executors', '8', '--shutdown-timeout', '1000'];
  return spawnWorker({ dbUrl: server.dbUrl, events, module: MODULE, args });
}

const rand = (max: number) => Math.floor(Math.random() * max);
const note = (what: string, figures: object) => {
  if (process.env.ACTA_FAULT_DEBUG) console.log(`${what}: ${JSON.stringify(figures)}`);
};

/**
 * Faults until `done()`: every `everyMs` one worker at random is killed -9 and replaced, or
 * (every third round) SIGSTOPped past its lease (5 H) and continued.
 */
function chaos(workers: WorkerProcess[], ns: string, events: string, everyMs: number) {
  let done = false;
  const counts = { killed: 0, stopped: 0 };
  const running = (async () => {
    for (let round = 1; !done; round++) {
      await sleep(everyMs);
      if (done) break;
      const i = rand(workers.length);
      const w = workers[i];
      if (round % 3 === 0) {
        w.kill('SIGSTOP');
        counts.stopped++;
        await sleep(5 * H);
        w.kill('SIGCONT');
      } else {
        w.kill('SIGKILL');
        await w.exited;
        counts.killed++;
        workers[i] = startWorker(ns, events);
        // Started (its signal handlers installed) before the next fault or the final SIGTERM.
        await workers[i].workerId();
      }
    }
  })();
  return {
    counts,
    async stop() {
      done = true;
      await running;
    },
  };
}

async function stopAll(workers: WorkerProcess[]): Promise<void> {
  for (const w of workers) w.kill('SIGTERM');
  for (const w of workers) await expectCleanExit(w);
}

test(`${SIGNALLED} jobs, two signals each sent at random instants around the wait, workers killed -9 and SIGSTOPped: each job consumes exactly its oldest signal, once`, async () => {
  const ns = 'wf-signals';
  const events = eventsFile();
  const workers = [0, 1, 2].map(() => startWorker(ns, events));
  await Promise.all(workers.map((w) => w.workerId()));
  const db: Db = createPgDb({ connectionString: server.dbUrl, max: 4 });
  const faults = chaos(workers, ns, events, 2_500);
  try {
    const client = createClient({ db, namespace: ns, definitions });
    const ids = (await client.enqueueMany(Array.from({ length: SIGNALLED }, () => ({ definition: 'gate', payload: { beforeMs: rand(1_500), afterMs: rand(300) } })))).map((r) => r.id);
    // Two signals per job, at random instants over 10 s; each sent twice under its idempotency key
    // (a sender's retry), which stores it once.
    const sends = ids.flatMap((id) => ['a', 'b'].map((which) => (async () => {
      await sleep(rand(10_000));
      const first = await client.signal(id, 'go', { id, which }, { idempotencyKey: which });
      const again = await client.signal(id, 'go', { id, which }, { idempotencyKey: which });
      return [first, again];
    })()));
    const answers = await Promise.all(sends);
    // A signal sent after its job consumed the other one and ended is answered 'ended', not kept.
    const refused = (a: (typeof answers)[number][number]) => (a.delivered ? 'delivered' : a.reason);
    for (const [first, again] of answers) expect([['delivered', 'duplicate'], ['delivered', 'ended'], ['ended', 'ended']]).toContainEqual([refused(first), refused(again)]);
    await waitForStatus(server, ids, 'succeeded', 'every signalled job to succeed', 180_000 * SCALE);
    await faults.stop();
    await stopAll(workers);

    const signals = await server.query<{ job_id: string; id: string; payload: { id: string; which: string }; consumed_step: string | null }>(
      'select s.job_id::text, s.id::text, s.payload, s.consumed_step from acta.signals s where s.job_id = any($1) order by s.job_id, s.id', [ids]);
    const jobs = await server.query<{ id: string; result: { got: unknown } }>('select id::text, result from acta.all_jobs where id = any($1)', [ids]);
    const steps = await server.query<{ job_id: string; name: string; result: { payload: unknown } }>('select job_id::text, name, result from acta.steps where job_id = any($1)', [ids]);
    const byJob = new Map(ids.map((id) => [id, signals.filter((s) => s.job_id === id)]));
    for (const id of ids) {
      const mine = byJob.get(id)!;
      const sent = answers.filter(([first]) => first.delivered && first.jobId === id).length;
      expect(mine).toHaveLength(sent);
      // The oldest signal consumed by the wait, a later one kept for a later wait: once each.
      expect(mine.map((s) => s.consumed_step)).toEqual(['acta:signal:0', null].slice(0, sent));
      expect(jobs.find((j) => j.id === id)!.result).toEqual({ got: mine[0].payload });
      expect(steps.filter((s) => s.job_id === id)).toEqual([{ job_id: id, name: 'acta:signal:0', result: { name: 'go', payload: mine[0].payload } }]);
    }
    // Where the consumed signals fell: before the job's first claim, during the attempt that
    // parked (claimed, not parked yet), or after the park.
    const [where] = await server.query<{ before: number; during: number; after: number; lost: number }>(
      `with consumed as (
         select s.job_id, s.sent_at,
                (select min(e.claimed_at) from acta.all_executions e where e.job_id = s.job_id) as first_claim,
                (select min(e.finished_at) from acta.executions e where e.job_id = s.job_id and e.outcome = 'signal_wait') as parked
         from acta.signals s where s.job_id = any($1) and s.consumed_step is not null)
       select count(*) filter (where sent_at < first_claim)::int as before,
              count(*) filter (where sent_at >= first_claim and (parked is null or sent_at < parked))::int as during,
              count(*) filter (where sent_at >= parked)::int as after,
              (select count(*)::int from acta.executions e where e.job_id = any($1) and e.outcome = 'lost') as lost
       from consumed`, [ids]);
    note('signals', { ...where, ...faults.counts });
    expect(where.before + where.during + where.after).toBe(SIGNALLED);
    expect(where.before).toBeGreaterThan(0);
    expect(where.during).toBeGreaterThan(0);
    expect(where.after).toBeGreaterThan(0);
    expect(faults.counts.killed).toBeGreaterThanOrEqual(2);
    expect(faults.counts.stopped).toBeGreaterThanOrEqual(1);
    expect(where.lost).toBeGreaterThan(0); // the kills hit attempts in flight
  } finally {
    await faults.stop();
    await db.close();
  }
}, 300_000 * SCALE);

test(`${PARENTS} parents of ${CHILDREN} children while workers are killed -9 and SIGSTOPped: no parent stranded, no child spawned twice, each parent resumed after its last child ended`, async () => {
  const ns = 'wf-children';
  const events = eventsFile();
  const workers = [0, 1, 2].map(() => startWorker(ns, events));
  await Promise.all(workers.map((w) => w.workerId()));
  const db: Db = createPgDb({ connectionString: server.dbUrl, max: 2 });
  const faults = chaos(workers, ns, events, 2_000);
  try {
    const client = createClient({ db, namespace: ns, definitions });
    const payload = () => ({ children: Array.from({ length: CHILDREN }, () => rand(1_000)), beforeMs: rand(500), afterMs: rand(500) });
    const ids = (await client.enqueueMany(Array.from({ length: PARENTS }, () => ({ definition: 'parent', payload: payload() })))).map((r) => r.id);
    await waitForStatus(server, ids, 'succeeded', 'every parent to succeed', 240_000 * SCALE);
    await faults.stop();
    await stopAll(workers);

    const parents = await server.query<{ id: string; result: number[] }>('select id::text, result from acta.all_jobs where id = any($1)', [ids]);
    expect(parents.map((p) => p.result)).toEqual(ids.map(() => Array.from({ length: CHILDREN }, (_, i) => i)));
    const children = await server.query<{ parent_id: string; id: string; status: string }>(
      'select parent_id::text, id::text, status from acta.jobs where parent_id = any($1)', [ids]);
    const spawns = await server.query<{ job_id: string; result: { ids: string[] } }>(
      `select job_id::text, result from acta.steps where job_id = any($1) and name like 'acta:spawn:%'`, [ids]);
    for (const id of ids) {
      const mine = children.filter((c) => c.parent_id === id);
      expect(mine).toHaveLength(CHILDREN);
      expect(mine.every((c) => c.status === 'succeeded')).toBe(true);
      const step = spawns.filter((s) => s.job_id === id);
      expect(step).toHaveLength(1);
      expect([...step[0].result.ids].sort()).toEqual(mine.map((c) => c.id).sort());
    }
    // Each parent's succeeding attempt was claimed after every child's success was written.
    const [late] = await server.query<{ early: number; lost: number }>(
      `select count(*) filter (where p.claimed_at < (select max(c.finished_at) from acta.executions c join acta.jobs cj on cj.id = c.job_id
                                                     where cj.parent_id = p.job_id and c.outcome = 'succeeded'))::int as early,
              (select count(*)::int from acta.all_executions e join acta.all_jobs j on j.id = e.job_id
               where (j.id = any($1) or j.parent_id = any($1)) and e.outcome = 'lost') as lost
       from acta.all_executions p where p.job_id = any($1) and p.outcome = 'succeeded'`, [ids]);
    note('children', { ...late, ...faults.counts });
    expect(late.early).toBe(0);
    expect(faults.counts.killed).toBeGreaterThanOrEqual(2);
    expect(late.lost).toBeGreaterThan(0); // the kills hit attempts in flight
  } finally {
    await faults.stop();
    await db.close();
  }
}, 300_000 * SCALE);
