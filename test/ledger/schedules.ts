// The contract's schedule cases (contract.ts runs them on both ledgers; docs/schedules.md): the
// schedules pass (acta.arm_schedules), a fire's claim, the recurring fire of
// acta.complete_executions, one fire per instant, the catch-up policies, the reconciliation of
// declared schedules (acta.reconcile_schedules) and a paused schedule.
//
// The cron is every minute and the clock moves by whole minutes: the SQL moves stored instants
// into the past, which keeps them on the cron's grid only so.
import { randomUUID } from 'node:crypto';
import { defineJob } from '../../src';
import { declaredPolicy } from '../../src/definition';
import type { ClaimedRow, CompletionRow } from '../../src/db/types';
import { alertThresholds } from '../../src/recurring/alerts';
import { cronSchedule } from '../../src/recurring/cron';
import { fireDecision, type ScheduleSpec } from '../../src/recurring/schedules';
import type { LedgerUnderTest } from './contract';

const LEASE_MS = 60_000;
const MINUTE = 60_000;
const EVERY_MINUTE = '* * * * *';
const YEARLY = '0 0 1 1 *';
const ns = () => `sched-${randomUUID().slice(0, 8)}`;
const ended = (r: ClaimedRow, outcome: CompletionRow['outcome'], nextFireAt: Date | null): CompletionRow => ({
  id: r.id, execution: r.execution, outcome, result: outcome === 'succeeded' ? 'null' : null, error: null, retryDelayMs: 0, nextFireAt,
});

