// The migrator on real PostgreSQL: idempotent, recorded, safe under concurrent starts (advisory
// lock), and a worker refuses an unmigrated schema with a message saying what to run.
import { createHash, randomUUID } from 'node:crypto';
import { createClient, createPgDb, createWorker, defineJob, migrate, SchemaNewerError, SchemaNotMigratedError } from '../../src';
import { claimJobs } from '../../src/db/jobs';
import { assertMigrated, loadFunctionsLock, loadSqlFiles, REVISION_ROW } from '../../src/db/migrator';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';

/** The migration files from `first` on, in order: what migrate applies to a database migrated up to just before it. */
const migrationsFrom = (first: string) =>
  loadSqlFiles()
    .map((f) => f.name)
    .filter((n) => n.startsWith('migrations/') && n >= `migrations/${first}`)
    .sort();

const created: TestDatabase[] = [];
const fresh = async () => {
  const tdb = await createTestDatabase({ migrate: false });
  created.push(tdb);
  return tdb;
};
afterAll(() => Promise.all(created.map((t) => t.drop())));

const files = loadSqlFiles();
const { revision } = loadFunctionsLock();

test('migrate applies every file once and records it; a second run applies nothing', async () => {
  const db = (await fresh()).open();
  // Options given as a second argument are a slip: refused before anything is applied.
  await expect(migrate(db, {} as never)).rejects.toThrow(/^migrate takes the database only: migrate\(db\); got a second argument of type object$/);
  expect(await migrate(db)).toEqual(files.map((f) => f.name));
  expect(await migrate(db)).toEqual([]);
  // Both in code-point order: a locale's collation puts enqueue_jobs.sql and enqueue_jobs_wake_early.sql either way.
  const { rows } = await db.query<{ name: string; checksum: string }>('select name, checksum from acta.migrations order by name collate "C"');
  expect(rows).toEqual(
    [...files.map((f) => ({ name: f.name, checksum: f.checksum })), { name: REVISION_ROW, checksum: String(revision) }].sort((a, b) => (a.name < b.name ? -1 : 1)),
  );
  await expect(assertMigrated(db)).resolves.toBeUndefined();
});

test('5 concurrent migrate() calls on a fresh database all succeed; exactly one applies the files', async () => {
  const tdb = await fresh();
  const dbs = Array.from({ length: 5 }, () => tdb.open({ max: 1 }));
  const results = await Promise.all(dbs.map((db) => migrate(db)));
  expect(results.filter((r) => r.length > 0)).toEqual([files.map((f) => f.name)]);
  expect(results.filter((r) => r.length === 0)).toHaveLength(4);
  const { rows } = await dbs[0].query<{ n: string }>('select count(*) as n from acta.migrations');
  expect(Number(rows[0].n)).toBe(files.length + 1); // and the functions' revision
});

test('concurrent migrate() calls on a database whose default isolation is repeatable read: still one applies, the others see its commit', async () => {
  const tdb = await fresh();
  const admin = tdb.open({ max: 1 });
  const { rows: dbName } = await admin.query<{ name: string }>('select current_database() as name');
  await admin.query(`alter database "${dbName[0].name}" set default_transaction_isolation = 'repeatable read'`);
  await admin.close();
  const dbs = Array.from({ length: 4 }, () => tdb.open({ max: 1 }));
  const results = await Promise.all(dbs.map((db) => migrate(db)));
  expect(results.filter((r) => r.length > 0)).toEqual([files.map((f) => f.name)]);
  expect(results.filter((r) => r.length === 0)).toHaveLength(3);
});

