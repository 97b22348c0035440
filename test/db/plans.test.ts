// The plans of the two calls on every job's path do not depend on statistics.
//
// The claim (sql/functions/claim_jobs.sql, "Plan"): with
// statistics taken while every row was finished and then a backlog enqueued, the pick still reads
// the rows it takes and stops, instead of reading the whole backlog and sorting it (35 ms per
// claim at 60,000 queued: docs/decisions/2026-11-30-claim-plan-settings.md). On PostgreSQL 15 the planner picks that sort from about 20,000 rows
// of history up.
import { randomUUID } from 'node:crypto';
import { createClient, type Db, defineJob, type Queryable } from '../../src';
import { completeExecutions } from '../../src/db/executions';
import { claimJobs, enqueueJobs, recoverJobs } from '../../src/db/jobs';
import { recordStep } from '../../src/db/steps';
import { heartbeat, registerWorker } from '../../src/db/workers';
import { declaredPolicy } from '../../src/definition';
import { sqlLedger } from '../../src/ledger';
import { sendSignal, spawnChildren } from '../../src/db/workflows';
import { Client } from 'pg';
import { createTestDatabase, type TestDatabase, useTestDatabase } from '../helpers/db';

const { db, tdb } = useTestDatabase({ timeoutMs: 60_000 });

const BACKLOG = 20_000;

test('with statistics that say nothing is Ready, a claim of 10 reads about 10 index entries, not the backlog', async () => {
  const client = createClient({ force: true, db });
  const batch = () => Array.from({ length: BACKLOG }, (_, i) => ({ definition: 'planned', payload: { i } }));
  await client.enqueueMany(batch());
  await db.query(`update acta.jobs set status = 'succeeded', finished_at = now()`); // the history
  await db.query('vacuum analyze acta.jobs'); // statistics: every row finished
  await client.enqueueMany(batch()); // the backlog
  const seen = await db.transaction(async (tx) => {
    const jitBefore = (await tx.query<{ jit: string }>(`select current_setting('jit') as jit`)).rows[0].jit;
    const claim = await claimJobs(tx, { namespace: 'default', workerId: randomUUID(), definitions: ['planned'], limit: 10, leaseMs: 60_000 });
    // This transaction's own index counters (PostgreSQL keeps them per transaction until commit).
    const { rows } = await tx.query<{ claim_scans: string; claim_read: string; due_scans: string; due_read: string; enable_sort: string; jit: string; enable_seqscan: string }>(
      `select pg_stat_get_xact_numscans('acta.jobs_claim_idx'::regclass) as claim_scans,
              pg_stat_get_xact_tuples_returned('acta.jobs_claim_idx'::regclass) as claim_read,
              pg_stat_get_xact_numscans('acta.jobs_due_idx'::regclass) as due_scans,
              pg_stat_get_xact_tuples_returned('acta.jobs_due_idx'::regclass) as due_read,
              current_setting('enable_sort') as enable_sort, current_setting('jit') as jit,
              current_setting('enable_seqscan') as enable_seqscan`,
    );
    return { claimed: claim.rows.map((r) => (r.payload as { i: number }).i), ...rows[0], jitBefore };
  });
  expect(seen.claimed).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  // The first 10 due rows along jobs_due_idx (migration 0005), then a look above their priority
  // in jobs_claim_idx (an empty range here).
  expect(Number(seen.due_scans)).toBe(1);
  expect(Number(seen.due_read)).toBeLessThanOrEqual(11);
  expect(Number(seen.claim_scans)).toBe(1);
  expect(Number(seen.claim_read)).toBeLessThanOrEqual(20);
  // The settings the plan needed are put back for the rest of the caller's transaction.
  expect(seen.enable_sort).toBe('on');
  expect(seen.enable_seqscan).toBe('on');
  expect(seen.jit).toBe(seen.jitBefore);
}, 60_000);

