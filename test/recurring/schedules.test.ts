// Schedules on a real database (docs/schedules.md): armed at registration, a fire's completion arms
// the next instant in the same acta.complete_executions call, one fire per (schedule, instant), a
// missed fire skipped by its catch-up policy, and declared schedules reconciled (newest build wins).
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { createClient } from '../../src';
import { completeExecutions } from '../../src/db/executions';
import { armSchedules, putRuntimeSchedule, removeSchedule, setSchedulePaused, unarmedSchedules } from '../../src/db/schedules';
import { sqlLedger } from '../../src/ledger';
import { cronSchedule } from '../../src/recurring/cron';
import { armInstants, fireDecision } from '../../src/recurring/schedules';
import { declaredPolicy, type Definition } from '../../src/definition';
import { useTestDatabase } from '../helpers/db';
import { waitFor } from '../helpers/wait';

const { db, tdb } = useTestDatabase();

const def = (schedule: Definition['schedule']): Definition => ({ name: 'report', handler: () => null, ...(schedule ? { schedule } : {}) });

async function register(namespace: string, d: Definition, build: string) {
  const ledger = sqlLedger(db);
  const workerId = randomUUID();
  await ledger.registerWorker({ workerId, namespace, hostname: 'h', pid: 1, definitions: [d.name], maxAttempts: [null], leaseMs: 60_000, build, policies: { [d.name]: declaredPolicy(d) } });
  return { ledger, workerId };
}

async function schedule(namespace: string, name = 'report') {
  const { rows } = await db.query<{ cron: string; job_id: string | null; next_fire_at: Date | null; last_fire_at: Date | null; last_outcome: string | null; version: number }>(
    'select cron, job_id::text, next_fire_at, last_fire_at, last_outcome, version from acta.schedules where namespace = $1 and name = $2', [namespace, name]);
  return rows[0];
}

/** Makes the armed fire due now (its scheduled instant kept), as if its time had come. */
const makeDue = (id: string) => db.query('update acta.jobs set run_at = now() - interval \'1 second\' where id = $1', [id]);

it('a declared schedule is armed at registration; its fire\'s completion arms the next instant in the same call, once', async () => {
  const ns = `s-${randomUUID()}`;
  const { ledger, workerId } = await register(ns, def({ cron: '0 * * * *' }), 'b1');
  expect(await ledger.armSchedules!(ns)).toBe(1);
  const armed = await schedule(ns);
  expect(armed.job_id).not.toBeNull();
  expect(armed.next_fire_at!.getTime() % 3_600_000).toBe(0);
  expect(armed.next_fire_at!.getTime()).toBeGreaterThan(Date.now() - 60_000);
  await makeDue(armed.job_id!);
  const claim = await ledger.claimJobs({ namespace: ns, workerId, definitions: ['report'], limit: 5, leaseMs: 60_000 });
  expect(claim.rows).toHaveLength(1);
  const fire = claim.rows[0].schedule!;
  expect(fire).toMatchObject({ name: 'report', cron: '0 * * * *', armed: true });
  expect(fire.at.getTime()).toBe(armed.next_fire_at!.getTime());
  const nextFireAt = cronSchedule('0 * * * *').next(fire.at)!;
  const row = { id: claim.rows[0].id, execution: claim.rows[0].execution, outcome: 'succeeded' as const, result: 'null', error: null, retryDelayMs: 0, nextFireAt };
  expect((await ledger.completeExecutions(workerId, [row]))[0].status).toBe('succeeded');
  const after = await schedule(ns);
  expect(after).toMatchObject({ last_outcome: 'succeeded', next_fire_at: nextFireAt, last_fire_at: fire.at });
  expect(after.job_id).not.toBe(armed.job_id);
  // The same completion repeated (its answer lost) is stale and arms nothing more.
  expect((await ledger.completeExecutions(workerId, [row]))[0].status).toBe('stale');
  const { rows } = await db.query<{ n: string }>('select count(*) as n from acta.jobs where namespace = $1', [ns]);
  expect(Number(rows[0].n)).toBe(2);
  // Nothing re-arms an armed schedule.
  expect(await ledger.armSchedules!(ns)).toBe(0);
});

