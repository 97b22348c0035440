// Lock order of a job family on a real database (sql/functions/cancel_job.sql, "Locks"): a child's
// completion locks the child, then its parent (acta.complete_executions, acta.tell_parents), and a
// cancel of the parent locks its unfinished descendants before the parent, so the two never wait
// for each other in a cycle. The interleaving is forced with a held lock: the child's completion
// holds the child's row and waits for its concurrency key's gate while the cancel starts.
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { useTestDatabase } from '../helpers/db';
import { waitFor } from '../helpers/wait';

const { db, tdb } = useTestDatabase();
const worker = randomUUID();

async function connect(): Promise<Client> {
  const c = new Client({ connectionString: tdb.url });
  await c.connect();
  return c;
}

/** A parent parked on its one child, which is Executing with concurrency key `key`. */
async function family(ns: string, key: string): Promise<{ parent: string; child: string }> {
  const p = await db.query<{ id: string }>(
    `insert into acta.jobs (namespace, definition, payload, status, wait_step, children_open)
     values ($1, 'parent', '{}', 'waiting', 'acta:children:0', 1) returning id`, [ns]);
  const c = await db.query<{ id: string }>(
    `insert into acta.jobs (namespace, definition, payload, status, execution, lease_holder, lease_expires_at, claimed_at, started, parent_id, concurrency_key)
     values ($1, 'child', '{}', 'executing', 1, $2, now() + interval '1 minute', now(), true, $3, $4) returning id`, [ns, worker, p.rows[0].id, key]);
  return { parent: p.rows[0].id, child: c.rows[0].id };
}

/** Backends of this database waiting for a lock. */
const waiting = async () => (await db.query<{ n: number }>(
  `select count(*)::int as n from pg_locks l
   where not l.granted and l.pid in (select pid from pg_stat_activity where datname = current_database())`)).rows[0].n;

test("a child's completion and its parent's cancel at once: no deadlock; the child succeeds, the parent is cancelled", async () => {
  const ns = 'locks';
  const { parent, child } = await family(ns, 'k');
  const [holder, completing, cancelling] = await Promise.all([connect(), connect(), connect()]);
  try {
    await holder.query('begin');
    await holder.query('select pg_advisory_xact_lock(acta.gate_lock($1, $2, $3))', [ns, 'concurrency', 'k']);
    await completing.query('begin');
    const completion = completing.query<{ answer: string }>(
      `select acta.complete_executions($1, array[$2::bigint], array[1], array['succeeded'], array['{"ok":true}'::jsonb], array[null::jsonb], array[0]) as answer`,
      [worker, child]);
    await waitFor(async () => (await waiting()) >= 1, "the child's completion to wait for its key's gate");
    await cancelling.query('begin');
    const cancel = cancelling.query<{ answer: string }>('select acta.cancel_job($1, $2) as answer', [ns, parent]);
    await waitFor(async () => (await waiting()) >= 2, 'the cancel to wait for a row the completion holds');
    await holder.query('commit');
    const [completed, cancelled] = await Promise.allSettled([
      completion.then(async (r) => { await completing.query('commit'); return r.rows[0].answer; }),
      cancel.then(async (r) => { await cancelling.query('commit'); return r.rows[0].answer; }),
    ]);
    expect(completed).toEqual({ status: 'fulfilled', value: 's' });
    expect(cancelled).toEqual({ status: 'fulfilled', value: 'cancelled' });
    const { rows } = await db.query('select id::text, status, children_open from acta.jobs where id in ($1, $2) order by id', [parent, child]);
    expect(rows).toEqual([
      { id: parent, status: 'cancelled', children_open: 0 },
      { id: child, status: 'succeeded', children_open: null },
    ]);
  } finally {
    await Promise.all([holder, completing, cancelling].map((c) => c.end()));
  }
});
