/**
 * Schedules with real worker processes on a real server (docs/schedules.md): 4 `acta worker`
 * processes run two every-second schedules (test/fixtures/schedule-jobs.js: catch-up 'latest' and
 * 'all' within 5 s) while workers are killed (-9), SIGSTOPped past their lease and restarted; then
 * every worker stops for 30 s and one starts again. The ledger alone decides (certify/fires.ts,
 * the certification's check): one fire per scheduled instant, none missing except by the catch-up
 * policy, and after the outage the policy's fires and no more.
 */
import { type FireAttempt, checkFires, type LedgerFire, type LedgerSchedule } from '../../certify/fires';
import { cronSchedule } from '../../src/recurring/cron';
import { type FaultServer, sleep, spawnWorker, useFaultServer, type WorkerProcess } from './harness';
import { waitFor } from '../helpers/wait';

const H = 1000;
/** Lease 4 H (src/config.ts, leaseClock): a SIGSTOP this long outlasts it. */
const STOP_MS = 6 * H;
const CHAOS_MS = 60_000;
const OUTAGE_MS = 30_000;
const WINDOW_MS = 5_000;
const MODULE = 'test/fixtures/schedule-jobs.js';
const NS = 'sched';

const server = useFaultServer();

function startWorker(): WorkerProcess {
  const args = ['--namespace', NS, '--heartbeat', String(H), '--executors', '4', '--shutdown-timeout', '1000'];
  return spawnWorker({ dbUrl: server.dbUrl, events: '/dev/null', module: MODULE, args, env: { TICK_WINDOW_MS: String(WINDOW_MS) } });
}

async function dbNow(s: FaultServer): Promise<number> {
  return (await s.query<{ now: number }>('select (extract(epoch from clock_timestamp()) * 1000)::float8 as now'))[0].now;
}

const note = (what: string, figures: object) => {
  if (process.env.ACTA_FAULT_DEBUG) console.log(`${what}: ${JSON.stringify(figures)}`);
};

const ms = (column: string) => `(extract(epoch from ${column}) * 1000)::float8`;

async function readFires(s: FaultServer) {
  const schedules = await s.query<LedgerSchedule>(
    `select name, cron, time_zone as "timeZone", catch_up as "catchUp", catch_up_window_ms::float8 as "catchUpWindowMs" from acta.schedules where namespace = $1`, [NS]);
  const fires = await s.query<LedgerFire>(
    `select id::text as "jobId", schedule, ${ms('scheduled_at')} as "scheduledAt", status from acta.jobs where namespace = $1 and schedule is not null`, [NS]);
  const attempts = await s.query<FireAttempt & { jobId: string; charged: boolean }>(
    `select e.job_id::text as "jobId", e.execution, ${ms('e.claimed_at')} as "claimedAt", e.outcome, e.charged
       from acta.executions e join acta.jobs j on j.id = e.job_id where j.namespace = $1 and j.schedule is not null`, [NS]);
  const byJob = new Map<string, (FireAttempt & { charged: boolean })[]>();
  for (const a of attempts) byJob.set(a.jobId, [...(byJob.get(a.jobId) ?? []), a]);
  return { schedules, fires, attemptsOf: (id: string) => byJob.get(id) ?? [] };
}