test('a role that may use the acta schema but not create in the database: its migrate answers up to date on a current schema, and says what it needs when there is something to apply', async () => {
  // `acta migrate` with an application's role (no CREATE on the database, as PostgreSQL gives a
  // new role) on a migrated database failed with "permission denied for database <name>", from
  // the bootstrap's `create schema if not exists`, although there was nothing to do.
  const tdb = await fresh();
  const owner = tdb.open();
  await migrate(owner);
  const role = `acta_app_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  // With a password: a server that asks for one (the fresh-machine test's embedded server) gets it.
  await owner.query(`create role ${role} login password '${role}'`);
  const url = new URL(tdb.url);
  url.username = role;
  url.password = role;
  const app = createPgDb({ connectionString: url.toString(), max: 1 });
  try {
    await owner.query(`grant usage on schema acta to ${role}; grant select on acta.migrations to ${role}`);
    expect(await migrate(app)).toEqual([]);
    // Something to apply: the role may not, and the error says so and what to do.
    await owner.query(`delete from acta.migrations where name = 'functions/claim_jobs.sql'`);
    const refused = await migrate(app).then(() => undefined, (e: unknown) => e);
    expect(refused).toMatchObject({
      code: 'ACTA_MIGRATE_PRIVILEGE',
      message: expect.stringMatching(new RegExp(`^role ${role} may not change the acta schema \\(.+\\): run acta migrate as the role that owns it`)),
    });
    await expect(migrate(owner)).resolves.toEqual(['functions/claim_jobs.sql']);
  } finally {
    await app.close();
    await owner.query(`drop owned by ${role}; drop role ${role}`);
  }
});

test('a changed function file is re-applied; a changed migration is refused (forward-only)', async () => {
  const db = (await fresh()).open();
  await migrate(db);
  const changedFn = files.map((f) => (f.name === 'functions/stop_worker.sql' ? { ...f, text: `${f.text}\n-- edited`, checksum: 'edited' } : f));
  await expect(assertMigrated(db, changedFn)).rejects.toThrow(/stop_worker\.sql/);
  expect(await migrate(db, changedFn)).toEqual(['functions/stop_worker.sql']);
  await expect(assertMigrated(db, changedFn)).resolves.toBeUndefined();

  const changedMigration = files.map((f) => (f.name.startsWith('migrations/0001') ? { ...f, checksum: 'edited' } : f));
  await expect(migrate(db, changedMigration)).rejects.toMatchObject({ code: 'ACTA_MIGRATION_CHANGED', message: expect.stringMatching(/forward-only/) });
});

test('an older acta refuses a schema a newer one migrated: its migrate changes nothing, and a starting worker\'s check says why', async () => {
  // The case it guards: an older checkout's `acta migrate` put its own claim function back under
  // migration 0006's indexes, and the newer workers then refused to start until migrated again.
  const db = (await fresh()).open();
  await migrate(db);
  const older = files
    .filter((f) => f.name !== 'migrations/0006_claim_key.sql')
    .map((f) => (f.name === 'functions/claim_jobs.sql' ? { ...f, text: `${f.text}\n-- older`, checksum: 'older' } : f));
  const before = (await db.query<{ checksum: string }>(`select checksum from acta.migrations where name = 'functions/claim_jobs.sql'`)).rows;
  await expect(migrate(db, older)).rejects.toThrow(SchemaNewerError);
  await expect(migrate(db, older)).rejects.toMatchObject({ code: 'ACTA_SCHEMA_NEWER', message: expect.stringContaining('migrations/0006_claim_key.sql') });
  expect((await db.query(`select checksum from acta.migrations where name = 'functions/claim_jobs.sql'`)).rows).toEqual(before);
  await expect(assertMigrated(db, older)).rejects.toThrow(SchemaNewerError);
  await expect(assertMigrated(db)).resolves.toBeUndefined(); // the newer build still finds it as it left it
});

test('sql/functions.lock stands for the function files as they are (else run `npm run sql:lock`, which raises the revision)', () => {
  // The revision is what tells an older acta that a newer one changed the functions without a new
  // migration; it only goes up if every change of a function file comes with a new lock.
  const { checksums } = loadFunctionsLock();
  const functionFiles = files.filter((f) => f.name.startsWith('functions/'));
  const changedSinceTheLock = [
    ...functionFiles.filter((f) => checksums[f.name] !== f.checksum).map((f) => f.name),
    ...Object.keys(checksums).filter((name) => !functionFiles.some((f) => f.name === name)).map((name) => `${name} (deleted)`),
  ];
  expect({ changedSinceTheLock, fix: 'npm run sql:lock' }).toEqual({ changedSinceTheLock: [], fix: 'npm run sql:lock' });
});

test('an older acta refuses functions a newer one migrated without a new migration; a database from before revisions were recorded takes the revision', async () => {
  // The case it guards: a change of function files alone was not detected, so an older `acta migrate` put
  // its own functions back under the newer workers.
  const db = (await fresh()).open();
  const older = files.map((f) => (f.name === 'functions/claim_jobs.sql' ? { ...f, text: `${f.text}\n-- older`, checksum: 'older' } : f));
  // Migrated by a build from before revisions: no revision row; this build migrates and records it.
  await migrate(db);
  await db.query('delete from acta.migrations where name = $1', [REVISION_ROW]);
  await expect(assertMigrated(db)).resolves.toBeUndefined();
  expect(await migrate(db)).toEqual([]);
  const recordedRevision = async () => (await db.query<{ checksum: string }>('select checksum from acta.migrations where name = $1', [REVISION_ROW])).rows;
  expect(await recordedRevision()).toEqual([{ checksum: String(revision) }]);

  const before = (await db.query('select name, checksum, applied_at from acta.migrations order by name')).rows;
  await expect(migrate(db, older, revision - 1)).rejects.toMatchObject({
    code: 'ACTA_SCHEMA_NEWER',
    message: expect.stringContaining(`SQL functions of revision ${revision} (this acta's are revision ${revision - 1})`),
  });
  expect((await db.query('select name, checksum, applied_at from acta.migrations order by name')).rows).toEqual(before);
  await expect(assertMigrated(db, older, revision - 1)).rejects.toThrow(SchemaNewerError); // what a starting worker checks
  // The same build, or a newer one, goes on as before: the older build's function file is applied.
  expect(await migrate(db, older, revision)).toEqual(['functions/claim_jobs.sql']);
  expect(await migrate(db, files, revision + 1)).toEqual(['functions/claim_jobs.sql']);
  expect(await recordedRevision()).toEqual([{ checksum: String(revision + 1) }]);
  await expect(migrate(db, files, revision)).rejects.toThrow(SchemaNewerError);
  // A revision that is not a number is not known to be older: refused, not overwritten.
  await db.query('update acta.migrations set checksum = $2 where name = $1', [REVISION_ROW, 'edited by hand']);
  await expect(migrate(db, files, revision + 1)).rejects.toMatchObject({ message: expect.stringContaining("SQL functions of revision edited by hand") });
  expect(await recordedRevision()).toEqual([{ checksum: 'edited by hand' }]);
});

