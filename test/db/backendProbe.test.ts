// A statement a deadline gave up on, asked about on a new connection (src/db/backendProbe.ts): a
// backend running it is cancelled and seen to stop; one the asking role may not cancel is reported
// still running (its statement may still finish there); an idle one is left alone.
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { cancelIfStillRunning } from '../../src/db/backendProbe';
import { createTestDatabase, type TestDatabase } from '../helpers/db';

let tdb: TestDatabase;
beforeAll(async () => {
  tdb = await createTestDatabase({ migrate: false });
});
afterAll(async () => {
  await tdb.drop();
});

/** Until backend `pid` runs a statement (pg_stat_activity, asked on a connection of its own). */
async function untilActive(pid: number): Promise<void> {
  const watcher = new Client({ connectionString: tdb.url });
  await watcher.connect();
  try {
    for (;;) {
      const { rows } = await watcher.query("select 1 from pg_stat_activity where pid = $1 and state = 'active'", [pid]);
      if (rows.length > 0) return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    await watcher.end();
  }
}

/** A connection of its own on the test database, and its backend's pid. */
async function session(url = tdb.url): Promise<{ client: Client; pid: number }> {
  const client = new Client({ connectionString: url });
  await client.connect();
  const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
  return { client, pid: rows[0].pid };
}

test('a backend running a statement is cancelled there, and rolls it back; an idle one is idle; one the role may not cancel is still running', async () => {
  const { client, pid } = await session();
  try {
    expect(await cancelIfStillRunning(tdb.url, pid, 3_000)).toBe('idle');
    await client.query('create table probe_scratch (x int)');
    const sleeping = client.query('insert into probe_scratch values (1); select pg_sleep(30)').then(
      () => 'finished',
      (err: { code?: string }) => err.code,
    );
    await untilActive(pid);
    expect(await cancelIfStillRunning(tdb.url, pid, 3_000)).toBe('cancelled');
    expect(await sleeping).toBe('57014'); // query_canceled
    expect((await client.query('select count(*)::int as n from probe_scratch')).rows).toEqual([{ n: 0 }]);

    // A role that sees every backend's state (pg_read_all_stats) but may not cancel a superuser's.
    const role = `acta_probe_${randomUUID().slice(0, 8)}`;
    await client.query(`create role ${role} login password 'probe' in role pg_read_all_stats`);
    try {
      const url = new URL(tdb.url);
      url.username = role;
      url.password = 'probe';
      const held = client.query('select pg_sleep(2)');
      await untilActive(pid);
      expect(await cancelIfStillRunning(url.toString(), pid, 1_000)).toBe('running');
      await held;
    } finally {
      await client.query(`drop role ${role}`);
    }
  } finally {
    await client.end();
  }
});