test('Ready rows of other definitions ahead in claim order are not walked: by the claim, nor by the idle claim\'s next-due probe', async () => {
  // The case it guards: 200,000 Ready rows of another definition at a higher priority made each claim
  // of the worker's own definition walk all of them (105-109 ms against 0.33; migration 0003).
  await db.query('truncate acta.jobs');
  const client = createClient({ force: true, db });
  await client.enqueueMany(Array.from({ length: BACKLOG }, (_, i) => ({ definition: 'other-pool', payload: { i }, priority: 10 })));
  await client.enqueueMany(Array.from({ length: 3 }, (_, i) => ({ definition: 'mine', payload: { i } })));
  await client.enqueue('mine-later', {}, { runAt: new Date(Date.now() + 3_600_000) });
  const reads = (tx: Queryable) =>
    tx.query<{ claim_read: string; due_read: string }>(
      `select pg_stat_get_xact_tuples_returned('acta.jobs_claim_idx'::regclass) as claim_read,
              pg_stat_get_xact_tuples_returned('acta.jobs_due_idx'::regclass) as due_read`,
    );
  // The next due row's wait in whole minutes, rounded up: the update and ANALYZE of the second pass
  // can take seconds on a busy machine, and a wait of 3,599.4 s is the same row.
  for (const analyze of [false, true]) {
    if (analyze) await db.query(`update acta.jobs set status = 'ready', execution = 0, lease_holder = null where definition = 'mine'`);
    if (analyze) await db.query('analyze acta.jobs');
    const seen = await db.transaction(async (tx) => {
      // No resumed scan: a pick slowed by a busy machine would hold its position and answer the idle
      // claim with the hold's end, not the next due row (test/db/resumedClaim.test.ts has its rules).
      await tx.query(`select set_config('acta.claim_resume_after_ms', 'Infinity', true)`);
      const worker = randomUUID();
      const claim = await claimJobs(tx, { namespace: 'default', workerId: worker, definitions: ['mine', 'mine-later'], limit: 8, leaseMs: 60_000 });
      const idle = await claimJobs(tx, { namespace: 'default', workerId: worker, definitions: ['mine', 'mine-later'], limit: 8, leaseMs: 60_000 });
      return { claimed: claim.rows.length, idleRows: idle.rows.length, nextDueInMin: Math.ceil((idle.nextDueInMs ?? 0) / 60_000), ...(await reads(tx)).rows[0] };
    });
    expect({ analyze, claimed: seen.claimed, idleRows: seen.idleRows, nextDueInMin: seen.nextDueInMin }).toEqual({ analyze, claimed: 3, idleRows: 0, nextDueInMin: 60 });
    // Entries read, dead ones included: a handful, against the 20,000 of the other pool walked before.
    expect({ analyze, claimRead: Number(seen.claim_read) < 200, dueRead: Number(seen.due_read) < 200 }).toEqual({ analyze, claimRead: true, dueRead: true });
  }
}, 60_000);

test('rows due later are not walked: by a claim that finds fewer due rows than it asks for, nor by the idle probe of a definition due after them', async () => {
  // The case it guards: jobs_claim_idx orders a definition's rows by priority first, so the due time
  // could not end the pick's walk: with 3 rows due and 100,000 due in an hour, each 8-row claim
  // walked all of them (21-34 ms against ~1); and jobs_due_idx, per namespace, made the idle probe
  // of a definition walk every row of the others due before its own (100,001 entries, 54 ms).
  // Entries rejected inside the B-tree are not counted as read: count the blocks visited.
  await db.query('truncate acta.jobs');
  const client = createClient({ force: true, db });
  const hour = new Date(Date.now() + 3_600_000);
  await client.enqueueMany(Array.from({ length: BACKLOG }, (_, i) => ({ definition: 'scheduled', payload: { i }, runAt: hour })));
  await client.enqueueMany(Array.from({ length: 2_000 }, (_, i) => ({ definition: 'scheduled', payload: { i }, runAt: hour, priority: 10 })));
  await client.enqueueMany(Array.from({ length: 3 }, (_, i) => ({ definition: 'scheduled', payload: { due: i } })));
  await client.enqueue('after-them', {}, { runAt: new Date(Date.now() + 7_200_000) });
  for (const analyze of [false, true]) {
    if (analyze) await db.query(`update acta.jobs set status = 'ready', execution = 0, lease_holder = null where status = 'executing'`);
    if (analyze) await db.query('analyze acta.jobs');
    const seen = await db.transaction(async (tx) => {
      // PostgreSQL 15 sends a backend's counters on at most once a second, so the "xact" counters
      // can still hold the enqueues' index blocks: take differences around the calls.
      const blocks = async () =>
        Number(
          (
            await tx.query<{ blocks: string }>(
              `select pg_stat_get_xact_blocks_fetched('acta.jobs_claim_idx'::regclass)
                    + pg_stat_get_xact_blocks_fetched('acta.jobs_due_idx'::regclass) as blocks`,
            )
          ).rows[0].blocks,
        );
      const worker = randomUUID();
      const before = await blocks();
      const claim = await claimJobs(tx, { namespace: 'default', workerId: worker, definitions: ['scheduled'], limit: 8, leaseMs: 60_000 });
      const idle = await claimJobs(tx, { namespace: 'default', workerId: worker, definitions: ['after-them'], limit: 8, leaseMs: 60_000 });
      return { claimed: claim.rows.map((r) => r.payload), idleRows: idle.rows.length, nextDueInMin: Math.ceil((idle.nextDueInMs ?? 0) / 60_000), blocks: (await blocks()) - before };
    });
    expect({ analyze, claimed: seen.claimed, idleRows: seen.idleRows, nextDueInMin: seen.nextDueInMin }).toEqual({ analyze, claimed: [{ due: 0 }, { due: 1 }, { due: 2 }], idleRows: 0, nextDueInMin: 120 });
    // A few blocks of each index (the 22,000 rows due in an hour fill about 120 of jobs_claim_idx's).
    expect({ analyze, blocks: seen.blocks <= 20 ? 'a few' : seen.blocks }).toEqual({ analyze, blocks: 'a few' });
  }
}, 60_000);