test('a database migrated when the function files had other names (revision 12) upgrades: each file is applied under its own name, and the older acta is refused', async () => {
  // The migrator keys a function file by its name, so a renamed file is one not applied yet. Until
  // revision 12 the files were named after their table (jobs_claim.sql) and two held several
  // functions; the same texts under those names stand for that build here.
  const previous: Record<string, string[]> = {
    'functions/definitions_refresh.sql': ['functions/refresh_definitions.sql'],
    'functions/executions_complete.sql': ['functions/complete_executions.sql'],
    'functions/jobs_claim.sql': ['functions/claim_jobs.sql'],
    'functions/jobs_enqueue.sql': ['functions/wal_message_allowed.sql', 'functions/enqueue_jobs.sql', 'functions/enqueue_jobs_wake_early.sql'],
    'functions/jobs_recover.sql': ['functions/recover_jobs.sql'],
    'functions/namespaces_recovery.sql': ['functions/take_recovery_pass.sql', 'functions/release_recovery_pass.sql'],
    'functions/steps_record.sql': ['functions/record_step.sql'],
    'functions/workers_heartbeat.sql': ['functions/heartbeat.sql'],
    'functions/workers_register.sql': ['functions/register_worker.sql'],
    'functions/workers_stop.sql': ['functions/stop_worker.sql'],
  };
  const text = new Map(files.map((f) => [f.name, f.text]));
  const previousFiles = [
    ...files.filter((f) => f.name.startsWith('migrations/')),
    ...Object.entries(previous).map(([name, parts]) => {
      const joined = parts.map((p) => text.get(p) ?? '').join('\n');
      return { name, text: joined, checksum: createHash('sha256').update(joined).digest('hex') };
    }),
  ];
  const functionFiles = files.filter((f) => f.name.startsWith('functions/')).map((f) => f.name);
  const db = (await fresh()).open();
  const catalog = async (q: typeof db) =>
    (await q.query<{ proname: string; args: string }>(
      `select p.proname, pg_get_function_identity_arguments(p.oid) as args from pg_proc p
        where p.pronamespace = 'acta'::regnamespace order by 1, 2`,
    )).rows;
  await migrate(db, previousFiles, 12);
  await expect(assertMigrated(db)).rejects.toThrow(SchemaNotMigratedError);
  expect(await migrate(db)).toEqual(functionFiles);
  expect(await migrate(db)).toEqual([]);
  await expect(assertMigrated(db)).resolves.toBeUndefined();
  // Every function once, as on a fresh database.
  const freshDb = (await fresh()).open();
  await migrate(freshDb);
  expect(await catalog(db)).toEqual(await catalog(freshDb));
  // The rows of the old names stay, read by nobody: this build checks the files it has, and the
  // build of revision 12 is refused by the revision recorded, changing nothing.
  const recorded = (await db.query<{ name: string }>('select name from acta.migrations order by name')).rows.map((r) => r.name);
  expect(recorded).toEqual(expect.arrayContaining([...Object.keys(previous), ...functionFiles]));
  await expect(migrate(db, previousFiles, 12)).rejects.toThrow(SchemaNewerError);
  await expect(assertMigrated(db, previousFiles, 12)).rejects.toThrow(SchemaNewerError);
  await expect(assertMigrated(db)).resolves.toBeUndefined();
});