it('one fire per (schedule, instant), enforced by the database', async () => {
  const ns = `s-${randomUUID()}`;
  const { ledger } = await register(ns, def({ cron: '0 * * * *' }), 'b1');
  await ledger.armSchedules!(ns);
  const s = await schedule(ns);
  await expect(db.query('insert into acta.jobs (namespace, definition, payload, schedule, scheduled_at) values ($1, $2, $3, $4, $5)', [ns, 'report', 'null', 'report', s.next_fire_at]))
    .rejects.toMatchObject({ code: '23505' });
  // arm_schedules with an instant that already has its fire (the schedule unarmed meanwhile) arms nothing.
  await db.query('update acta.schedules set job_id = null where namespace = $1', [ns]);
  const { rows } = await db.query<{ armed: number }>('select acta.arm_schedules($1, $2, $3, $4::timestamptz[]) as armed', [ns, ['report'], [s.version], [s.next_fire_at!.toISOString()]]);
  expect(rows[0].armed).toBe(0);
});

it('a missed fire is skipped by its catch-up policy: uncharged, ended Cancelled, recorded skipped, and the policy\'s instant armed', async () => {
  const ns = `s-${randomUUID()}`;
  const { ledger, workerId } = await register(ns, def({ cron: '* * * * * *', catchUp: 'latest' }), 'b1');
  await ledger.armSchedules!(ns);
  const s = await schedule(ns);
  // The armed fire is 10 s old when it is claimed: its successor was due, so it is missed.
  await db.query('update acta.jobs set scheduled_at = scheduled_at - interval \'10 seconds\', run_at = now() - interval \'10 seconds\' where id = $1', [s.job_id]);
  await db.query('update acta.schedules set next_fire_at = next_fire_at - interval \'10 seconds\' where namespace = $1', [ns]);
  const claim = await ledger.claimJobs({ namespace: ns, workerId, definitions: ['report'], limit: 5, leaseMs: 60_000 });
  const fire = claim.rows[0].schedule!;
  const decision = fireDecision(fire, true);
  expect(decision.skip).toBe(true);
  expect(decision.nextFireAt!.getTime()).toBeLessThanOrEqual(fire.claimedAt.getTime());
  expect(decision.nextFireAt!.getTime()).toBeGreaterThan(fire.claimedAt.getTime() - 1_000);
  const acks = await ledger.completeExecutions(workerId, [{ id: claim.rows[0].id, execution: claim.rows[0].execution, outcome: 'skipped', result: null, error: null, retryDelayMs: 0, nextFireAt: decision.nextFireAt }]);
  expect(acks[0].status).toBe('cancelled');
  const job = await ledger.readJob(ns, claim.rows[0].id);
  expect(job).toMatchObject({ status: 'cancelled', attempts: 0 });
  expect(job!.executions[0]).toMatchObject({ outcome: 'skipped', charged: false });
  expect(await schedule(ns)).toMatchObject({ last_outcome: 'skipped', next_fire_at: decision.nextFireAt });
});

