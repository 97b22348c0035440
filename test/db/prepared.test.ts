// Db.prepared on a real server (src/db/pgDb.ts): the worker's claim and completion calls, and the
// client's enqueue on a Db, run as named statements, parsed once per connection, and a connection whose statement became unusable
// (a rolling upgrade changed a function's result type; a pooler lost the statement) costs one
// repeated call, never a failed one.
import { randomUUID } from 'node:crypto';
import { completeExecutions } from '../../src/db/executions';
import { claimJobs } from '../../src/db/jobs';
import { wireName } from '../../src/db/pgDb';
import { createClient } from '../../src';
import { useTestDatabase } from '../helpers/db';

const { tdb } = useTestDatabase();

/** Named statements on the (only) connection of a 1-connection Db. */
async function preparedNames(db: { query: (t: string) => Promise<{ rows: unknown[] }> }): Promise<string[]> {
  const { rows } = await db.query('select name from pg_prepared_statements order by name');
  return (rows as { name: string }[]).map((r) => r.name);
}

test('the enqueue, the claim and the completion batch run as named statements on a server', async () => {
  const db = tdb.open({ max: 1 });
  const [job] = await createClient({ force: true, db }).enqueueMany([{ definition: 'prepared', payload: {} }]);
  const worker = randomUUID();
  const claim = await claimJobs(db, { namespace: 'default', workerId: worker, definitions: ['prepared'], limit: 1, leaseMs: 60_000 });
  expect(claim.rows.map((r) => r.id)).toEqual([job.id]);
  const acks = await completeExecutions(db, worker, [
    { id: job.id!, execution: claim.rows[0].execution, outcome: 'succeeded', result: 'null', error: null, retryDelayMs: 0 },
  ]);
  expect(acks.map((a) => a.status)).toEqual(['succeeded']);
  // Each under its name and a digest of its text (pgDb.ts, wireName).
  expect(await preparedNames(db)).toEqual([
    expect.stringMatching(/^acta_claim_jobs_[0-9a-f]{8}$/),
    expect.stringMatching(/^acta_complete_executions_[0-9a-f]{8}$/),
    expect.stringMatching(/^acta_enqueue_jobs_wake_early_[0-9a-f]{8}$/),
  ]);
});

test('a function replaced with another result type after its statement was prepared: the call is repeated on a new connection and answers', async () => {
  const db = tdb.open({ max: 1 });
  await db.query(`create schema if not exists t; create or replace function t.shape() returns table (a int) language sql as 'select 1'`);
  expect((await db.prepared!<{ a: number }>('t_shape', 'select * from t.shape()', [])).rows).toEqual([{ a: 1 }]);
  await db.query(`drop function t.shape(); create function t.shape() returns table (a int, b int) language sql as 'select 1, 2'`);
  // Without the repeat: "cached plan must not change result type" on every later call on this connection.
  expect((await db.prepared!<{ a: number; b: number }>('t_shape', 'select * from t.shape()', [])).rows).toEqual([{ a: 1, b: 2 }]);
  expect((await db.prepared!<{ a: number; b: number }>('t_shape', 'select * from t.shape()', [])).rows).toEqual([{ a: 1, b: 2 }]);
  expect(await preparedNames(db)).toEqual([expect.stringMatching(/^t_shape_/)]); // prepared anew on the new connection
});

test('a statement the server no longer has (a pooler in transaction mode): the call is repeated unnamed, and the Db stops naming', async () => {
  const db = tdb.open({ max: 1 });
  expect((await db.prepared!<{ x: number }>('t_one', 'select $1::int as x', [1])).rows).toEqual([{ x: 1 }]);
  await db.query('deallocate all'); // what a pooler's other server connection looks like: no such statement
  expect((await db.prepared!<{ x: number }>('t_one', 'select $1::int as x', [2])).rows).toEqual([{ x: 2 }]);
  expect((await db.prepared!<{ x: number }>('t_one', 'select $1::int as x', [3])).rows).toEqual([{ x: 3 }]);
  expect(await preparedNames(db)).toEqual([]);
});

test('a statement of that name another client prepared on the connection (a pooler in transaction mode): the call is repeated unnamed, and the Db stops naming', async () => {
  const db = tdb.open({ max: 1 });
  await db.query(`prepare ${wireName('t_two', 'select $1::int as x')} as select 2`); // what a pooler's shared server connection looks like
  expect((await db.prepared!<{ x: number }>('t_two', 'select $1::int as x', [1])).rows).toEqual([{ x: 1 }]);
  expect((await db.prepared!<{ x: number }>('t_two', 'select $1::int as x', [2])).rows).toEqual([{ x: 2 }]);
  expect(await preparedNames(db)).toEqual([]);
});

test('a statement of that name another client prepared with another text (another acta version behind a pooler in transaction mode): the call runs its own text', async () => {
  const db = tdb.open({ max: 1 });
  expect((await db.prepared!<{ x: number }>('t_three', 'select $1::int as x', [1])).rows).toEqual([{ x: 1 }]);
  // The server connection the next call lands on holds the name with another text. This Db's
  // connection sends Bind alone now: without the digest in the name it ran "select 2".
  await db.query('deallocate all; prepare t_three (int) as select 2 as x');
  expect((await db.prepared!<{ x: number }>('t_three', 'select $1::int as x', [3])).rows).toEqual([{ x: 3 }]);
});