test('a worker refuses to start on an unmigrated database, telling to run `npx acta migrate`', async () => {
  const tdb = await fresh();
  const db = createPgDb({ connectionString: tdb.url, max: 2 });
  try {
    const worker = createWorker({ db, definitions: [defineJob({ name: 'x', handler: () => undefined })], logger: silentLogger });
    const started = worker.start();
    await expect(started).rejects.toThrow(SchemaNotMigratedError);
    await expect(started).rejects.toThrow(/npx acta migrate/);
    await expect(started).rejects.toMatchObject({ code: 'ACTA_SCHEMA_NOT_MIGRATED' });
    // Nothing was written: no schema appeared.
    const { rows } = await db.query<{ present: boolean }>(`select to_regnamespace('acta') is not null as present`);
    expect(rows[0].present).toBe(false);
  } finally {
    await db.close();
  }
});

test('a schema of 0.1.0 (3821756) upgrades: function files drop the shapes they replaced, and the new ones answer', async () => {
  const db = (await fresh()).open();
  await migrate(db);
  // Put back the previous shapes, as a schema migrated by 0.1.0 had them (the bodies do not
  // matter here, only the signatures and result types), and mark those files as older.
  await db.query(`
    drop function acta.complete_executions(uuid, bigint[], integer[], text[], jsonb[], jsonb[], integer[], timestamptz[]);
    create function acta.complete_executions(p_worker uuid, p_ids bigint[], p_executions integer[], p_outcomes text[],
        p_results jsonb[], p_errors jsonb[], p_retry_delays_ms integer[])
      returns table (job_id bigint, execution integer, status text) language sql as 'select null::bigint, null::integer, null::text where false';
    drop function acta.enqueue_jobs(text, text[], jsonb, integer[], timestamptz[], integer[], text[], text[], text[], text[], boolean[]);
    create function acta.enqueue_jobs(p_namespace text, p_definitions text[], p_payloads jsonb[], p_priorities integer[],
        p_run_ats timestamptz[], p_max_attempts integer[], p_idempotency_keys text[])
      returns table (id bigint, created boolean) language sql as 'select null::bigint, null::boolean where false';
    update acta.migrations set checksum = '0.1.0' where name in ('functions/complete_executions.sql', 'functions/enqueue_jobs.sql');
  `);
  await expect(assertMigrated(db)).rejects.toThrow(SchemaNotMigratedError);
  expect((await migrate(db)).sort()).toEqual(['functions/complete_executions.sql', 'functions/enqueue_jobs.sql']);
  await expect(assertMigrated(db)).resolves.toBeUndefined();
  const { rows } = await db.query<{ proname: string; n: string }>(
    `select p.proname, count(*) as n from pg_proc p join pg_namespace s on s.oid = p.pronamespace
      where s.nspname = 'acta' and p.proname in ('complete_executions', 'enqueue_jobs') group by 1 order by 1`,
  );
  expect(rows.map((r) => [r.proname, Number(r.n)])).toEqual([
    ['complete_executions', 1],
    ['enqueue_jobs', 1],
  ]);
  const [job] = await createClient({ force: true, db }).enqueueMany([{ definition: 'upgraded', payload: { ok: true } }]);
  expect(job.created).toBe(true);
  const claim = await claimJobs(db, { namespace: 'default', workerId: randomUUID(), definitions: ['upgraded'], limit: 1, leaseMs: 60_000 });
  expect(claim.rows.map((r) => r.id)).toEqual([job.id]);
});