it('declared schedules are reconciled: the newest live build wins, a change re-arms the unstarted fire, a drop removes it', async () => {
  const ns = `s-${randomUUID()}`;
  const a = await register(ns, def({ cron: '0 * * * *' }), 'b1');
  await a.ledger.armSchedules!(ns);
  const first = await schedule(ns);
  const b = await register(ns, def({ cron: '30 * * * *' }), 'b2');
  const changed = await schedule(ns);
  expect(changed).toMatchObject({ cron: '30 * * * *', job_id: null });
  expect(changed.version).toBeGreaterThan(first.version);
  expect((await db.query('select 1 from acta.jobs where id = $1', [first.job_id])).rows).toHaveLength(0);
  await b.ledger.armSchedules!(ns);
  expect((await schedule(ns)).next_fire_at!.getUTCMinutes()).toBe(30);
  // The newest build stops: the build left running declares the schedule again.
  await b.ledger.stopWorker(b.workerId);
  expect(await schedule(ns)).toMatchObject({ cron: '0 * * * *' });
  // A newer build without the schedule drops it, and its unstarted fire with it.
  await a.ledger.armSchedules!(ns);
  const armed = (await schedule(ns)).job_id;
  await register(ns, def(undefined), 'b3');
  expect(await schedule(ns)).toBeUndefined();
  expect((await db.query('select 1 from acta.jobs where id = $1', [armed])).rows).toHaveLength(0);
});

it("a declared schedule whose zone an older ICU named otherwise (Europe/Kiev, Europe/Kyiv) is unchanged by a build on another Node: its due fire kept, no new version", async () => {
  const ns = `s-${randomUUID()}`;
  const d = def({ cron: '0 9 * * *', timeZone: 'Europe/Kyiv' });
  const ours = declaredPolicy(d).schedules![0].timeZone;
  const theirs = ours === 'Europe/Kiev' ? 'Europe/Kyiv' : 'Europe/Kiev';
  // The old build, on a Node whose ICU spells the zone `theirs`, declared and armed it.
  const ledger = sqlLedger(db);
  const policy = declaredPolicy(d);
  await ledger.registerWorker({ workerId: randomUUID(), namespace: ns, hostname: 'h', pid: 1, definitions: [d.name], maxAttempts: [null], leaseMs: 60_000, build: 'b1',
    policies: { [d.name]: { ...policy, schedules: policy.schedules!.map((s) => ({ ...s, timeZone: theirs })) } } });
  await ledger.armSchedules!(ns);
  const before = await schedule(ns);
  await makeDue(before.job_id!); // its instant has come, no worker has claimed it yet
  // The new build, on this Node, declares the same schedule.
  await register(ns, d, 'b2');
  expect(await schedule(ns)).toEqual(before);
  expect((await db.query('select status from acta.jobs where id = $1', [before.job_id])).rows).toEqual([{ status: 'ready' }]);
  expect((await db.query('select time_zone from acta.schedules where namespace = $1', [ns])).rows).toEqual([{ time_zone: theirs }]);
  // Another zone is still a change: a new version, its due fire kept (docs/schedules.md, "Changes").
  await register(ns, def({ cron: '0 9 * * *', timeZone: 'Europe/Warsaw' }), 'b3');
  const changed = await schedule(ns);
  expect(changed).toMatchObject({ job_id: before.job_id, next_fire_at: null });
  expect(changed.version).toBeGreaterThan(before.version);
});

it('two workers run an every-second schedule: each instant fires once, in order, with ctx.scheduledAt, and list shows it', async () => {
  const { createClient, createWorker, defineJob } = await import('../../src');
  const { silentLogger } = await import('../helpers/silentLogger');
  const ns = `s-${randomUUID()}`;
  const seen: number[] = [];
  const tick = defineJob({ name: 'tick', schedule: { cron: '* * * * * *', catchUp: 'all', catchUpWindowMs: 60_000 }, handler: (_p, ctx) => void seen.push(ctx.scheduledAt!.getTime()) });
  const workers = [0, 1].map(() => createWorker({ db, namespace: ns, definitions: [tick], executors: 4, logger: silentLogger }));
  for (const w of workers) await w.start();
  await new Promise((r) => setTimeout(r, 4_500));
  for (const w of workers) await w.stop();
  const { rows } = await db.query<{ at: Date; status: string }>('select scheduled_at as at, status from acta.jobs where namespace = $1 and status <> \'ready\' order by scheduled_at', [ns]);
  expect(rows.length).toBeGreaterThanOrEqual(3);
  const times = rows.map((r) => r.at.getTime());
  for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).toBe(1_000);
  expect(rows.every((r) => r.status === 'succeeded')).toBe(true);
  expect([...seen].sort((a, b) => a - b)).toEqual(times);
  const [listed] = await createClient({ db, namespace: ns }).schedules.list();
  expect(listed).toMatchObject({ name: 'tick', source: 'declared', lastOutcome: 'succeeded', lastFireAt: rows[rows.length - 1].at });
});