// The heartbeat and the completion (sql/functions/complete_executions.sql, "Plan"; migration
// 0002): with many rows Executing under other workers, they find their rows by primary key, never by reading
// jobs_lease_idx (every Executing row of the fleet: 7.5 ms against 1.3 ms per 128-row call at
// 19,128; docs/decisions/2026-11-30-fenced-writes-plan-settings.md). The completion's two writes
// of acta.jobs alike: the move of its successes out of it (`moved`, migration 0023) and the update
// of the rest.
describe.each([
  ['never analyzed', false],
  ['analyzed while nothing was Executing', true],
])('complete_executions with 5,000 rows Executing elsewhere, statistics %s', (_, analyzeFirst) => {
  let own: TestDatabase;
  let odb: Db;
  beforeAll(async () => {
    own = await createTestDatabase();
    odb = own.open();
  });
  afterAll(() => own.drop());

  test('a heartbeat and a completion find their 128 rows through the primary key, not jobs_lease_idx nor a table scan: the rows it moves out and the rows it updates', async () => {
    await createClient({ force: true, db: odb }).enqueueMany(Array.from({ length: 5_128 }, (_, i) => ({ definition: 'fenced', payload: { i } })));
    if (analyzeFirst) await odb.query('vacuum analyze acta.jobs');
    const others = randomUUID();
    const mine = randomUUID();
    await claimJobs(odb, { namespace: 'default', workerId: others, definitions: ['fenced'], limit: 5_000, leaseMs: 60_000 });
    const claimed = await claimJobs(odb, { namespace: 'default', workerId: mine, definitions: ['fenced'], limit: 128, leaseMs: 60_000 });
    expect(claimed.rows).toHaveLength(128);
    /**
     * Runs `call` in a transaction of its own and reads its scan counters around it: PostgreSQL 15
     * sends a backend's counters on at most once a second, so the "xact" ones can still hold the
     * claims' scans made before on that connection.
     */
    const scans = <T>(call: (tx: Queryable) => Promise<T>) =>
      odb.transaction(async (tx) => {
        // On a table, numscans counts sequential scans; `others`, scans of every index of acta.jobs but its primary key.
        const counters = async () =>
          (
            await tx.query<{ lease: string; pkey: string; table: string; others: string }>(
              `select pg_stat_get_xact_numscans('acta.jobs_lease_idx'::regclass) as lease,
                      pg_stat_get_xact_numscans('acta.jobs_pkey'::regclass) as pkey,
                      pg_stat_get_xact_numscans('acta.jobs'::regclass) as table,
                      (select coalesce(sum(pg_stat_get_xact_numscans(x.indexrelid)), 0) from pg_index x
                        where x.indrelid = 'acta.jobs'::regclass and x.indexrelid <> 'acta.jobs_pkey'::regclass) as others`,
            )
          ).rows[0];
        const before = await counters();
        const answer = await call(tx);
        const after = await counters();
        const d = (k: keyof typeof after) => Number(after[k]) - Number(before[k]);
        return { answer, lease: d('lease'), pkey: d('pkey'), table: d('table'), others: d('others') };
      });

    const beat = await scans((tx) =>
      heartbeat(tx, { workerId: mine, namespace: 'default', held: claimed.rows.map((r) => ({ id: r.id, execution: r.execution, started: true })), leaseMs: 60_000 }),
    );
    expect(beat.answer.renewed).toHaveLength(128);
    expect(beat.lease).toBe(0);
    expect(beat.pkey).toBeGreaterThanOrEqual(1);
    expect(beat.table).toBe(0);

    // Half succeed and leave acta.jobs (`moved`: nothing here keeps them), half are handed back
    // (the update): one call runs both statements, each on its first plan of the session.
    const outcome = (i: number) => (i % 2 === 0 ? ('succeeded' as const) : ('handed_back' as const));
    const done = await scans((tx) =>
      completeExecutions(
        tx,
        mine,
        claimed.rows.map((r, i) => ({ id: r.id, execution: r.execution, outcome: outcome(i), result: null, error: null, retryDelayMs: 0 })),
      ),
    );
    expect(done.answer.map((a) => a.status)).toEqual(claimed.rows.map((_, i) => (outcome(i) === 'succeeded' ? 'succeeded' : 'ready')));
    const split = await odb.query<{ moved: number; updated: number }>(
      `select (select count(*)::int from acta.succeeded_jobs where id = any ($1::bigint[])) as moved,
              (select count(*)::int from acta.jobs where id = any ($1::bigint[]) and status = 'ready') as updated`,
      [claimed.rows.map((r) => r.id)],
    );
    expect(split.rows[0]).toEqual({ moved: 64, updated: 64 });
    expect(done.lease).toBe(0);
    expect(done.others).toBe(0);
    expect(done.pkey).toBeGreaterThanOrEqual(1);
    // The first call of a session: a custom plan (sql/functions/complete_executions.sql, plan_cache_mode) read the table here.
    expect(done.table).toBe(0);
  }, 60_000);
});

