// A lane runs its jobs in commit order (docs/policies.md, "Lanes"; migration 0012), on a real
// server with three connections: A enqueued first in a transaction that commits last, B and C
// committed meanwhile. The lane's order is B, C, A; under id order a worker ran B, then A (the
// lowest id once it committed), then C: neither order.
import { randomUUID } from 'node:crypto';
import { Client as PgClient } from 'pg';
import { createClient, createWorker, defineJob } from '../../src';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db, tdb } = useTestDatabase();

test('a lane runs in commit order: A begun first and committed last runs after B and C, even when it commits while B runs', async () => {
  const namespace = `lane-${randomUUID()}`;
  const ran: string[] = [];
  let releaseB!: () => void;
  const bHeld = new Promise<void>((resolve) => (releaseB = resolve));
  const step = defineJob({
    name: 'step',
    lane: () => 'order',
    handler: async (p: { name: string }) => {
      ran.push(p.name);
      if (p.name === 'B') await bHeld;
    },
  });
  const worker = createWorker({ db, definitions: [step], namespace, logger: silentLogger, heartbeatIntervalMs: 1_000, safetyPollMs: 50 });
  await worker.start();
  const a = new PgClient({ connectionString: tdb.url });
  const c = new PgClient({ connectionString: tdb.url });
  await Promise.all([a.connect(), c.connect()]);
  try {
    const client = createClient({ force: true, db, namespace, definitions: [step] });
    await a.query('begin');
    const idA = (await client.enqueue(step, { name: 'A' }, { tx: a })).id;
    const idB = (await client.enqueue(step, { name: 'B' })).id; // this client's pool: a second connection
    const idC = (await client.enqueue(step, { name: 'C' }, { tx: c })).id; // autocommit on a third
    expect(BigInt(idA) < BigInt(idB) && BigInt(idB) < BigInt(idC)).toBe(true);
    await waitFor(() => ran.includes('B') || undefined, 'B to start', 10_000);
    await a.query('commit'); // while B runs
    releaseB();
    await waitFor(() => ran.length === 3 || undefined, 'all three to run', 10_000);
    expect(ran).toEqual(['B', 'C', 'A']);
    const { rows } = await db.query<{ id: string; lane_seq: string }>('select id, lane_seq from acta.all_jobs where namespace = $1 order by lane_seq', [namespace]);
    expect(rows.map((r) => r.id)).toEqual([idB, idC, idA]);
  } finally {
    await worker.stop();
    await Promise.all([a.end(), c.end()]);
  }
});

test('enqueues into one lane in transactions that commit in the other order than they began take positions in commit order; a rolled-back one takes none', async () => {
  const namespace = `lane-${randomUUID()}`;
  const client = createClient({ force: true, db, namespace });
  const conns = [0, 1, 2].map(() => new PgClient({ connectionString: tdb.url }));
  await Promise.all(conns.map((k) => k.connect()));
  try {
    const ids: string[] = [];
    for (const [i, k] of conns.entries()) {
      await k.query('begin');
      ids.push((await client.enqueue('x', { i }, { tx: k, lane: 'l' })).id);
    }
    await conns[2].query('commit');
    await conns[1].query('rollback');
    await conns[0].query('commit');
    const { rows } = await db.query<{ id: string }>('select id from acta.jobs where namespace = $1 order by lane_seq', [namespace]);
    expect(rows.map((r) => r.id)).toEqual([ids[2], ids[0]]);
  } finally {
    await Promise.all(conns.map((k) => k.end()));
  }
});