test('migration 0007 on a database of 0006: each namespace\'s recovery clock becomes its recovery pass row, and the old column and functions are gone', async () => {
  const db = (await fresh()).open();
  const files = loadSqlFiles();
  await migrate(db, files.filter((f) => f.name.startsWith('migrations/') && f.name < 'migrations/0007'));
  await db.query(`insert into acta.namespaces (name, recovery_due_at) values ('later', now() + interval '1 hour')`);
  expect((await migrate(db)).filter((n) => n.startsWith('migrations/'))).toEqual(migrationsFrom('0007'));
  const { rows } = await db.query<{ namespace: string; pass: string; in_future: boolean }>(
    `select namespace, pass, due_at > now() + interval '59 minutes' as in_future from acta.passes order by namespace`,
  );
  expect(rows).toEqual([
    { namespace: 'default', pass: 'recovery', in_future: false },
    { namespace: 'later', pass: 'recovery', in_future: true },
  ]);
  const { rows: left } = await db.query<{ n: string }>(
    `select (select count(*) from information_schema.columns where table_schema = 'acta' and table_name = 'namespaces' and column_name = 'recovery_due_at')
          + (select count(*) from pg_proc where proname in ('take_recovery_pass', 'release_recovery_pass')) as n`,
  );
  expect(Number(left[0].n)).toBe(0);
});