test("a session whose claim, step record, heartbeat, completion (and its move of a success out of acta.jobs), recovery pass and keyed enqueue were first planned on a small analyzed table still go by key after the table grows", async () => {
  // One plan per session (plan_cache_mode): planned while acta.jobs held 10 analyzed rows, the
  // claim's UPDATE, the heartbeat and the completion read the whole table to find their rows (a
  // sequential scan is cheapest there), and kept doing so as the table grew until an ANALYZE
  // replanned them (bench/server-instructions.sh: 900,000 against 606,000 instructions per 1-row
  // claim at 400 rows). With sequential scans off, the heartbeat and the completion then read the
  // whole primary key instead, in key order (a full index scan is what stands in for a table
  // scan): 40,026 and 20,011 entries per call on 20,010 rows. The recovery pass (no settings
  // then) read the whole table twice: 40,020 rows per pass; an enqueue with idempotency keys once
  // (20,017 rows per 2-job call), and with sequential scans off the whole key index. The idle
  // claim's next-due probe, planned after the claim put sequential scans back on, read the whole
  // table on every idle poll (300,010 rows, 66-83 ms; docs/decisions/2026-11-30-claim-plan-settings.md).
  // Every call here is about one row: it should read a few index entries, whatever the table holds.
  await db.query('truncate acta.jobs');
  const client = createClient({ force: true, db });
  await client.enqueueMany(Array.from({ length: 10 }, (_, i) => ({ definition: 'small', payload: { i }, idempotencyKey: `small-${i}` })));
  await db.query('analyze acta.jobs');
  const session = new Client({ connectionString: tdb.url });
  await session.connect();
  try {
    const worker = randomUUID();
    /** This transaction's reads so far: sequential scans of acta.jobs, rows they returned, entries read of the primary key and the idempotency key index. */
    const reads = async () => {
      const { rows } = await session.query<{ seq_scans: string; seq_read: string; key_read: string }>(
        `select pg_stat_get_xact_numscans('acta.jobs'::regclass) as seq_scans,
                pg_stat_get_xact_tuples_returned('acta.jobs'::regclass) as seq_read,
                pg_stat_get_xact_tuples_returned('acta.jobs_pkey'::regclass)
                  + pg_stat_get_xact_tuples_returned('acta.jobs_idempotency_key_idx'::regclass) as key_read`,
      );
      return { seqScans: Number(rows[0].seq_scans), seqRead: Number(rows[0].seq_read), keyRead: Number(rows[0].key_read) };
    };
    /** What `call` read, as the difference of the counters around it. */
    const measured = async <T>(call: () => Promise<T>, few = 8) => {
      const before = await reads();
      const answer = await call();
      const after = await reads();
      // A few key entries for its one row (that row's versions), whatever the table holds;
      // otherwise the number, for the failure message.
      const keyRead = after.keyRead - before.keyRead;
      const read = { seqScans: after.seqScans - before.seqScans, seqRead: after.seqRead - before.seqRead, keyRead: keyRead <= few ? 'a few' : keyRead };
      return { answer, read };
    };
    let round = 0;
    const claimBeatComplete = async () => {
      round++;
      await session.query('begin');
      // One key taken before, one new.
      const keys = ['small-0', `new-${round}`];
      const enqueued = await measured(() =>
        enqueueJobs(session, 'default', { definitions: ['other', 'other'], payloads: ['1', '2'], priorities: [null, null], runAts: [null, null], maxAttempts: [null, null], idempotencyKeys: keys }),
      );
      const claim = await measured(() => claimJobs(session, { namespace: 'default', workerId: worker, definitions: ['small'], limit: 1, leaseMs: 60_000 }));
      // An idle claim: nothing due of its definition, so it reads the next due time instead.
      const idle = await measured(() => claimJobs(session, { namespace: 'default', workerId: worker, definitions: ['idle'], limit: 8, leaseMs: 60_000 }));
      const [row] = claim.answer.rows;
      const step = await measured(() => recordStep(session, { workerId: worker, jobId: row.id, execution: row.execution, name: 'a step', resultJson: '1' }));
      const held = claim.answer.rows.map((r) => ({ id: r.id, execution: r.execution, started: true }));
      const beat = await measured(() => heartbeat(session, { workerId: worker, namespace: 'default', held, leaseMs: 60_000 }));
      // A keyed row stays in acta.jobs at its success: the completion probes its key three times
      // (the retention check, the move that finds it must stay, the update), each reading an
      // entry per version of the row (3 here: enqueued, claimed, beaten): 9, on 10 rows as on
      // 20,010, where the old bound of 8 counted two probes.
      const acks = await measured(
        () => completeExecutions(session, worker, claim.answer.rows.map((r) => ({ id: r.id, execution: r.execution, outcome: 'succeeded' as const, result: null, error: null, retryDelayMs: 0 }))),
        12,
      );
      // A row with nothing to keep it leaves acta.jobs at its success (`moved`, migration 0023):
      // that move too reaches its row by key, on the plan made on the small table.
      await enqueueJobs(session, 'default', { definitions: ['plain'], payloads: ['1'], priorities: [null], runAts: [null], maxAttempts: [null], idempotencyKeys: [null] });
      const [plain] = (await claimJobs(session, { namespace: 'default', workerId: worker, definitions: ['plain'], limit: 1, leaseMs: 60_000 })).rows;
      const move = await measured(() =>
        completeExecutions(session, worker, [{ id: plain.id, execution: plain.execution, outcome: 'succeeded' as const, result: null, error: null, retryDelayMs: 0 }]),
      );
      const movedOut = (await session.query<{ n: number }>('select count(*)::int as n from acta.succeeded_jobs where id = $1', [plain.id])).rows[0].n;
      await session.query('commit');
      // A recovery pass that finds one expired lease.
      await claimJobs(session, { namespace: 'default', workerId: worker, definitions: ['small'], limit: 1, leaseMs: 1 });
      await new Promise((resolve) => setTimeout(resolve, 5));
      await session.query('begin');
      const recovery = await measured(() => recoverJobs(session, { namespace: 'default', deadAfterMs: 600_000 }));
      await session.query('commit');
      return {
        created: enqueued.answer.map((e) => e.created),
        recovered: recovery.answer.length,
        claimed: claim.answer.rows.length,
        step: step.answer.status,
        renewed: beat.answer.renewed.length,
        completed: acks.answer.filter((a) => a.status === 'succeeded').length,
        moved: move.answer.map((a) => a.status),
        movedOut,
        idle: idle.answer.rows.length,
        reads: { enqueue: enqueued.read, claim: claim.read, idle: idle.read, step: step.read, heartbeat: beat.read, completion: acks.read, move: move.read, recovery: recovery.read },
      };
    };
    // record_step plans per call for its first five calls, then settles on one plan: start there.
    await session.query('set plan_cache_mode = force_generic_plan');
    const byKey = { seqScans: 0, seqRead: 0, keyRead: 'a few' };
    const expected = {
      created: [false, true],
      recovered: 1,
      claimed: 1,
      step: 'recorded',
      renewed: 1,
      completed: 1,
      moved: ['succeeded'],
      movedOut: 1, // its row, in acta.succeeded_jobs
      idle: 0,
      reads: { enqueue: byKey, claim: byKey, idle: byKey, step: byKey, heartbeat: byKey, completion: byKey, move: byKey, recovery: byKey },
    };
    // The first round makes the session's plans, on 10 rows, and its index counters hold what
    // planning read too: estimating a merge join on j.id, the planner reads the first and last
    // live entries of jobs_pkey (selfuncs.c, get_actual_variable_range), once per plan and not
    // more as the table grows. PostgreSQL 18 does so for the heartbeat's statement (4 entries on
    // top of its 6; the same plan), 15 does not. So that round holds its answers and that no call
    // scans the table; the two after it run the plans made there, on 10 rows and on 20,010, and
    // each call reads a few index entries on every version.
    const planning = Object.fromEntries(Object.keys(expected.reads).map((call) => [call, { ...byKey, keyRead: expect.anything() }]));
    expect(await claimBeatComplete()).toEqual({ ...expected, reads: planning }); // planned here, on 10 rows
    expect(await claimBeatComplete()).toEqual(expected); // those plans, on 10 rows
    await client.enqueueMany(Array.from({ length: BACKLOG }, (_, i) => ({ definition: 'small', payload: { i }, idempotencyKey: `backlog-${i}` })));
    expect(await claimBeatComplete()).toEqual(expected); // the same plans, on 20,010 rows
  } finally {
    await session.end();
  }
}, 60_000);