/** A namespace whose hourly schedule's armed fire is claimed (made due first). */
async function claimedFire() {
  const ns = `s-${randomUUID()}`;
  const { ledger, workerId } = await register(ns, def({ cron: '0 * * * *' }), 'b1');
  await ledger.armSchedules!(ns);
  const armed = await schedule(ns);
  await makeDue(armed.job_id!);
  const claim = await ledger.claimJobs({ namespace: ns, workerId, definitions: ['report'], limit: 5, leaseMs: 60_000 });
  return { ns, ledger, workerId, armed, claim };
}

it('a pause keeps a fire that has started (Ready again after its attempt was handed back) and deletes only one never claimed', async () => {
  const { ns, ledger, workerId, armed, claim } = await claimedFire();
  await db.query(`insert into acta.steps (job_id, name, execution, result) values ($1, 'charged', 1, '1')`, [armed.job_id]);
  const back = { id: claim.rows[0].id, execution: claim.rows[0].execution, outcome: 'handed_back' as const, result: null, error: null, retryDelayMs: 0 };
  expect((await ledger.completeExecutions(workerId, [back]))[0].status).toBe('ready');
  expect(await setSchedulePaused(db, ns, 'report', true)).toBe(true);
  // Started: kept with its recorded step, to finish (a running fire finishes; docs/schedules.md).
  const { rows } = await db.query<{ status: string; steps: string }>(
    'select j.status, (select count(*) from acta.steps s where s.job_id = j.id) as steps from acta.jobs j where j.id = $1', [armed.job_id]);
  expect(rows).toEqual([{ status: 'ready', steps: '1' }]);
  // A resumed schedule's fire that no worker claimed yet is deleted by the next pause.
  expect(await setSchedulePaused(db, ns, 'report', false)).toBe(true);
  const other = `s-${randomUUID()}`;
  const second = await register(other, def({ cron: '0 * * * *' }), 'b1');
  await second.ledger.armSchedules!(other);
  const unclaimed = (await schedule(other)).job_id!;
  expect(await setSchedulePaused(db, other, 'report', true)).toBe(true);
  expect((await db.query('select 1 from acta.jobs where id = $1', [unclaimed])).rows).toEqual([]);
});

