/**
 * Periodic passes as data (migration 0007, sql/functions/take_passes.sql): each (namespace, pass)
 * is one row whose due time the beat that takes it moves one interval on in the same statement, so
 * among workers beating at once exactly one takes each due pass; a pass a namespace has no row for
 * is created due; a shorter interval pulls the next due time in. The recovery pass's own rules
 * (the registration as the first beat, a stop during start): test/faults/recovery.test.ts.
 */
import { randomUUID } from 'node:crypto';
import { heartbeat } from '../../src/db/workers';
import { useTestDatabase } from '../helpers/db';

const { db } = useTestDatabase();
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