test('a key with 20,000 parked rows costs a claim and a hand-on a few index entries, with or without statistics', async () => {
  // The parked rows are out of the claim's indexes (migration 0008): claiming other keys' rows
  // does not walk them, and a hand-on reads the first of them along jobs_parked_idx.
  await db.query('truncate acta.jobs');
  const worker = randomUUID();
  const keyed = defineJob({ name: 'keyed', handler: () => undefined, concurrency: { limit: 1 } });
  await registerWorker(db, { workerId: worker, namespace: 'default', hostname: 'test', pid: 1, definitions: ['keyed'], maxAttempts: [null], leaseMs: 60_000, policies: { keyed: declaredPolicy(keyed) } });
  const client = createClient({ force: true, db });
  await client.enqueueMany(Array.from({ length: BACKLOG }, (_, i) => ({ definition: 'keyed', payload: { i }, concurrencyKey: 'hot' })));
  const [holder] = (await claimJobs(db, { namespace: 'default', workerId: worker, definitions: ['keyed'], limit: 8, leaseMs: 60_000 })).rows;
  expect(Number((await db.query<{ n: string }>(`select count(*) as n from acta.jobs where blocked_by = 'concurrency'`)).rows[0].n)).toBe(BACKLOG - 1);
  // The parked rows' old entries in jobs_due_idx are dead: the next scan over them marks them so
  // (as after any update of that many rows), and later scans pass them at once.
  await claimJobs(db, { namespace: 'default', workerId: worker, definitions: ['keyed'], limit: 8, leaseMs: 60_000 });
  for (const analyze of [false, true]) {
    if (analyze) await db.query('analyze acta.jobs');
    await client.enqueueMany(Array.from({ length: 3 }, (_, i) => ({ definition: 'keyed', payload: { other: i }, concurrencyKey: `other-${analyze}-${i}` })));
    const seen = await db.transaction(async (tx) => {
      const reads = async () =>
        (
          await tx.query<{ parked: string; due: string; key_ready: string }>(
            `select pg_stat_get_xact_tuples_returned('acta.jobs_parked_idx'::regclass) as parked,
                    pg_stat_get_xact_tuples_returned('acta.jobs_due_idx'::regclass) as due,
                    pg_stat_get_xact_tuples_returned('acta.jobs_key_ready_idx'::regclass) as key_ready`,
          )
        ).rows[0];
      const before = await reads();
      const claimed = await claimJobs(tx, { namespace: 'default', workerId: worker, definitions: ['keyed'], limit: 8, leaseMs: 60_000 });
      const mid = await reads();
      const acks = await completeExecutions(tx, worker, analyze ? [] : [{ id: holder.id, execution: holder.execution, outcome: 'succeeded', result: null, error: null, retryDelayMs: 0 }]);
      const after = await reads();
      const d = (a: Record<string, string>, b: Record<string, string>) => Object.fromEntries(Object.keys(a).map((k) => [k, Number(b[k]) - Number(a[k])]));
      return { claimed: claimed.rows.map((r) => r.payload), acks: acks.map((a) => a.status), claim: d(before, mid), handOn: d(mid, after) };
    });
    // The second round also takes the row the first round's hand-on released.
    const others = [0, 1, 2].map((i) => ({ other: i }));
    expect({ analyze, claimed: seen.claimed, acks: seen.acks }).toEqual({ analyze, claimed: analyze ? [{ i: 1 }, ...others] : others, acks: analyze ? [] : ['succeeded'] });
    // Entries read, dead ones included: a handful, against the 20,000 parked.
    for (const [call, reads] of Object.entries({ claim: seen.claim, handOn: seen.handOn })) {
      expect({ analyze, call, reads: Object.values(reads).every((n) => n < 50) ? 'a few' : reads }).toEqual({ analyze, call, reads: 'a few' });
    }
  }
}, 60_000);