test('4 workers killed, stopped past their lease and restarted: one fire per instant, none missing beyond the catch-up policy; after a 30 s outage, the policy\'s fires and no more', async () => {
  const workers = Array.from({ length: 4 }, () => startWorker());
  const ids = new Map<WorkerProcess, string>();
  for (const w of workers) ids.set(w, await w.workerId());
  await waitFor(async () => (await server.query('select 1 from acta.jobs where namespace = $1 and status = \'succeeded\'', [NS])).length >= 4 || undefined, 'the first fires to run', 20_000);

  /** The worker process holding a running fire (waited for up to 2 s), else any live one. */
  const holder = async (live: WorkerProcess[]): Promise<{ victim: WorkerProcess; heldFire: boolean }> => {
    for (let i = 0; i < 40; i++) {
      const rows = await server.query<{ holder: string }>('select lease_holder::text as holder from acta.jobs where namespace = $1 and schedule is not null and status = \'executing\'', [NS]);
      const victim = live.find((w) => rows.some((r) => r.holder === ids.get(w)));
      if (victim) return { victim, heldFire: true };
      await sleep(50);
    }
    return { victim: live[Math.floor(Math.random() * live.length)], heldFire: false };
  };
  const replace = async (dead: WorkerProcess) => {
    const fresh = startWorker();
    workers[workers.indexOf(dead)] = fresh;
    ids.set(fresh, await fresh.workerId());
  };
  const actions = { killed: 0, stopped: 0, heldFire: 0 };
  const chaosEnd = Date.now() + CHAOS_MS;
  for (let round = 0; Date.now() < chaosEnd; round++) {
    await sleep(1_500 + Math.random() * 2_000);
    const { victim, heldFire } = await holder(workers);
    if (heldFire) actions.heldFire++;
    if (round % 2 === 0) {
      victim.kill('SIGKILL');
      await victim.exited;
      actions.killed++;
      await replace(victim);
    } else {
      victim.kill('SIGSTOP');
      actions.stopped++;
      await sleep(STOP_MS);
      victim.kill('SIGCONT');
    }
  }
  await sleep(5_000); // every worker live: the schedules catch up

  // The outage: every worker stops; 20 s later one starts.
  for (const w of workers) w.kill('SIGTERM');
  for (const w of workers) await w.exited;
  const outageStart = await dbNow(server);
  await sleep(OUTAGE_MS);
  const restartAt = await dbNow(server);
  const last = startWorker();
  await last.workerId();
  await sleep(8_000);
  last.kill('SIGTERM');
  expect((await last.exited).code).toBe(0);

  const { schedules, fires, attemptsOf } = await readFires(server);
  expect(schedules.map((s) => s.name).sort()).toEqual(['tick-all', 'tick-latest']);
  const verdict = checkFires(schedules, fires, attemptsOf);
  note('schedules under faults', { actions, figures: verdict.figures });
  expect(verdict.violations).toEqual([]);
  // Each fire that succeeded succeeded once in the ledger; a skipped one ended skipped, and no
  // attempt of it before was charged (its handler never ran: only a first attempt is judged).
  for (const f of fires) {
    const attempts = attemptsOf(f.jobId).sort((a, b) => a.execution - b.execution);
    if (f.status === 'succeeded') expect(attempts.filter((a) => a.outcome === 'succeeded')).toHaveLength(1);
    if (f.status === 'cancelled') {
      expect(attempts[attempts.length - 1].outcome).toBe('skipped');
      expect(attempts.filter((a) => a.charged)).toEqual([]);
    }
  }
  // The faults hit fires: some attempts were lost to recovery and retried at the same instant.
  const lost = fires.flatMap((f) => attemptsOf(f.jobId)).filter((a) => a.outcome.startsWith('lost'));
  note('lost fire attempts', { lost: lost.length });
  expect(lost.length).toBeGreaterThan(0);

  // After the outage: the fires claimed after the restart. The first of them is the one armed
  // before the outage, missed by then and skipped; the policy decides what follows.
  const cron = cronSchedule('* * * * * *');
  for (const s of schedules) {
    const after = fires.filter((f) => f.schedule === s.name && attemptsOf(f.jobId).some((a) => a.claimedAt >= restartAt)).sort((a, b) => a.scheduledAt - b.scheduledAt);
    // The first claim after the restart: the armed fire may also hold an attempt claimed before the
    // outage (its worker stopped while it ran), which says nothing about the catch-up.
    const firstClaim = Math.min(...after.flatMap((f) => attemptsOf(f.jobId).map((a) => a.claimedAt).filter((t) => t >= restartAt)));
    const armedBefore = after[0];
    const ran = after.filter((f) => f.status === 'succeeded' && f.scheduledAt <= firstClaim);
    note(`${s.name} after the outage`, { fires: after.length, ranForMissed: ran.length, armedBefore: new Date(armedBefore.scheduledAt), outageStart: new Date(outageStart), firstClaim: new Date(firstClaim) });
    expect(armedBefore.scheduledAt).toBeLessThan(restartAt);
    // Judged only while no attempt of it was charged (docs/schedules.md, "Catch-up"): a fire whose
    // handler started before the outage (its worker stopped past the shutdown timeout, its attempt
    // recovered as charged) is a retry, and runs.
    if (attemptsOf(armedBefore.jobId).some((a) => a.charged && a.claimedAt < restartAt)) {
      expect(armedBefore.status).toBe('succeeded');
    } else {
      expect(armedBefore.status).toBe('cancelled');
      expect(attemptsOf(armedBefore.jobId).map((a) => a.outcome)).toContain('skipped');
    }
    if (s.catchUp === 'latest') {
      // One fire for the ~20 missed instants (the latest due at the claim), none of the others.
      expect(ran.length).toBeLessThanOrEqual(1);
      expect(after.filter((f) => f.scheduledAt < firstClaim - 1_000)).toEqual([armedBefore]);
    } else {
      // Each instant within the window fires, oldest first, none older: those that went past the
      // window while the catch-up ran are skipped by the same rule (checkFires holds each one).
      let inWindow = 0;
      for (let t = cron.next(new Date(firstClaim - WINDOW_MS - 1)); t && t.getTime() <= firstClaim; t = cron.next(t)) inWindow++;
      expect(ran.length).toBeLessThanOrEqual(inWindow);
      // How many of them ran depends on how fast the one worker claimed them (one that ages out of
      // the window before its claim is skipped by the same rule, which checkFires holds for each):
      // a matter of speed, not asserted here. The policy went on after the skip: more fires followed.
      expect(after.length).toBeGreaterThan(1);
      expect(after.filter((f) => f.scheduledAt < firstClaim - WINDOW_MS)).toEqual([armedBefore]);
    }
  }
}, 270_000);