it("a pause committed while a fire's completion waits for the schedule arms no next fire", async () => {
  const { ns, ledger, workerId, claim } = await claimedFire();
  const fire = claim.rows[0].schedule!;
  const pauser = new Client({ connectionString: tdb.url, statement_timeout: 10_000 });
  await pauser.connect();
  try {
    // The pause holds the schedule's row lock, uncommitted, while the fire's completion runs.
    await pauser.query('begin');
    expect(await setSchedulePaused(pauser as never, ns, 'report', true)).toBe(true);
    const row = { id: claim.rows[0].id, execution: claim.rows[0].execution, outcome: 'succeeded' as const, result: 'null', error: null, retryDelayMs: 0, nextFireAt: cronSchedule('0 * * * *').next(fire.at)! };
    const completing = ledger.completeExecutions(workerId, [row]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await pauser.query('commit');
    expect((await completing)[0].status).toBe('succeeded');
  } finally {
    await pauser.end();
  }
  const after = await schedule(ns);
  expect(after).toMatchObject({ job_id: null, next_fire_at: null, last_outcome: 'succeeded' });
  const { rows } = await db.query<{ n: string }>(`select count(*) as n from acta.jobs where namespace = $1 and status = 'ready'`, [ns]);
  expect(rows[0].n).toBe('0');
});

// docs/schedules.md, "At runtime" and "Changes": a runtime write deletes the schedule's fire that
// has not started, the one its fire's completion armed meanwhile included. Was: the write waited for
// the schedule row while that completion held it, then read the fire rows with a snapshot taken
// before the completion committed, so the armed fire was kept: removed and added again under the
// name, the schedule had two fires queued (the old spec's and its own); paused, it fired once more;
// changed, it fired once more under the old spec.
describe('a runtime write that waits for a fire\'s completion', () => {
  const readyFires = async (ns: string) =>
    (await db.query<{ id: string; payload: unknown }>(`select id::text, payload from acta.jobs where namespace = $1 and schedule = 'm' and status = 'ready' order by id`, [ns])).rows;

  /** A runtime schedule 'm' whose fire is claimed; `write` runs while that fire's completion (arming the next) holds the schedule row, and commits first. */
  async function writeDuringCompletion(write: (client: ReturnType<typeof createClient>) => Promise<unknown>) {
    const ns = `s-${randomUUID()}`;
    const { workerId } = await register(ns, def(undefined), 'b1');
    const client = createClient({ db, namespace: ns });
    expect(await client.schedules.add('report', { name: 'm', cron: '0 * * * *', payload: { v: 1 } })).toBe('added');
    const armed = await schedule(ns, 'm');
    await makeDue(armed.job_id!);
    const [row] = (await sqlLedger(db).claimJobs({ namespace: ns, workerId, definitions: ['report'], limit: 5, leaseMs: 60_000 })).rows;
    expect(row.id).toBe(armed.job_id);
    const completer = new Client({ connectionString: tdb.url, statement_timeout: 10_000 });
    await completer.connect();
    try {
      await completer.query('begin');
      const done = { id: row.id, execution: row.execution, outcome: 'succeeded' as const, result: 'null', error: null, retryDelayMs: 0, nextFireAt: cronSchedule('0 * * * *').next(row.schedule!.at)! };
      expect((await completeExecutions(completer as never, workerId, [done]))[0].status).toBe('succeeded');
      expect(await readyFires(ns)).toHaveLength(0); // the next fire, armed but not committed
      const writing = write(client);
      await waitFor(async () => (await db.query(`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)).rows.length > 0, 'the write to wait for the schedule row');
      await completer.query('commit');
      await writing;
    } finally {
      await completer.end();
    }
    return { ns, client };
  }

  it('removed, then added again under the name: one fire queued, the new schedule\'s', async () => {
    const { ns, client } = await writeDuringCompletion(async (c) => expect(await c.schedules.remove('m')).toBe(true));
    expect(await client.schedules.add('report', { name: 'm', cron: '30 * * * *', payload: { v: 2 } })).toBe('added');
    expect(await readyFires(ns)).toEqual([{ id: (await schedule(ns, 'm')).job_id, payload: { v: 2 } }]);
  });

  it('paused: no fire queued', async () => {
    const { ns } = await writeDuringCompletion(async (c) => expect(await c.schedules.pause('m')).toBe(true));
    expect(await readyFires(ns)).toEqual([]);
    expect(await schedule(ns, 'm')).toMatchObject({ job_id: null, next_fire_at: null, last_outcome: 'succeeded' });
  });

  it('changed: one fire queued, the new spec\'s', async () => {
    const { ns } = await writeDuringCompletion(async (c) => expect(await c.schedules.add('report', { name: 'm', cron: '30 * * * *', payload: { v: 2 } })).toBe('changed'));
    const [fire] = await readyFires(ns);
    expect(fire).toEqual({ id: (await schedule(ns, 'm')).job_id, payload: { v: 2 } });
    expect(await readyFires(ns)).toHaveLength(1);
  });
});

// acta.arm_schedules arms a schedule only at the version its instant was computed for, and a
// version once used for a name is never used again for it (migration 0024). Was: a schedule removed
// and added again under its name started again at version 1, so a schedules pass that read the old
// schedule before the removal armed the new one at the old cron's instant (every minute's: a month
// early for a monthly schedule).
describe('a schedules pass that read a schedule since removed and added again under its name', () => {
  const EVERY_MINUTE = '* * * * *';
  const MONTHLY = '0 0 1 * *';
  const spec = (cron: string) => ({ name: 'm', cron, timeZone: 'UTC', payload: null, catchUp: 'latest' as const, catchUpWindowMs: null, priority: 0, concurrencyKey: null, rateKey: null, lane: null });
  const fires = async (ns: string) => (await db.query<{ at: Date }>('select scheduled_at as at from acta.jobs where namespace = $1 order by id', [ns])).rows.map((r) => r.at);

  /** The pass's read of the old schedule, then `readd`, then the pass's arm with what it read: nothing armed; the next pass arms the new cron's instant. */
  async function staleArm(ns: string, name: string, readd: () => Promise<void>) {
    const reads = await unarmedSchedules(db, ns);
    expect(reads).toHaveLength(1);
    const [stale] = reads;
    expect(stale).toMatchObject({ name, cron: EVERY_MINUTE });
    const armed = armInstants([stale]);
    await readd();
    const readded = await schedule(ns, name);
    expect(readded).toMatchObject({ cron: MONTHLY, job_id: null });
    expect(readded.version).not.toBe(stale.version);
    expect(await armSchedules(db, ns, armed.names, armed.versions, armed.instants)).toBe(0);
    expect(await fires(ns)).toEqual([]);
    // An ordinary pass arms the new schedule at its own cron's next instant.
    const read = await unarmedSchedules(db, ns);
    const fresh = armInstants(read);
    expect(await armSchedules(db, ns, fresh.names, fresh.versions, fresh.instants)).toBe(1);
    const at = cronSchedule(MONTHLY).next(read[0].now)!;
    expect(await fires(ns)).toEqual([at]);
    expect(await schedule(ns, name)).toMatchObject({ cron: MONTHLY, next_fire_at: at });
  }

  it('a runtime schedule (acta.remove_schedule, acta.put_schedule)', async () => {
    const ns = `s-${randomUUID()}`;
    await register(ns, def(undefined), 'b1');
    expect(await putRuntimeSchedule(db, ns, 'report', spec(EVERY_MINUTE))).toBe('added');
    await staleArm(ns, 'm', async () => {
      expect(await removeSchedule(db, ns, 'm')).toBe('removed');
      expect(await putRuntimeSchedule(db, ns, 'report', spec(MONTHLY))).toBe('added');
    });
  });

  it('a declared schedule, dropped by a build and declared again by a newer one (acta.reconcile_schedules)', async () => {
    const ns = `s-${randomUUID()}`;
    await register(ns, def({ cron: EVERY_MINUTE }), 'b1');
    await staleArm(ns, 'report', async () => {
      await register(ns, def(undefined), 'b2');
      expect(await schedule(ns)).toBeUndefined();
      await register(ns, def({ cron: MONTHLY }), 'b3');
    });
  });
});

it("a schedule's fires carry their definition's policy keys: a concurrency limit of 1 keeps two fires from running at once, and a lane orders them with its enqueued jobs", async () => {
  const { createClient, createWorker, defineJob } = await import('../../src');
  const { silentLogger } = await import('../helpers/silentLogger');
  const ns = `s-${randomUUID()}`;
  const runs: { kind: string; start: number; end: number }[] = [];
  const run = (kind: string) => async () => {
    const start = Date.now();
    await new Promise((r) => setTimeout(r, 1_300)); // longer than the cron's second: fires would overlap unadmitted
    runs.push({ kind, start, end: Date.now() });
  };
  const single = defineJob({ name: 'single', concurrency: { key: () => 'global', limit: 1 }, schedule: { cron: '* * * * * *', catchUp: 'all', catchUpWindowMs: 60_000 }, handler: run('fire') });
  const laned = defineJob({ name: 'laned', lane: (p: { lane?: string } | null) => p?.lane ?? 'L', schedule: { cron: '0 0 1 1 *', payload: { lane: 'M' } }, handler: () => null });
  const worker = createWorker({ db, namespace: ns, definitions: [single, laned], executors: 8, logger: silentLogger });
  await worker.start();
  try {
    await createClient({ db, namespace: ns, definitions: [single] }).enqueue(single, null);
    await new Promise((r) => setTimeout(r, 4_500));
  } finally {
    await worker.stop();
  }
  const { rows } = await db.query<{ definition: string; schedule: string | null; concurrency_key: string | null; lane: string | null }>(
    'select definition, schedule, concurrency_key, lane from acta.jobs where namespace = $1 order by id', [ns]);
  // Every fire armed (by registration's pass or by a completion) carries the keys the functions give.
  expect(rows.filter((r) => r.definition === 'single').every((r) => r.concurrency_key === 'global')).toBe(true);
  expect(rows.filter((r) => r.definition === 'laned')).toEqual([{ definition: 'laned', schedule: 'laned', concurrency_key: null, lane: 'M' }]);
  // Limit 1: no two attempts of the key at once, fires and the enqueued job alike.
  expect(runs.filter((r) => r.kind === 'fire').length).toBeGreaterThanOrEqual(2);
  const sorted = [...runs].sort((a, b) => a.start - b.start);
  for (let i = 1; i < sorted.length; i++) expect(sorted[i].start).toBeGreaterThanOrEqual(sorted[i - 1].end);
});

// docs/policies.md, "Lanes": an armed fire not yet due holds no place in its lane. Was: it held the
// lane until its instant, so a trigger of a daily schedule and the lane's jobs waited a day.
it("a lane's armed fire due tomorrow does not hold the lane: a trigger and an enqueued job run now", async () => {
  const { createClient, createWorker, defineJob } = await import('../../src');
  const { silentLogger } = await import('../helpers/silentLogger');
  const ns = `s-${randomUUID()}`;
  const ran: string[] = [];
  const nightly = defineJob({ name: 'nightly', lane: () => 'reports', schedule: { cron: '0 2 * * *' }, handler: (_p, ctx) => {
    ran.push(ctx.jobId);
  } });
  const worker = createWorker({ db, namespace: ns, definitions: [nightly], logger: silentLogger });
  await worker.start();
  try {
    const client = createClient({ db, namespace: ns, definitions: [nightly] });
    await waitFor(async () => (await schedule(ns, 'nightly'))?.job_id != null, 'the armed fire');
    const armed = (await schedule(ns, 'nightly')).job_id!;
    const triggered = (await client.schedules.trigger('nightly'))!;
    const { id } = await client.enqueue(nightly, {});
    await waitFor(() => ran.length === 2, 'the trigger and the job to run', 10_000);
    expect(ran).toEqual([triggered, id]);
    expect(ran).not.toContain(armed);
  } finally {
    await worker.stop();
  }
});

// docs/schedules.md, "Changes": a schedule never runs two of its own fires at once. Was: a change
// while a fire ran detached it and armed the new next instant at once, which a free executor ran
// beside it. The ledger decides: no two attempts of the schedule's fires overlap in
// [claimed_at, finished_at].
it("a schedule changed while its fire runs (real worker, a 3 s handler every second): the change's fire waits for that fire's end, no two fires overlap", async () => {
  const { createClient, createWorker, defineJob } = await import('../../src');
  const { silentLogger } = await import('../helpers/silentLogger');
  const { waitFor } = await import('../helpers/wait');
  const ns = `s-${randomUUID()}`;
  const slow = defineJob({ name: 'slow', handler: () => new Promise((r) => setTimeout(r, 3_000)) });
  const worker = createWorker({ db, namespace: ns, definitions: [slow], executors: 4, logger: silentLogger });
  await worker.start();
  const client = createClient({ db, namespace: ns, definitions: [slow] });
  const fires = (where: string) => db.query(`select 1 from acta.jobs where namespace = $1 and schedule = 'tick' and ${where}`, [ns]);
  try {
    expect(await client.schedules.add(slow, { name: 'tick', cron: '* * * * * *', payload: { v: 1 } })).toBe('added');
    await waitFor(async () => (await fires("status = 'executing'")).rows.length > 0, 'a fire running', 15_000);
    expect(await client.schedules.add(slow, { name: 'tick', cron: '* * * * * *', payload: { v: 2 } })).toBe('changed');
    await waitFor(async () => (await fires(`status = 'succeeded' and payload = '{"v": 2}'`)).rows.length > 0, 'a fire of the changed schedule succeeded', 30_000);
  } finally {
    await worker.stop();
  }
  const { rows } = await db.query<{ job_id: string; claimed_at: Date; finished_at: Date }>(
    `select e.job_id::text, e.claimed_at, e.finished_at from acta.executions e join acta.jobs j on j.id = e.job_id
     where j.namespace = $1 and j.schedule = 'tick' order by e.claimed_at, e.finished_at`, [ns]);
  expect(rows.length).toBeGreaterThanOrEqual(2);
  for (let i = 1; i < rows.length; i++) {
    const overlap = rows[i].claimed_at.getTime() < rows[i - 1].finished_at.getTime();
    expect({ fire: rows[i].job_id, overlapsFire: overlap ? rows[i - 1].job_id : null }).toEqual({ fire: rows[i].job_id, overlapsFire: null });
  }
});

// docs/schedules.md, "Changes": a change keeps the armed fire whose instant has passed (owed, never
// claimed: the workers were down or busy), and it runs under the old spec; the new spec's first
// instant after the change is armed at its end. Was: the change deleted it, unrecorded.
it("a runtime change while the armed fire is due and no worker has claimed it: a real worker runs that fire with the old payload, then the new spec's fires", async () => {
  const { createClient, createWorker, defineJob } = await import('../../src');
  const { silentLogger } = await import('../helpers/silentLogger');
  const ns = `s-${randomUUID()}`;
  const ran: { v: number; at: number }[] = [];
  const tick = defineJob({ name: 'tick', handler: (p: { v: number }, ctx) => void ran.push({ v: p.v, at: ctx.scheduledAt!.getTime() }) });
  const client = createClient({ db, namespace: ns, definitions: [tick] });
  const spec = (v: number) => ({ name: 'tick', cron: '* * * * * *', payload: { v }, catchUp: 'all' as const, catchUpWindowMs: 60_000 });
  expect(await client.schedules.add(tick, spec(1))).toBe('added');
  const armed = await schedule(ns, 'tick');
  await waitFor(async () => (await db.query('select 1 from acta.jobs where id = $1 and run_at <= now()', [armed.job_id])).rows.length > 0, 'the armed fire due', 5_000);
  expect(await client.schedules.add(tick, spec(2))).toBe('changed');
  const changed = await schedule(ns, 'tick');
  expect(changed.job_id).toBe(armed.job_id);
  expect(changed.next_fire_at!.getTime()).toBeGreaterThan(armed.next_fire_at!.getTime()); // the pending instant, armed at the fire's end
  const worker = createWorker({ db, namespace: ns, definitions: [tick], executors: 2, logger: silentLogger });
  await worker.start();
  try {
    await waitFor(async () => ran.some((r) => r.v === 2), 'a fire of the changed schedule ran', 15_000);
  } finally {
    await worker.stop();
  }
  expect(ran[0]).toEqual({ v: 1, at: armed.next_fire_at!.getTime() });
  expect(ran.slice(1).every((r) => r.v === 2)).toBe(true);
  expect(ran[1].at).toBe(changed.next_fire_at!.getTime());
  const { rows } = await db.query<{ status: string }>('select status from acta.jobs where id = $1', [armed.job_id]);
  expect(rows).toEqual([{ status: 'succeeded' }]);
});