test("migration 0011 on a database of 0009: each meter's start times become its log, one row per instant counted in time order, and a claim decides from it", async () => {
  const db = (await fresh()).open();
  const files = loadSqlFiles();
  await migrate(db, files.filter((f) => f.name.startsWith('migrations/') && f.name < 'migrations/0011'));
  await db.query(`
    insert into acta.definitions (namespace, name, rate_limit, rate_per_ms) values ('default', 'call', 3, 3600000);
    insert into acta.gates (namespace, kind, key, stamps) values
      ('default', 'rate', 'a', array[now() - interval '2 minutes', now() - interval '2 minutes', now() - interval '1 minute']),
      ('default', 'rate', 'b', '{}'),
      ('default', 'lane', 'l', '{}');
    insert into acta.jobs (definition, payload, rate_key) values ('call', '1', 'a'), ('call', '2', 'a')`);
  expect((await migrate(db)).filter((n) => n.startsWith('migrations/'))).toEqual(migrationsFrom('0011'));
  const { rows } = await db.query<{ key: string; upto: string; minutes: number }>(
    `select key, upto, round(extract(epoch from now() - at) / 60)::int as minutes from acta.meter_starts order by key, upto`,
  );
  expect(rows).toEqual([
    { key: 'a', upto: '2', minutes: 2 },
    { key: 'a', upto: '3', minutes: 1 },
  ]);
  const { rows: gates } = await db.query(`select kind, key, starts, starts_pruned from acta.gates order by kind, key`);
  expect(gates).toEqual([
    { kind: 'lane', key: 'l', starts: '0', starts_pruned: '0' },
    { kind: 'rate', key: 'a', starts: '3', starts_pruned: '0' },
    { kind: 'rate', key: 'b', starts: '0', starts_pruned: '0' },
  ]);
  // Three starts in the hour: the meter has no token, and the next frees when the first two leave it.
  const claim = await claimJobs(db, { namespace: 'default', workerId: randomUUID(), definitions: ['call'], limit: 2, leaseMs: 60_000 });
  expect(claim.rows.map((r) => r.id)).toEqual([]);
  const { rows: parked } = await db.query<{ n: string; recheck_in_minutes: number }>(
    `select (select count(*) from acta.jobs where blocked_by = 'rate') as n,
            round(extract(epoch from recheck_at - now()) / 60)::int as recheck_in_minutes from acta.gates where kind = 'rate' and key = 'a'`,
  );
  expect(parked).toEqual([{ n: '2', recheck_in_minutes: 58 }]);
});

test('migration 0014 on a database of 0009: finished rows already there enter jobs_finished_idx and acta.prune_jobs deletes them; live rows stay', async () => {
  const db = (await fresh()).open();
  const files = loadSqlFiles();
  await migrate(db, files.filter((f) => f.name.startsWith('migrations/') && f.name < 'migrations/0010'));
  await db.query(`
    insert into acta.jobs (definition, payload, status, finished_at) values
      ('d', '1', 'succeeded', now() - interval '2 days'), ('d', '2', 'failed', now() - interval '8 days'), ('d', '3', 'ready', null)`);
  expect((await migrate(db)).filter((n) => n.startsWith('migrations/'))).toEqual(migrationsFrom('0010'));
  const { rows: idx } = await db.query<{ n: string }>(`select count(*) as n from pg_indexes where schemaname = 'acta' and indexname = 'jobs_finished_idx'`);
  expect(Number(idx[0].n)).toBe(1);
  const { rows } = await db.query<{ n: number }>(`select acta.prune_jobs('default', 86400000, 86400000, 604800000, 100) as n`);
  expect(rows[0].n).toBe(2);
  expect((await db.query<{ payload: number }>('select payload from acta.jobs')).rows).toEqual([{ payload: 3 }]);
});

test('migration 0012 on a database of 0009: a lane\'s rows keep their order (position = id), and a lane row enqueued after it takes its position at its commit, after them', async () => {
  const db = (await fresh()).open();
  const files = loadSqlFiles();
  await migrate(db, files.filter((f) => f.name.startsWith('migrations/') && f.name < 'migrations/0012'));
  await db.query(`insert into acta.jobs (definition, payload, lane) values ('d', '1', 'l'), ('d', '2', 'l'), ('d', '3', null)`);
  expect((await migrate(db)).filter((n) => n.startsWith('migrations/'))).toEqual(migrationsFrom('0012'));
  await db.query(`insert into acta.jobs (definition, payload, lane) values ('d', '4', 'l')`);
  const { rows } = await db.query<{ payload: number; positioned: boolean | null }>('select payload, lane_seq = id as positioned from acta.jobs order by lane_seq nulls last, id');
  expect(rows).toEqual([
    { payload: 1, positioned: true },
    { payload: 2, positioned: true },
    { payload: 4, positioned: false }, // drawn at its commit, after its id
    { payload: 3, positioned: null },
  ]);
});