test("a fair definition's burst of 2,000 rows takes its turns in one pass: each key's turn looked up once, the rows updated through one scan of the primary key", async () => {
  // The claim tags every newly due row of a fair definition with its turn (sql/functions/claim_jobs.sql,
  // "Fair order"), holding those rows locked until it commits: a concurrent claim skips them.
  await db.query('truncate acta.jobs');
  const worker = randomUUID();
  const report = defineJob({ name: 'report', handler: () => undefined, fair: true, concurrency: { key: (p: { tenant: string }) => p.tenant } });
  await registerWorker(db, { workerId: worker, namespace: 'default', hostname: 'test', pid: 1, definitions: ['report'], maxAttempts: [null], leaseMs: 60_000, policies: { report: declaredPolicy(report) } });
  await createClient({ force: true, db, definitions: [report] }).enqueueMany(Array.from({ length: 2_000 }, (_, i) => ({ definition: report, payload: { tenant: 'A', i } })));
  const seen = await db.transaction(async (tx) => {
    const scans = async () =>
      (
        await tx.query<{ fair: string; fair_key: string; pkey: string }>(
          `select pg_stat_get_xact_numscans('acta.jobs_fair_idx'::regclass) as fair,
                  pg_stat_get_xact_numscans('acta.jobs_fair_key_idx'::regclass) as fair_key,
                  pg_stat_get_xact_numscans('acta.jobs_pkey'::regclass) as pkey`,
        )
      ).rows[0];
    const before = await scans();
    const claimed = await claimJobs(tx, { namespace: 'default', workerId: worker, definitions: ['report'], limit: 8, leaseMs: 60_000 });
    const after = await scans();
    const tagged = (await tx.query<{ n: number }>('select count(*)::int as n from acta.jobs where fair_tag is not null')).rows[0].n;
    const d = Object.fromEntries(Object.keys(before).map((k) => [k, Number(after[k as keyof typeof after]) - Number(before[k as keyof typeof before])]));
    return { claimed: claimed.rows.length, tagged, scans: d };
  });
  expect({ claimed: seen.claimed, tagged: seen.tagged }).toEqual({ claimed: 8, tagged: 2_000 });
  // Index scans in the whole claim: the turn lookups a few times, not once per row tagged (2,000
  // each, when they ran per row); the primary key about once per row (each element of
  // `id = any (array)` is a scan), not once per row per row (2 million, when the update probed it
  // per row, each probe going through the whole array).
  const { fair, fair_key: fairKey, pkey } = seen.scans;
  expect({ fair: fair < 20, fairKey: fairKey < 20, pkey: pkey < 3 * 2_000 ? 'linear' : pkey }).toEqual({ fair: true, fairKey: true, pkey: 'linear' });
}, 60_000);