export function scheduleCases(get: () => LedgerUnderTest): void {
  /** A worker of `namespace` running `tick`, which declares `schedule` (none: undefined); its id. */
  const declare = async (namespace: string, schedule: ScheduleSpec | ScheduleSpec[] | undefined, build: string) => {
    const { ledger } = get();
    const workerId = randomUUID();
    const tick = defineJob({ name: 'tick', handler: () => undefined, ...(schedule ? { schedule } : {}) });
    await ledger.registerWorker({
      workerId, namespace, hostname: 'contract', pid: 1, definitions: ['tick'], maxAttempts: [null], leaseMs: LEASE_MS, build, policies: { tick: declaredPolicy(tick) },
    });
    return workerId;
  };
  const list = async (namespace: string, name = 'tick') => (await get().ledger.listSchedules!(namespace, name))[0];
  const claim = (namespace: string, workerId: string) => get().ledger.claimJobs({ namespace, workerId, definitions: ['tick'], limit: 10, leaseMs: LEASE_MS });
  /** The schedule armed by the pass, then the clock a minute on: its fire is due. */
  const armedAndDue = async (namespace: string) => {
    expect(await get().ledger.armSchedules!(namespace)).toBe(1);
    const armed = await list(namespace);
    await get().advance(MINUTE);
    return armed;
  };

  test('the pass arms a declared schedule once; its fire\'s completion arms the next instant in the same call; a stale repeat arms nothing', async () => {
    const { ledger, now } = get();
    const namespace = ns();
    const workerId = await declare(namespace, { cron: EVERY_MINUTE, payload: { p: 1 } }, 'b1');
    const before = await now();
    expect(await ledger.armSchedules!(namespace)).toBe(1);
    expect(await ledger.armSchedules!(namespace)).toBe(0);
    const armed = await list(namespace);
    expect(armed).toMatchObject({ name: 'tick', definition: 'tick', source: 'declared', paused: false, lastFireAt: null, lastOutcome: null });
    expect(armed.nextFireAt!.getTime() % MINUTE).toBe(0);
    expect(armed.nextFireAt!.getTime()).toBeGreaterThan(before);
    expect(armed.nextFireAt!.getTime()).toBeLessThanOrEqual(before + MINUTE);
    expect(await ledger.readJob(namespace, armed.jobId!)).toMatchObject({ status: 'ready', schedule: 'tick', payload: { p: 1 } });

    await get().advance(MINUTE);
    const { rows } = await claim(namespace, workerId);
    expect(rows).toHaveLength(1);
    const fire = rows[0].schedule!;
    expect(fire).toMatchObject({ name: 'tick', cron: EVERY_MINUTE, timeZone: 'UTC', catchUp: 'latest', armed: true });
    expect(fire.at.getTime() % MINUTE).toBe(0);
    expect(fireDecision(fire, true).skip).toBe(false);
    const next = cronSchedule(EVERY_MINUTE).next(fire.at)!;
    const done = ended(rows[0], 'succeeded', next);
    expect((await ledger.completeExecutions(workerId, [done]))[0].status).toBe('succeeded');
    const after = await list(namespace);
    expect(after).toMatchObject({ nextFireAt: next, lastFireAt: fire.at, lastJobId: rows[0].id, lastOutcome: 'succeeded' });
    expect(after.jobId).not.toBe(rows[0].id);
    expect(await ledger.readJob(namespace, rows[0].id)).toMatchObject({ status: 'succeeded', schedule: 'tick', scheduledAt: fire.at });
    expect(await ledger.readJob(namespace, after.jobId!)).toMatchObject({ status: 'ready', schedule: 'tick', scheduledAt: next });

    // The same completion again (its answer lost) is stale: nothing more is armed.
    expect((await ledger.completeExecutions(workerId, [done]))[0].status).toBe('stale');
    expect(await list(namespace)).toEqual(after);
    expect(await ledger.armSchedules!(namespace)).toBe(0);
  });

  test('a fire that fails an attempt is retried at the same instant and arms nothing; its final end arms the next', async () => {
    const { ledger } = get();
    const namespace = ns();
    const workerId = await declare(namespace, { cron: EVERY_MINUTE }, 'b1');
    const armed = await armedAndDue(namespace);
    const first = (await claim(namespace, workerId)).rows[0];
    const next = cronSchedule(EVERY_MINUTE).next(first.schedule!.at)!;
    const failed = { ...ended(first, 'failed', next), error: JSON.stringify({ name: 'Error', message: 'x' }) };
    expect((await ledger.completeExecutions(workerId, [failed]))[0].status).toBe('ready');
    expect(await list(namespace)).toMatchObject({ jobId: armed.jobId, lastOutcome: null });
    const again = (await claim(namespace, workerId)).rows[0];
    expect(again).toMatchObject({ id: first.id, execution: 2, attempts: 1 });
    expect(again.schedule!.at).toEqual(first.schedule!.at);
    expect((await ledger.completeExecutions(workerId, [ended(again, 'succeeded', next)]))[0].status).toBe('succeeded');
    expect(await list(namespace)).toMatchObject({ nextFireAt: next, lastOutcome: 'succeeded' });
  });

  describe('catch-up: a fire claimed after its successor was due', () => {
    const late = async (catchUp: ScheduleSpec['catchUp'], catchUpWindowMs?: number) => {
      const { ledger } = get();
      const namespace = ns();
      const workerId = await declare(namespace, { cron: EVERY_MINUTE, catchUp, ...(catchUpWindowMs === undefined ? {} : { catchUpWindowMs }) }, 'b1');
      expect(await ledger.armSchedules!(namespace)).toBe(1);
      await get().advance(5 * MINUTE); // five instants are due
      const row = (await claim(namespace, workerId)).rows[0];
      const fire = row.schedule!;
      const decision = fireDecision(fire, true);
      expect(decision.skip).toBe(true);
      expect((await ledger.completeExecutions(workerId, [ended(row, 'skipped', decision.nextFireAt)]))[0].status).toBe('cancelled');
      const job = (await ledger.readJob(namespace, row.id))!;
      expect(job).toMatchObject({ status: 'cancelled', attempts: 0 });
      expect(job.executions.map((e) => [e.outcome, e.charged])).toEqual([['skipped', false]]);
      const after = await list(namespace);
      expect(after).toMatchObject({ lastFireAt: fire.at, lastOutcome: 'skipped', nextFireAt: decision.nextFireAt });
      return { namespace, workerId, fire, next: after.nextFireAt!.getTime(), claimedAt: fire.claimedAt.getTime() };
    };

    test("'latest': skipped for the latest instant already due, which then runs", async () => {
      const { namespace, workerId, next, claimedAt } = await late('latest');
      expect(next).toBeLessThanOrEqual(claimedAt);
      expect(next).toBeGreaterThan(claimedAt - MINUTE);
      const row = (await claim(namespace, workerId)).rows[0];
      expect(row.schedule!.at.getTime()).toBe(next);
      expect(fireDecision(row.schedule!, true).skip).toBe(false);
    });

    test("'none': skipped for the first instant after the claim", async () => {
      const { namespace, workerId, next, claimedAt } = await late('none');
      expect(next).toBeGreaterThan(claimedAt);
      expect(next).toBeLessThanOrEqual(claimedAt + MINUTE);
      expect((await claim(namespace, workerId)).rows).toHaveLength(0);
    });

    test("'all': a fire older than the window is skipped for the first instant inside it; each instant inside runs, oldest first", async () => {
      const { namespace, workerId, next, claimedAt } = await late('all', 150_000);
      expect(next).toBeGreaterThanOrEqual(claimedAt - 150_000);
      expect(next).toBeLessThan(claimedAt - 90_000);
      const { ledger } = get();
      const ran: number[] = [];
      for (let row = (await claim(namespace, workerId)).rows[0]; row; row = (await claim(namespace, workerId)).rows[0]) {
        const decision = fireDecision(row.schedule!, true);
        expect(decision.skip).toBe(false);
        ran.push(row.schedule!.at.getTime());
        await ledger.completeExecutions(workerId, [ended(row, 'succeeded', decision.nextFireAt)]);
      }
      expect(ran[0]).toBe(next);
      expect(ran.map((t, i) => t - ran[0] - i * MINUTE)).toEqual(ran.map(() => 0));
      expect(ran.length).toBeGreaterThanOrEqual(2);
      expect(ran[ran.length - 1]).toBeLessThanOrEqual(claimedAt + 1_000);
    });
  });

  test('reconciled: a newer build that adds, changes or drops a schedule is applied; a change deletes the unstarted fire', async () => {
    const { ledger } = get();
    const namespace = ns();
    // Yearly: its fire is not due at the change (one at the next minute would be, within ms of it, and be kept).
    await declare(namespace, { cron: YEARLY }, 'b1');
    expect(await ledger.armSchedules!(namespace)).toBe(1);
    const first = await list(namespace);
    expect(first).toMatchObject({ cron: YEARLY, source: 'declared' });

    await get().advance(10);
    await declare(namespace, [{ cron: '*/5 * * * *' }, { name: 'tick-b', cron: EVERY_MINUTE, catchUp: 'none' }], 'b2');
    expect(await list(namespace)).toMatchObject({ cron: '*/5 * * * *', jobId: null, nextFireAt: null });
    expect(await ledger.readJob(namespace, first.jobId!)).toBeNull();
    expect(await list(namespace, 'tick-b')).toMatchObject({ definition: 'tick', catchUp: 'none', source: 'declared', jobId: null });
    expect(await ledger.armSchedules!(namespace)).toBe(2);
    expect((await list(namespace)).nextFireAt!.getTime() % (5 * MINUTE)).toBe(0);
    const armedB = (await list(namespace, 'tick-b')).jobId!;

    await get().advance(10);
    await declare(namespace, { cron: '*/5 * * * *' }, 'b3');
    expect(await list(namespace, 'tick-b')).toBeUndefined();
    expect(await ledger.readJob(namespace, armedB)).toBeNull();
    expect((await ledger.listSchedules!(namespace)).map((s) => s.name)).toEqual(['tick']);
    expect((await list(namespace)).jobId).not.toBeNull(); // unchanged: its fire stays armed
  });

  // docs/schedules.md, "Changes": a schedule never runs two of its own fires at once, so a change
  // while a fire has started arms the new spec's next instant at that fire's end, not beside it.
  test('a change while a fire runs: nothing is armed beside it; the pass stores the new next instant after the change, and that fire\'s end arms it', async () => {
    const { ledger, now } = get();
    const namespace = ns();
    const workerId = await declare(namespace, { cron: EVERY_MINUTE, payload: { v: 1 } }, 'b1');
    const armed = await armedAndDue(namespace);
    const row = (await claim(namespace, workerId)).rows[0];
    expect(row.id).toBe(armed.jobId);

    await get().advance(10);
    await declare(namespace, { cron: '*/5 * * * *', payload: { v: 2 } }, 'b2');
    expect(await list(namespace)).toMatchObject({ cron: '*/5 * * * *', jobId: row.id, nextFireAt: null });
    const changedAt = await now();
    expect(await ledger.armSchedules!(namespace)).toBe(0); // no fire beside the running one
    const pending = (await list(namespace)).nextFireAt!;
    expect(pending.getTime() % (5 * MINUTE)).toBe(0);
    expect(pending.getTime()).toBeGreaterThan(changedAt);
    expect(pending.getTime()).toBeLessThanOrEqual(changedAt + 5 * MINUTE);
    expect(await ledger.armSchedules!(namespace)).toBe(0);
    expect(await list(namespace)).toMatchObject({ jobId: row.id, nextFireAt: pending });

    // The fire ends: the instant its worker computed from the old spec is not armed; the pending one is.
    const old = cronSchedule(EVERY_MINUTE).next(row.schedule!.at)!;
    expect((await ledger.completeExecutions(workerId, [ended(row, 'succeeded', old)]))[0].status).toBe('succeeded');
    const after = await list(namespace);
    expect(after).toMatchObject({ nextFireAt: pending, lastJobId: row.id, lastOutcome: 'succeeded' });
    expect(await ledger.readJob(namespace, after.jobId!)).toMatchObject({ status: 'ready', scheduledAt: pending, payload: { v: 2 } });
    expect(await ledger.armSchedules!(namespace)).toBe(0);
  });

  test('a change while a fire waits to retry keeps it; ended before the pass stored an instant, it arms nothing, and the pass arms the new next instant after now', async () => {
    const { ledger, now } = get();
    const namespace = ns();
    const workerId = await declare(namespace, { cron: EVERY_MINUTE }, 'b1');
    await armedAndDue(namespace);
    const first = (await claim(namespace, workerId)).rows[0];
    const failed = { ...ended(first, 'failed', null), error: JSON.stringify({ name: 'Error', message: 'x' }) };
    expect((await ledger.completeExecutions(workerId, [failed]))[0].status).toBe('ready');

    await get().advance(10);
    await declare(namespace, { cron: '*/5 * * * *' }, 'b2');
    // Started (an attempt ran): not deleted, still the schedule's fire.
    expect(await list(namespace)).toMatchObject({ jobId: first.id, nextFireAt: null });
    expect(await ledger.readJob(namespace, first.id)).toMatchObject({ status: 'ready' });
    const again = (await claim(namespace, workerId)).rows[0];
    expect(again).toMatchObject({ id: first.id, execution: 2, schedule: { armed: true } });
    expect((await ledger.completeExecutions(workerId, [ended(again, 'succeeded', cronSchedule(EVERY_MINUTE).next(first.schedule!.at))]))[0].status).toBe('succeeded');
    expect(await list(namespace)).toMatchObject({ jobId: null, nextFireAt: null, lastJobId: first.id, lastOutcome: 'succeeded' });

    const passAt = await now();
    expect(await ledger.armSchedules!(namespace)).toBe(1);
    const next = (await list(namespace)).nextFireAt!;
    expect(next.getTime() % (5 * MINUTE)).toBe(0);
    expect(next.getTime()).toBeGreaterThan(passAt);
    expect(next.getTime()).toBeLessThanOrEqual(passAt + 5 * MINUTE);
  });

  // docs/schedules.md, "Changes": a fire whose instant has passed is owed, so a change keeps it as it
  // keeps a started one (run under the old spec, judged at its claim by the catch-up policy); only a
  // fire not yet due is deleted and replaced. Was: a due fire never claimed was deleted, unrecorded.
  test('a change while the armed fire is due and unclaimed keeps it: it runs under the old spec, and its end arms the new next instant after the change; a fire not yet due is deleted and replaced', async () => {
    const { ledger, now } = get();
    const namespace = ns();
    const workerId = await declare(namespace, [{ cron: EVERY_MINUTE, payload: { v: 1 } }, { name: 'later', cron: YEARLY, payload: { v: 1 } }], 'b1');
    expect(await ledger.armSchedules!(namespace)).toBe(2);
    await get().advance(MINUTE); // tick's fire is due; later's is not
    const due = await list(namespace);
    const dueFire = await ledger.readJob(namespace, due.jobId!);
    expect(dueFire).toMatchObject({ status: 'ready', attempts: 0, payload: { v: 1 } });
    const notDue = await list(namespace, 'later');

    await declare(namespace, [{ cron: YEARLY, payload: { v: 2 } }, { name: 'later', cron: YEARLY, payload: { v: 2 } }], 'b2');
    // Due: kept as it was, still the schedule's fire. Not due: deleted.
    expect(await list(namespace)).toMatchObject({ cron: YEARLY, payload: { v: 2 }, jobId: due.jobId, nextFireAt: null });
    expect(await ledger.readJob(namespace, due.jobId!)).toEqual(dueFire);
    expect(await list(namespace, 'later')).toMatchObject({ payload: { v: 2 }, jobId: null, nextFireAt: null });
    expect(await ledger.readJob(namespace, notDue.jobId!)).toBeNull();
    const changedAt = await now();
    expect(await ledger.armSchedules!(namespace)).toBe(1); // later's new fire; none beside tick's
    const replaced = await list(namespace, 'later');
    expect(await ledger.readJob(namespace, replaced.jobId!)).toMatchObject({ status: 'ready', payload: { v: 2 }, scheduledAt: replaced.nextFireAt });
    const pending = (await list(namespace)).nextFireAt!;
    expect(pending).toEqual(cronSchedule(YEARLY).next(new Date(changedAt)));
    expect(await list(namespace)).toMatchObject({ jobId: due.jobId, nextFireAt: pending });

    // Claimed, judged by the catch-up policy (its successor is not due: it runs), with its old payload.
    const row = (await claim(namespace, workerId)).rows[0];
    expect(row).toMatchObject({ id: due.jobId, payload: { v: 1 }, schedule: { name: 'tick', at: dueFire!.scheduledAt, armed: true } });
    const decision = fireDecision(row.schedule!, true);
    expect(decision.skip).toBe(false);
    expect((await ledger.completeExecutions(workerId, [ended(row, 'succeeded', decision.nextFireAt)]))[0].status).toBe('succeeded');
    const after = await list(namespace);
    expect(after).toMatchObject({ nextFireAt: pending, lastJobId: row.id, lastFireAt: dueFire!.scheduledAt, lastOutcome: 'succeeded' });
    expect(await ledger.readJob(namespace, after.jobId!)).toMatchObject({ status: 'ready', scheduledAt: pending, payload: { v: 2 } });
    expect(await ledger.armSchedules!(namespace)).toBe(0);
  });

  test('a change keeps a due fire that the catch-up policy then skips: it ends skipped, recorded, and its end arms the new next instant after the change', async () => {
    const { ledger, now } = get();
    const namespace = ns();
    const workerId = await declare(namespace, { cron: EVERY_MINUTE, payload: { v: 1 } }, 'b1');
    expect(await ledger.armSchedules!(namespace)).toBe(1);
    const armed = await list(namespace);
    await get().advance(5 * MINUTE); // five instants are due

    await declare(namespace, { cron: EVERY_MINUTE, payload: { v: 2 } }, 'b2');
    expect(await list(namespace)).toMatchObject({ payload: { v: 2 }, jobId: armed.jobId, nextFireAt: null });
    const changedAt = await now();
    expect(await ledger.armSchedules!(namespace)).toBe(0);
    const pending = (await list(namespace)).nextFireAt!;
    expect(pending.getTime()).toBeGreaterThan(changedAt);
    expect(pending.getTime()).toBeLessThanOrEqual(changedAt + MINUTE);

    const row = (await claim(namespace, workerId)).rows[0];
    expect(row).toMatchObject({ id: armed.jobId, payload: { v: 1 } });
    const decision = fireDecision(row.schedule!, true);
    expect(decision.skip).toBe(true);
    expect((await ledger.completeExecutions(workerId, [ended(row, 'skipped', decision.nextFireAt)]))[0].status).toBe('cancelled');
    const job = (await ledger.readJob(namespace, row.id))!;
    expect(job).toMatchObject({ status: 'cancelled', attempts: 0, payload: { v: 1 } });
    expect(job.executions.map((e) => [e.outcome, e.charged])).toEqual([['skipped', false]]);
    const after = await list(namespace);
    expect(after).toMatchObject({ nextFireAt: pending, lastJobId: row.id, lastFireAt: row.schedule!.at, lastOutcome: 'skipped' });
    expect(await ledger.readJob(namespace, after.jobId!)).toMatchObject({ status: 'ready', scheduledAt: pending, payload: { v: 2 } });
  });

  test("a schedule's priority is each fire's: its fire is claimed ahead of jobs due before its instant; a change of priority is a change of the schedule", async () => {
    const { ledger } = get();
    const namespace = ns();
    const workerId = await declare(namespace, { cron: EVERY_MINUTE, priority: 5 }, 'b1');
    expect(await list(namespace)).toMatchObject({ priority: 5 });
    expect(await ledger.armSchedules!(namespace)).toBe(1);
    const n = 3;
    const backlog = await ledger.enqueueJobs(namespace, {
      definitions: Array(n).fill('tick'), payloads: Array(n).fill('{}'), priorities: Array(n).fill(null), runAts: Array(n).fill(null),
      maxAttempts: Array(n).fill(null), idempotencyKeys: Array(n).fill(null), concurrencyKeys: Array(n).fill(null), rateKeys: Array(n).fill(null), lanes: Array(n).fill(null),
    });
    await get().advance(MINUTE);
    const first = await get().ledger.claimJobs({ namespace, workerId, definitions: ['tick'], limit: 1, leaseMs: LEASE_MS });
    expect(first.rows).toHaveLength(1);
    expect(first.rows[0]).toMatchObject({ priority: 5, schedule: { name: 'tick', armed: true } });
    expect(backlog.map((b) => b.id)).not.toContain(first.rows[0].id);
    // Its completion arms the next fire at the schedule's priority too: one ten minutes on, not due
    // at the change below (the next minute's could be, and would be kept).
    const next = cronSchedule(EVERY_MINUTE).next(new Date(first.rows[0].schedule!.at.getTime() + 10 * MINUTE))!;
    await ledger.completeExecutions(workerId, [ended(first.rows[0], 'succeeded', next)]);
    expect(await ledger.readJob(namespace, (await list(namespace)).jobId!)).toMatchObject({ priority: 5, scheduledAt: next });

    // A newer build declaring another priority changes the schedule: the unstarted fire goes, the next is armed at the new one.
    const armed = (await list(namespace)).jobId!;
    await get().advance(10);
    await declare(namespace, { cron: EVERY_MINUTE }, 'b2');
    expect(await list(namespace)).toMatchObject({ priority: 0, jobId: null });
    expect(await ledger.readJob(namespace, armed)).toBeNull();
    expect(await ledger.armSchedules!(namespace)).toBe(1);
    expect(await ledger.readJob(namespace, (await list(namespace)).jobId!)).toMatchObject({ priority: 0 });
  });

  /** A worker of a new namespace running "tick": a yearly schedule whose jobs take lane L. */
  const laneTickWorker = async (): Promise<{ namespace: string; workerId: string }> => {
    const namespace = ns();
    const workerId = randomUUID();
    const tick = defineJob({ name: 'tick', handler: () => undefined, lane: () => 'L', schedule: { cron: YEARLY } });
    await get().ledger.registerWorker({
      workerId, namespace, hostname: 'contract', pid: 1, definitions: ['tick'], maxAttempts: [null], leaseMs: LEASE_MS, build: 'b1', policies: { tick: declaredPolicy(tick) },
    });
    return { namespace, workerId };
  };

  test("a lane's armed fire not yet due holds no place in it: due rows enqueued after it run first; due, the fire takes its place by its arming, behind the lane's running head", async () => {
    const { ledger } = get();
    const { namespace, workerId } = await laneTickWorker();
    expect(await ledger.armSchedules!(namespace)).toBe(1);
    const fire = (await list(namespace)).jobId!;
    expect(await ledger.readJob(namespace, fire)).toMatchObject({ status: 'ready', lane: 'L' });
    const n = 2;
    const enqueued = (await ledger.enqueueJobs(namespace, {
      definitions: Array(n).fill('tick'), payloads: [JSON.stringify({ i: 0 }), JSON.stringify({ i: 1 })], priorities: Array(n).fill(null), runAts: Array(n).fill(null),
      maxAttempts: Array(n).fill(null), idempotencyKeys: Array(n).fill(null), concurrencyKeys: Array(n).fill(null), rateKeys: Array(n).fill(null), lanes: Array(n).fill('L'),
    })).map((e) => e.id);
    // Before the fire's instant: the lane's head is the first row due, and the fire is not parked.
    const first = await claim(namespace, workerId);
    expect(first.rows.map((r) => r.id)).toEqual([enqueued[0]]);
    expect(await ledger.readJob(namespace, fire)).toMatchObject({ status: 'ready', blockedBy: null });
    // Its instant come while the lane runs: it waits for the head, then runs before the row
    // enqueued after its arming (commit order among due rows).
    await get().advance(366 * 24 * 60 * MINUTE);
    expect((await claim(namespace, workerId)).rows).toEqual([]);
    await ledger.completeExecutions(workerId, [ended(first.rows[0], 'succeeded', null)]);
    const second = await claim(namespace, workerId);
    expect(second.rows.map((r) => r.id)).toEqual([fire]);
    await ledger.completeExecutions(workerId, [ended(second.rows[0], 'succeeded', null)]);
    expect((await claim(namespace, workerId)).rows.map((r) => r.id)).toEqual([enqueued[1]]);
  });

  test("a lane's armed fire not yet due is not parked behind the lane's head, so it runs at its instant after the lane has emptied", async () => {
    const { ledger } = get();
    const { namespace, workerId } = await laneTickWorker();
    const inL = (i: number) => ({
      definitions: ['tick'], payloads: [JSON.stringify({ i })], priorities: [null], runAts: [null],
      maxAttempts: [null], idempotencyKeys: [null], concurrencyKeys: [null], rateKeys: [null], lanes: ['L'],
    });
    const [head] = (await ledger.enqueueJobs(namespace, inL(0))).map((e) => e.id);
    const running = await claim(namespace, workerId);
    expect(running.rows.map((r) => r.id)).toEqual([head]);
    const [behind] = (await ledger.enqueueJobs(namespace, inL(1))).map((e) => e.id);
    expect(await ledger.armSchedules!(namespace)).toBe(1);
    const fire = (await list(namespace)).jobId!;
    // A round refused whole parks the lane's rows behind its head: the due one, not the fire.
    expect((await claim(namespace, workerId)).rows).toEqual([]);
    expect(await ledger.readJob(namespace, behind!)).toMatchObject({ blockedBy: 'lane' });
    expect(await ledger.readJob(namespace, fire)).toMatchObject({ blockedBy: null });
    await ledger.completeExecutions(workerId, [ended(running.rows[0], 'succeeded', null)]);
    const next = await claim(namespace, workerId);
    expect(next.rows.map((r) => r.id)).toEqual([behind]);
    await ledger.completeExecutions(workerId, [ended(next.rows[0], 'succeeded', null)]);
    expect((await claim(namespace, workerId)).rows).toEqual([]);
    await get().advance(366 * 24 * 60 * MINUTE);
    expect((await claim(namespace, workerId)).rows.map((r) => r.id)).toEqual([fire]);
  });

  test('a paused schedule arms nothing: its unstarted fire goes, a running one arms no next; resumed, it fires from the next instant after now', async () => {
    const { ledger, now } = get();
    const namespace = ns();
    const workerId = await declare(namespace, { cron: EVERY_MINUTE }, 'b1');
    const armed = await armedAndDue(namespace);
    const row = (await claim(namespace, workerId)).rows[0];
    expect(row.id).toBe(armed.jobId);
    expect(await ledger.pauseSchedule!(namespace, 'tick', true)).toBe(true);
    expect(await ledger.pauseSchedule!(namespace, 'nope', true)).toBe(false);
    const next = cronSchedule(EVERY_MINUTE).next(row.schedule!.at);
    expect((await ledger.completeExecutions(workerId, [ended(row, 'succeeded', next)]))[0].status).toBe('succeeded');
    expect(await list(namespace)).toMatchObject({ paused: true, jobId: null, nextFireAt: null, lastOutcome: 'succeeded' });
    expect(await ledger.armSchedules!(namespace)).toBe(0);

    expect(await ledger.pauseSchedule!(namespace, 'tick', false)).toBe(true);
    const resumedAt = await now();
    expect(await ledger.armSchedules!(namespace)).toBe(1);
    const resumed = await list(namespace);
    expect(resumed.nextFireAt!.getTime()).toBeGreaterThan(resumedAt - 1_000);
    // Paused again before it fires: the armed fire is deleted.
    expect(await ledger.pauseSchedule!(namespace, 'tick', true)).toBe(true);
    expect(await ledger.readJob(namespace, resumed.jobId!)).toBeNull();
    expect(await list(namespace)).toMatchObject({ paused: true, jobId: null, nextFireAt: null });
    expect(await ledger.armSchedules!(namespace)).toBe(0);
  });

  test('schedule_late (acta.evaluate_alerts): the armed fire due past the bound and not claimed is raised once and resolved once, when it is claimed', async () => {
    const { ledger } = get();
    const namespace = ns();
    const workerId = await declare(namespace, { cron: EVERY_MINUTE }, 'b1');
    const thresholds = { ...alertThresholds({}), scheduleLateMs: 90_000 };
    const evaluate = async () =>
      (await ledger.evaluateAlerts({ namespace, thresholds, onAlert: null })).filter((r) => r.change !== null).map((r) => [r.change, r.rule, r.subject, r.detail]);
    const armed = await armedAndDue(namespace); // due less than a minute ago
    expect(await evaluate()).toEqual([]);
    await get().advance(2 * MINUTE); // due 2 to 3 minutes ago
    const raised = await evaluate();
    expect(raised).toEqual([['raised', 'schedule_late', 'tick', expect.objectContaining({ definition: 'tick' })]]);
    const { lateMs, scheduledAt } = raised[0][3] as { lateMs: number; scheduledAt: string };
    expect(new Date(scheduledAt)).toEqual((await list(namespace)).nextFireAt);
    expect(lateMs).toBeGreaterThan(90_000);
    expect(lateMs).toBeLessThan(3 * MINUTE + 10_000);
    expect(await evaluate()).toEqual([]);
    expect((await claim(namespace, workerId)).rows.map((r) => r.id)).toEqual([armed.jobId]);
    expect(await evaluate()).toEqual([['resolved', 'schedule_late', 'tick', expect.anything()]]);
    expect(await evaluate()).toEqual([]);
  });

  // docs/alerts.md: a pause holds its rows for a resume, not for a worker, as oldest_ready and
  // no_live_worker see it. Was: schedule_late raised for the armed fire a paused definition holds.
  test("schedule_late: a pause of the fire's definition or of the namespace holds the fire, which is not late; a resume raises it", async () => {
    const { ledger } = get();
    const namespace = ns();
    await declare(namespace, { cron: EVERY_MINUTE }, 'b1');
    const thresholds = { ...alertThresholds({}), scheduleLateMs: 90_000 };
    const evaluate = async () =>
      (await ledger.evaluateAlerts({ namespace, thresholds, onAlert: null })).filter((r) => r.change !== null).map((r) => [r.change, r.rule, r.subject]);
    await armedAndDue(namespace);
    await ledger.pause({ namespace, definition: 'tick' });
    await ledger.pause({ namespace: `${namespace}-other` }); // another namespace's pause holds nothing here
    await get().advance(2 * MINUTE); // due 2 to 3 minutes ago
    expect(await evaluate()).toEqual([]);
    await ledger.resume({ namespace, definition: 'tick' });
    expect(await evaluate()).toEqual([['raised', 'schedule_late', 'tick']]);
    await ledger.pause({ namespace });
    expect(await evaluate()).toEqual([['resolved', 'schedule_late', 'tick']]);
    await ledger.resume({ namespace: `${namespace}-other` });
  });

  test('schedule_late: a paused schedule has no armed fire and is never late', async () => {
    const { ledger } = get();
    const namespace = ns();
    await declare(namespace, { cron: EVERY_MINUTE }, 'b1');
    expect(await ledger.armSchedules!(namespace)).toBe(1);
    expect(await ledger.pauseSchedule!(namespace, 'tick', true)).toBe(true);
    await get().advance(5 * MINUTE);
    const rows = await ledger.evaluateAlerts({ namespace, thresholds: { ...alertThresholds({}), scheduleLateMs: 0 }, onAlert: null });
    expect(rows.filter((r) => r.rule === 'schedule_late')).toEqual([]);
  });

  // docs/schedules.md, "Declared schedules": a name two definitions declare is the newest declaration's.
  test('a name two definitions declare, reconciled at once, is the newest declaration\'s, whatever the definitions\' names', async () => {
    const { ledger } = get();
    const namespace = ns();
    const register = async (policies: Record<string, ReturnType<typeof declaredPolicy>>, build: string) => {
      const workerId = randomUUID();
      const definitions = Object.keys(policies);
      await ledger.registerWorker({ workerId, namespace, hostname: 'contract', pid: 1, definitions, maxAttempts: definitions.map(() => null), leaseMs: LEASE_MS, build, policies });
      return workerId;
    };
    const def = (name: string, cron?: string) => declaredPolicy(defineJob({ name, handler: () => undefined, ...(cron ? { schedule: { name: 'nightly', cron } } : {}) }));
    await register({ 'billing-report': def('billing-report', '0 2 * * *') }, 'billing-1');
    await get().advance(10);
    await register({ cleanup: def('cleanup', '0 3 * * *') }, 'cleanup-1');
    expect((await list(namespace, 'nightly')).definition).toBe('cleanup');
    await get().advance(10);
    const canary = await register({ 'billing-report': def('billing-report'), cleanup: def('cleanup') }, 'canary');
    expect(await list(namespace, 'nightly')).toBeUndefined();
    await ledger.stopWorker(canary); // both go back to their own service's build in one reconcile
    expect(await list(namespace, 'nightly')).toMatchObject({ definition: 'cleanup', cron: '0 3 * * *' });
  });
}