test('migration 0004 on a database of 0003: unfinished rows holding the old default 25 take their definition\'s; a running old worker still reads a number', async () => {
  const db = (await fresh()).open();
  const files = loadSqlFiles();
  // The schema up to 0003 (migrations only: the rows below are written by hand, as 0.1.0 wrote them).
  await migrate(db, files.filter((f) => f.name.startsWith('migrations/') && f.name < 'migrations/0004'));
  await db.query(`
    insert into acta.jobs (definition, payload, status, max_attempts) values
      ('d', '1', 'ready', 25), ('d', '2', 'ready', 5), ('d', '3', 'succeeded', 25), ('d', '4', 'executing', 25)`);
  expect((await migrate(db)).filter((n) => n.startsWith('migrations/'))).toEqual(migrationsFrom('0004'));
  const { rows } = await db.query<{ payload: number; max_attempts: number | null }>('select payload, max_attempts from acta.jobs order by id');
  expect(rows).toEqual([
    { payload: 1, max_attempts: null },
    { payload: 2, max_attempts: 5 },
    { payload: 3, max_attempts: 25 },
    { payload: 4, max_attempts: null },
  ]);
  // A worker from before 0004 reads max_attempts and applies min(it, its definition's): the
  // claim answers 25 there for a row without its own (null would fail the job at its first
  // error); this version reads own_max_attempts.
  const { rows: claimed } = await db.query<{ job_id: string; max_attempts: number; own_max_attempts: number | null }>(
    `select job_id, max_attempts, own_max_attempts from acta.claim_jobs('default', $1, array['d'], 2, 60000) order by job_id`,
    [randomUUID()],
  );
  expect(claimed.map((r) => [r.max_attempts, r.own_max_attempts])).toEqual([
    [25, null],
    [5, 5],
  ]);
});


test("migration 0024 on a database of 0023: schedules keep their versions, a pass's read of one still arms it, and every version drawn after is new, a schedule removed and added again included", async () => {
  const db = (await fresh()).open();
  await migrate(db, loadSqlFiles().filter((f) => f.name.startsWith('migrations/') && f.name < 'migrations/0024'));
  await db.query(`
    insert into acta.schedules (namespace, name, definition, cron, source, version) values
      ('default', 'a', 'd', '0 * * * *', 'runtime', 1), ('default', 'b', 'd', '0 * * * *', 'runtime', 7)`);
  expect((await migrate(db)).filter((n) => n.startsWith('migrations/'))).toEqual(migrationsFrom('0024'));
  const versions = async () => Object.fromEntries((await db.query<{ name: string; version: number }>('select name, version from acta.schedules')).rows.map((r) => [r.name, r.version]));
  expect(await versions()).toEqual({ a: 1, b: 7 });
  // Read before the migration, armed after it.
  const armed = await db.query<{ n: number }>(`select acta.arm_schedules('default', array['a'], array[1], array[date_trunc('hour', now()) + interval '1 hour']) as n`);
  expect(armed.rows[0].n).toBe(1);
  const put = (name: string, cron: string) =>
    db.query(`select acta.put_schedule('default', $1, 'd', $2, 'UTC', 'null', 'latest', null, 0, null, null, null)`, [name, cron]);
  await put('b', '30 * * * *');
  await db.query(`select acta.remove_schedule('default', 'a')`);
  await put('a', '0 * * * *');
  await put('c', '0 * * * *');
  const after = await versions();
  expect(new Set([1, 7, after.a, after.b, after.c]).size).toBe(5);
  expect(Math.min(after.a, after.b, after.c)).toBeGreaterThan(7);
});