test('every acta function that turns a plan type off turns JIT off too', async () => {
  // A plan type turned off is priced at 10^10, past jit_above_cost: a plan that keeps one (a join
  // the settings leave, or a statement of a function called from it, which runs under the caller's
  // settings) is compiled at every call, with inlining and optimization: hundreds of ms.
  const { rows } = await db.query<{ name: string; config: string[] }>(
    `select p.proname as name, p.proconfig as config from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname = 'acta' and exists (select 1 from unnest(p.proconfig) c where c like 'enable%=off')`,
  );
  expect(rows.length).toBeGreaterThan(10);
  expect(rows.filter((r) => !r.config.includes('jit=off')).map((r) => r.name).sort()).toEqual([]);
});

test("no statement of the claim, the completion (a schedule's fire, a workflow's), the heartbeat, a step, a spawn, a signal or recovery is compiled by JIT at the server's default thresholds", async () => {
  // Plans priced past jit_above_cost (as a join is under the functions' SET clauses, which price
  // the plan types they turn off at 10^10) would be compiled at every call: tens of ms each.
  const session = new Client({ connectionString: tdb.url });
  await session.connect();
  const plans: string[] = [];
  session.on('notice', (m) => plans.push(m.message ?? ''));
  try {
    const jit = (await session.query<{ jit: string }>(`select current_setting('jit') as jit`)).rows[0].jit;
    if (jit !== 'on') {
      console.log(`skipped: this server runs with jit = ${jit}, so no plan can be compiled`);
      return;
    }
    const loaded = await session.query(`load 'auto_explain'`).then(() => true, (err: Error) => err.message);
    if (loaded !== true) {
      console.log(`skipped: auto_explain cannot be loaded on this server (${loaded}), so plans cannot be read`);
      return;
    }
    await session.query(`set auto_explain.log_min_duration = 0; set auto_explain.log_nested_statements = on; set client_min_messages = log`);
    for (const name of ['jit_above_cost', 'jit_inline_above_cost', 'jit_optimize_above_cost']) await session.query(`reset ${name}`);
    const q = session as unknown as Queryable;
    const ns = `jit-${randomUUID().slice(0, 8)}`;
    const worker = randomUUID();
    const report = defineJob({ name: 'report', handler: () => null, schedule: { cron: '* * * * *' } });
    const passes = [{ name: 'recovery', intervalMs: 60_000 }];
    await registerWorker(q, { workerId: worker, namespace: ns, hostname: 'h', pid: 1, definitions: ['report'], maxAttempts: [null], leaseMs: 60_000, build: null, policies: { report: declaredPolicy(report) }, passes });
    expect(await sqlLedger(db).armSchedules!(ns)).toBe(1);
    // With statistics, as autovacuum gathers them in service: the heartbeat's pass update (a join
    // to the input under its SET clauses) was then priced past the threshold and compiled at every
    // beat, ~400 ms holding the leases it had just renewed, so the completions of those jobs waited.
    // (This namespace's pass alone, as in a deployment's one namespace: a 1-page table.)
    await db.query(`delete from acta.passes where namespace <> $1`, [ns]);
    await db.query(`vacuum analyze acta.passes`);
    await db.query(`update acta.passes set due_at = now() - interval '1 second' where namespace = $1`, [ns]);
    await enqueueJobs(q, ns, { definitions: ['report', 'report'], payloads: ['1', '2'], priorities: [null, null], runAts: [null, null], maxAttempts: [null, null], idempotencyKeys: [null, null] });
    await db.query(`update acta.jobs set run_at = now() - interval '1 second' where namespace = $1`, [ns]);
    const claimed = await claimJobs(q, { namespace: ns, workerId: worker, definitions: ['report'], limit: 10, leaseMs: 60_000 });
    expect(claimed.rows.some((r) => r.schedule)).toBe(true);
    const beat = await heartbeat(q, { workerId: worker, namespace: ns, held: claimed.rows.map((r) => ({ id: r.id, execution: r.execution, started: true })), leaseMs: 60_000, passes });
    expect(beat.duePasses).toEqual(['recovery']);
    await completeExecutions(q, worker, claimed.rows.map((r) => ({ id: r.id, execution: r.execution, outcome: 'succeeded', result: 'null', error: null, retryDelayMs: 0, ...(r.schedule ? { nextFireAt: new Date(r.schedule.at.getTime() + 60_000) } : {}) })));
    // A workflow's calls: a step, a spawn, a children wait, the child's end telling its parent, a
    // signal, and a recovery pass.
    const one = (d: string) => ({ definitions: [d], payloads: ['1'], priorities: [null], runAts: [null], maxAttempts: [null], idempotencyKeys: [null] });
    await enqueueJobs(q, ns, one('report'));
    const [parent] = (await claimJobs(q, { namespace: ns, workerId: worker, definitions: ['report'], limit: 1, leaseMs: 60_000 })).rows;
    await recordStep(q, { workerId: worker, jobId: parent.id, execution: parent.execution, name: 's1', resultJson: '1' });
    await spawnChildren(q, { workerId: worker, parentId: parent.id, execution: parent.execution, step: 'acta:spawn:0', rows: one('report'), failParent: [false] });
    await completeExecutions(q, worker, [{ id: parent.id, execution: parent.execution, outcome: 'children_wait', result: JSON.stringify({ step: 'acta:children:0', timeoutMs: null }), error: null, retryDelayMs: 0 }]);
    const [child] = (await claimJobs(q, { namespace: ns, workerId: worker, definitions: ['report'], limit: 1, leaseMs: 60_000 })).rows;
    await completeExecutions(q, worker, [{ id: child.id, execution: child.execution, outcome: 'succeeded', result: 'null', error: null, retryDelayMs: 0 }]);
    // The child's end woke its parent (Ready again, its wait answered).
    expect((await db.query<{ status: string }>('select status from acta.jobs where id = $1', [parent.id])).rows[0].status).toBe('ready');
    await sendSignal(q, { namespace: ns, jobId: parent.id, jobKey: null, name: 'go', payloadJson: '1', idempotencyKey: null });
    await recoverJobs(q, { namespace: ns, deadAfterMs: 600_000 });
    expect(plans.length).toBeGreaterThan(10);
    expect(plans.filter((p) => p.includes('JIT:')).map((p) => p.slice(0, 400))).toEqual([]);
  } finally {
    await session.end();
  }
}, 60_000);

