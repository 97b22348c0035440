/**
 * Periodic passes as data (migration 0007, sql/functions/take_passes.sql): each (namespace, pass)
 * is one row whose due time the beat that takes it moves one interval on in the same statement, so
 * among workers beating at once exactly one takes each due pass; a pass a namespace has no row for
 * is created due; a shorter interval pulls the next due time in. The recovery pass's own rules
 * (the registration as the first beat, a stop during start): test/faults/recovery.test.ts.
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import type { Queryable } from '../../src';
import { claimJobs, enqueueJobs } from '../../src/db/jobs';
import { heartbeat, registerWorker } from '../../src/db/workers';
import { useTestDatabase } from '../helpers/db';

const { db, tdb } = useTestDatabase();
const beat = (passes: { name: string; intervalMs: number }[], namespace = 'default') =>
  heartbeat(db, { workerId: randomUUID(), namespace, held: [], leaseMs: 60_000, passes });
const dueInMs = async (pass: string) =>
  Number((await db.query<{ ms: number }>(`select extract(epoch from due_at - now()) * 1000 as ms from acta.passes where namespace = 'default' and pass = $1`, [pass])).rows[0].ms);

test('a new pass is created due and taken once; concurrent beats take each due pass exactly once', async () => {
  const passes = [
    { name: 'recovery', intervalMs: 60_000 },
    { name: 'retention', intervalMs: 3_600_000 },
  ];
  await db.query(`update acta.passes set due_at = now() - interval '1 second' where namespace = 'default'`);
  const beats = await Promise.all(Array.from({ length: 6 }, () => beat(passes)));
  expect(beats.flatMap((b) => b.duePasses).sort()).toEqual(['recovery', 'retention']);
  expect((await beat(passes)).duePasses).toEqual([]);
  // Each moved one of its own intervals on.
  expect(await dueInMs('recovery')).toBeGreaterThan(59_000);
  expect(await dueInMs('retention')).toBeGreaterThan(3_599_000);
  // A pass no beat names is left alone.
  expect((await beat([{ name: 'recovery', intervalMs: 60_000 }])).duePasses).toEqual([]);
});

test('a shorter interval pulls the next due time in, without taking the pass before it is due', async () => {
  await beat([{ name: 'compaction', intervalMs: 600_000 }]); // created and taken: due in 10 min
  expect(await dueInMs('compaction')).toBeGreaterThan(599_000);
  expect((await beat([{ name: 'compaction', intervalMs: 5_000 }])).duePasses).toEqual([]);
  expect(await dueInMs('compaction')).toBeLessThanOrEqual(5_000);
  expect((await beat([{ name: 'compaction', intervalMs: 600_000 }])).duePasses).toEqual([]); // a longer one never pushes it out
  expect(await dueInMs('compaction')).toBeLessThanOrEqual(5_000);
});

test("a beat holds the leases it renews only for the renewal: its passes and waits come first, so a completion never waits on a beat's other work", async () => {
  // The renewal locks every held row until the beat commits; work after it (a pass taken, waits
  // released, each planned at a connection's first beat) would keep the worker's own completions
  // of those rows waiting (sql/functions/heartbeat.sql).
  const ns = `order-${randomUUID().slice(0, 8)}`;
  const worker = randomUUID();
  const passes = [{ name: 'recovery', intervalMs: 60_000 }];
  await registerWorker(db, { workerId: worker, namespace: ns, hostname: 'h', pid: 1, definitions: ['d'], leaseMs: 60_000, passes });
  await enqueueJobs(db, ns, { definitions: ['d'], payloads: ['1'], priorities: [null], runAts: [null], maxAttempts: [null], idempotencyKeys: [null] });
  const [row] = (await claimJobs(db, { namespace: ns, workerId: worker, definitions: ['d'], limit: 1, leaseMs: 60_000 })).rows;
  const blocker = new Client({ connectionString: tdb.url });
  const beater = new Client({ connectionString: tdb.url });
  const probe = new Client({ connectionString: tdb.url });
  await Promise.all([blocker.connect(), beater.connect(), probe.connect()]);
  try {
    // The pass due, and its row locked elsewhere: the beat stops at its passes.
    await db.query(`update acta.passes set due_at = now() - interval '1 second' where namespace = $1`, [ns]);
    await blocker.query('begin');
    await blocker.query(`select 1 from acta.passes where namespace = $1 for update`, [ns]);
    const beaterPid = (await beater.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0].pid;
    const beat = heartbeat(beater as unknown as Queryable, { workerId: worker, namespace: ns, held: [{ id: row.id, execution: row.execution, started: true }], leaseMs: 60_000, passes });
    let polls = 0;
    while ((await probe.query(`select wait_event_type = 'Lock' as w from pg_stat_activity where pid = $1`, [beaterPid])).rows[0]?.w !== true) {
      if (++polls > 2_000) throw new Error('the beat never waited for the locked pass row');
    }
    // Meanwhile the held row is free: a completion could take it now.
    await probe.query('begin');
    const taken = await probe.query(`select id from acta.jobs where id = $1 for update nowait`, [row.id]).then((r) => r.rowCount, (err: Error) => err.message);
    await probe.query('rollback');
    await blocker.query('rollback');
    const result = await beat;
    expect({ taken, renewed: result.renewed.map((p) => String(p.id)) }).toEqual({ taken: 1, renewed: [String(row.id)] });
  } finally {
    await Promise.all([blocker.end(), beater.end(), probe.end()]);
  }
});