test("a claim of 128 rows, their heartbeat and their completion touch each row a bounded number of times: no plan node handles more than 8 rows per row claimed", async () => {
  // rows x loops of a node, read from auto_explain's analyzed plans. A join planned for the generic
  // plan's 10 rows as a nested loop rescans one side per row of the other: 128 x 128 (the claim's
  // result put back in claim order did so, and cost a third of the claim). A bitmap index scan on
  // jobs_pkey, which the planner may pick once statistics are gathered, counts the index entries of
  // each row's dead versions too (the enqueue, the run_at update below, the claim, the heartbeat:
  // 640 for 128 rows once, on PostgreSQL 18), so the bound is 8 per row, far under a quadratic 128.
  const LIMIT = 128;
  const session = new Client({ connectionString: tdb.url });
  await session.connect();
  const plans: string[] = [];
  session.on('notice', (m) => plans.push(m.message ?? ''));
  try {
    const loaded = await session.query(`load 'auto_explain'`).then(() => true, (err: Error) => err.message);
    if (loaded !== true) {
      console.log(`skipped: auto_explain cannot be loaded on this server (${loaded}), so plans cannot be read`);
      return;
    }
    const q = session as unknown as Queryable;
    const ns = `loops-${randomUUID().slice(0, 8)}`;
    const worker = randomUUID();
    const plain = defineJob({ name: 'plain', handler: () => null });
    const fair = defineJob({ name: 'fair', handler: () => null, concurrency: { key: () => 'k' }, fair: true });
    await registerWorker(q, { workerId: worker, namespace: ns, hostname: 'h', pid: 1, definitions: ['plain', 'fair'], maxAttempts: [null, null], leaseMs: 60_000, build: null, policies: { plain: declaredPolicy(plain), fair: declaredPolicy(fair) } });
    // A fair definition's due rows are all tagged at once (their turns): 1.5 claims' worth of them.
    for (const [definition, n] of [['plain', 3 * LIMIT], ['fair', 1.5 * LIMIT]] as const) {
      await enqueueJobs(q, ns, { definitions: Array(n).fill(definition), payloads: Array.from({ length: n }, (_, i) => String(i)), priorities: Array(n).fill(null), runAts: Array(n).fill(null), maxAttempts: Array(n).fill(null), idempotencyKeys: Array(n).fill(null) });
    }
    await db.query(`update acta.jobs set run_at = now() - interval '1 second' where namespace = $1`, [ns]);
    await session.query(`set auto_explain.log_min_duration = 0; set auto_explain.log_nested_statements = on; set auto_explain.log_analyze = on; set auto_explain.log_timing = off; set client_min_messages = log`);
    for (const definitions of [['plain'], ['fair'], ['plain', 'fair']]) {
      const claimed = (await claimJobs(q, { namespace: ns, workerId: worker, definitions, limit: LIMIT, leaseMs: 60_000 })).rows;
      expect(claimed).toHaveLength(LIMIT);
      await heartbeat(q, { workerId: worker, namespace: ns, held: claimed.map((r) => ({ id: r.id, execution: r.execution, started: true })), leaseMs: 60_000 });
      await completeExecutions(q, worker, claimed.map((r) => ({ id: r.id, execution: r.execution, outcome: 'succeeded', result: 'null', error: null, retryDelayMs: 0 })));
    }
    await session.query(`set client_min_messages = notice`);
    // PostgreSQL 18 prints rows with two decimals (an average over the loops).
    const nodes = plans.flatMap((p) => [...p.matchAll(/^.*actual rows=([\d.]+) loops=(\d+).*$/gm)].map((m) => ({ handled: Number(m[1]) * Number(m[2]), node: m[0].trim() })));
    expect(nodes.length).toBeGreaterThan(20);
    expect(nodes.filter((n) => n.handled > 8 * LIMIT)).toEqual([]);
  } finally {
    await session.end();
  }
}, 60_000);
