// Enqueue on real PostgreSQL: idempotency keys, enqueueMany as ONE statement with results in
// input order, and enqueue inside the caller's own transaction (the job and its NOTIFY exist only
// at commit).
import { DatabaseError } from 'pg';
import { type ActaError, ConfigError, createClient, createWorker, defineJob, InvalidJsonError, migrate, SchemaNotMigratedError, type Db, type Queryable } from '../../src';
import { createTestDatabase, useTestDatabase, withPgClient } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';
import { aroundStatements } from '../helpers/around';

const { db, tdb } = useTestDatabase();
beforeEach(() => db.query('truncate acta.jobs, acta.succeeded_jobs, acta.executions'));

/** A Db whose every query is counted (statements sent by the client). */
function counting(inner: Db): { db: Db; statements: string[] } {
  const statements: string[] = [];
  return {
    statements,
    db: aroundStatements(inner, (text, _params, run) => (statements.push(text), run())),
  };
}

const jobCount = async (where = 'true', params: unknown[] = []) =>
  Number((await db.query<{ n: string }>(`select count(*) as n from acta.all_jobs where ${where}`, params)).rows[0].n);

test('the same idempotency key twice gives the same id, created false, and one row', async () => {
  const client = createClient({ force: true, db });
  const first = await client.enqueue('send-mail', { to: 'a@example.com' }, { idempotencyKey: 'mail-1' });
  const second = await client.enqueue('send-mail', { to: 'someone else' }, { idempotencyKey: 'mail-1' });
  expect(first).toEqual({ id: expect.stringMatching(/^\d+$/), created: true });
  expect(second).toEqual({ id: first.id, created: false });
  expect(await jobCount()).toBe(1);
  const { rows } = await db.query('select payload from acta.jobs where id = $1', [first.id]);
  expect(rows[0].payload).toEqual({ to: 'a@example.com' }); // the first one stands
  // Keys are per namespace.
  const other = await createClient({ force: true, db, namespace: 'other' }).enqueue('send-mail', {}, { idempotencyKey: 'mail-1' });
  expect(other.created).toBe(true);
  expect(other.id).not.toBe(first.id);
});

test('enqueue and enqueueMany take the definition itself: its name is stored, its handler types the payload', async () => {
  const sendMail = defineJob({ name: 'send-mail', handler: (payload: { to: string }) => payload.to });
  const client = createClient({ force: true, db });
  const one = await client.enqueue(sendMail, { to: 'a@example.com' }, { priority: 2 });
  const [many] = await client.enqueueMany([{ definition: sendMail, payload: { to: 'b@example.com' } }]);
  // Checked by `npm run typecheck` (tsc over test/): a payload of another shape does not compile.
  // Reported at the payload (the directive applies to the next line only), given the definition
  // or a name with the payload's type stated.
  const wrong = () =>
    client.enqueue(
      sendMail,
      // @ts-expect-error: `to` is a string in the handler's payload type
      { to: 1 },
    );
  const wrongByName = () =>
    client.enqueue<{ to: string }>(
      'send-mail',
      // @ts-expect-error: `to` is a string in the stated payload type
      { to: 1 },
    );
  const anyByName = () => client.enqueue('send-mail', { to: 1 }); // no type stated: any payload
  // enqueueMany checks each element against its own definition, in a literal and in a mapped array.
  const resize = defineJob({ name: 'resize', handler: (payload: { width: number }) => payload.width });
  const wrongMany = () =>
    client.enqueueMany([
      { definition: resize, payload: { width: 640 } },
      { definition: 'by-name', payload: 42 },
      {
        definition: sendMail,
        // @ts-expect-error: `to` is a string in sendMail's payload type, whatever its neighbours take
        payload: { to: 1 },
      },
    ]);
  const wrongMapped = () =>
    client.enqueueMany(
      // @ts-expect-error: each element's payload lacks resize's `width`
      [1, 2].map((n) => ({ definition: resize, payload: { height: n } })),
    );
  const rightMapped = () => client.enqueueMany([1, 2].map((n) => ({ definition: resize, payload: { width: n }, priority: n })));
  void [wrong, wrongByName, anyByName, wrongMany, wrongMapped, rightMapped];
  const { rows } = await db.query('select id::text, definition, payload, priority from acta.jobs order by id');
  expect(rows).toEqual([
    { id: one.id, definition: 'send-mail', payload: { to: 'a@example.com' }, priority: 2 },
    { id: many.id, definition: 'send-mail', payload: { to: 'b@example.com' }, priority: 0 },
  ]);
  // A client that knows its definitions checks the object's name like a string's.
  const known = createClient({ force: true, db, definitions: [sendMail] });
  await expect(known.enqueue(defineJob({ name: 'unknown', handler: () => undefined }), {})).rejects.toThrow(/unknown/);
  // Anything else is refused before anything is written: an object without a usable name, and a
  // function or class (plain JavaScript; it would have been enqueued under its own name).
  await expect(client.enqueue({ handler: () => undefined } as never, {})).rejects.toThrow(ConfigError);
  await expect(client.enqueue(async function sendMailFn() {} as never, {})).rejects.toThrow(/got a function \(sendMailFn\)/);
  await expect(client.enqueue(class Mailer {} as never, {})).rejects.toThrow(ConfigError);
  await expect(client.enqueueMany([{ definition: null, payload: {} } as never])).rejects.toThrow(/got null/);
  await expect(client.enqueue({ name: 'send-mail' } as never, {})).rejects.toThrow(/a name and a handler/);
  expect(await jobCount()).toBe(2);
  // And a worker runs it under that name.
  const ran: string[] = [];
  const worker = createWorker({ db, definitions: [defineJob({ name: 'send-mail', handler: (p: { to: string }) => void ran.push(p.to) })], logger: silentLogger });
  await worker.start();
  try {
    await waitFor(async () => ran.length === 2, 'both jobs to run');
  } finally {
    await worker.stop();
  }
  expect(ran.sort()).toEqual(['a@example.com', 'b@example.com']);
});

test('concurrent batches sharing keys in opposite orders never deadlock: one id and one created per key', async () => {
  const [dbA, dbB] = [tdb.open(), tdb.open()]; // two connections, so the batches really run at once
  const [a, b] = [createClient({ force: true, db: dbA }), createClient({ force: true, db: dbB })];
  for (let round = 0; round < 15; round++) {
    const items = Array.from({ length: 20 }, (_, i) => ({ definition: 'job', payload: { i }, idempotencyKey: `r${round}-k${i}` }));
    // Inserted in input order, 14 of 50 such rounds ended in 40P01 deadlock detected.
    const [ra, rb] = await Promise.all([a.enqueueMany(items), b.enqueueMany([...items].reverse())]);
    rb.reverse();
    expect(ra.map((r) => r.id)).toEqual(rb.map((r) => r.id));
    expect(ra.map((r, i) => Number(r.created) + Number(rb[i].created))).toEqual(items.map(() => 1));
  }
  await Promise.all([dbA.close(), dbB.close()]);
});

test('enqueueMany is ONE statement, returns results in input order, and resolves duplicate keys inside the batch', async () => {
  const client = createClient({ force: true, db });
  const existing = await client.enqueue('job', { i: 'before' }, { idempotencyKey: 'k-existing' });
  const { db: counted, statements } = counting(db);
  const keys = ['k1', null, 'k2', 'k1', 'k-existing', null, 'k2', 'k3'];
  const items = keys.map((key, i) => ({ definition: 'job', payload: { i }, idempotencyKey: key ?? undefined, priority: i }));
  const results = await createClient({ force: true, db: counted }).enqueueMany(items);
  expect(statements).toHaveLength(1);

  expect(results.map((r) => r.created)).toEqual([true, true, true, false, false, true, false, true]);
  expect(results[3].id).toBe(results[0].id);
  expect(results[6].id).toBe(results[2].id);
  expect(results[4].id).toBe(existing.id);
  expect(new Set(results.map((r) => r.id)).size).toBe(6); // 5 new + the existing one
  // Input order: each created result's row carries its own item's payload.
  for (const [i, r] of results.entries()) {
    if (!r.created) continue;
    const { rows } = await db.query<{ payload: { i: number }; priority: number; idempotency_key: string | null }>(
      'select payload, priority, idempotency_key from acta.jobs where id = $1',
      [r.id],
    );
    expect(rows[0]).toEqual({ payload: { i }, priority: i, idempotency_key: keys[i] });
  }
  expect(await jobCount()).toBe(6);

  // A large batch is still one statement, in order.
  statements.length = 0;
  const many = await createClient({ force: true, db: counted }).enqueueMany(Array.from({ length: 2_000 }, (_, i) => ({ definition: 'bulk', payload: { i } })));
  expect(statements).toHaveLength(1);
  const { rows } = await db.query<{ id: string; i: number }>(`select id, (payload->>'i')::int as i from acta.jobs where definition = 'bulk'`);
  const byId = new Map(rows.map((r) => [r.id, r.i]));
  expect(many.map((r) => byId.get(r.id))).toEqual(Array.from({ length: 2_000 }, (_, i) => i));
});

test('enqueueMany without keys: options given on some items only land on those items, the rest take the defaults', async () => {
  const runAt = new Date(Date.now() + 3_600_000);
  const items = [
    { definition: 'mixed', payload: 'a' },
    { definition: 'mixed', payload: { b: ['x', "q\"uote"] }, priority: 5 },
    { definition: 'mixed', payload: null, runAt },
    { definition: 'mixed', payload: 4, maxAttempts: 2 },
  ];
  const results = await createClient({ force: true, db }).enqueueMany(items);
  expect(results.every((r) => r.created)).toBe(true);
  const { rows } = await db.query<{ id: string; payload: unknown; priority: number; future: boolean; max_attempts: number | null }>(
    `select id, payload, priority, run_at > now() + interval '59 minutes' as future, max_attempts from acta.jobs order by id`,
  );
  expect(rows.map((r) => r.id)).toEqual(results.map((r) => r.id));
  expect(rows.map(({ id: _id, ...r }) => r)).toEqual([
    { payload: 'a', priority: 0, future: false, max_attempts: null },
    { payload: { b: ['x', 'q"uote'] }, priority: 5, future: false, max_attempts: null },
    { payload: null, priority: 0, future: true, max_attempts: null },
    { payload: 4, priority: 0, future: false, max_attempts: 2 },
  ]);
});

test('a key enqueued concurrently by a transaction that commits while this enqueue waits still returns that job id', async () => {
  const client = createClient({ force: true, db });
  await withPgClient(tdb.url, async (tx) => {
    await tx.query('begin');
    const inTx = await client.enqueue('job', { from: 'tx' }, { idempotencyKey: 'race', tx });
    // This one waits on the unique index for the transaction above.
    const waiting = client.enqueue('job', { from: 'autocommit' }, { idempotencyKey: 'race' });
    await waitFor(
      async () =>
        (await db.query(`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like '%enqueue_jobs%'`)).rows.length > 0,
      'the second enqueue to wait for the first transaction',
    );
    await tx.query('commit');
    expect(await waiting).toEqual({ id: inTx.id, created: false });
  });
  expect(await jobCount()).toBe(1);
});

test("enqueue inside the caller's transaction: rolled back, no job; committed, the job runs and the LISTENing worker is woken at commit", async () => {
  const ran: string[] = [];
  const job = defineJob({ name: 'in-tx', handler: async (_p, ctx) => void ran.push(ctx.jobId) });
  // The safety poll is far longer than the waits below: only the NOTIFY can wake this worker.
  const worker = createWorker({ db, definitions: [job], logger: silentLogger, executors: 2, safetyPollMs: 120_000 });
  await worker.start();
  await waitFor(
    async () =>
      (await db.query(`select 1 from pg_stat_activity where datname = current_database() and query ilike 'listen%acta_jobs%'`)).rows.length > 0,
    "the worker's LISTEN",
  );
  const client = createClient({ force: true, db });
  try {
    await withPgClient(tdb.url, async (tx) => {
      await tx.query('begin');
      const rolledBack = await client.enqueue('in-tx', { n: 1 }, { tx });
      expect(await jobCount('id = $1', [rolledBack.id])).toBe(0); // not visible outside the transaction
      await tx.query('rollback');
      expect(await jobCount()).toBe(0);

      await tx.query('begin');
      const committed = await client.enqueue('in-tx', { n: 2 }, { tx });
      const many = await client.enqueueMany([{ definition: 'in-tx', payload: { n: 3 } }], { tx });
      expect(await jobCount()).toBe(0);
      await new Promise((r) => setTimeout(r, 300)); // the worker, idle, must not see them before commit
      expect(ran).toEqual([]);
      await tx.query('commit');
      await waitFor(() => ran.length === 2, 'the committed jobs to run, woken by the NOTIFY', 30_000);
      expect(ran.sort()).toEqual([committed.id, many[0].id].sort());
    });
  } finally {
    await worker.stop();
  }
  const { rows } = await db.query<{ status: string }>('select status from acta.all_jobs');
  expect(rows).toEqual([{ status: 'succeeded' }, { status: 'succeeded' }]);
});

test('bad options are refused with ConfigError before anything is written, for the whole batch', async () => {
  const client = createClient({ force: true, db });
  const { db: counted, statements } = counting(db);
  const countedClient = createClient({ force: true, db: counted });
  const bad: [string, object][] = [
    ['priority', { priority: 1.5 }],
    ['priority', { priority: 2 ** 31 }],
    ['maxAttempts', { maxAttempts: 0 }],
    ['maxAttempts', { maxAttempts: 2 ** 31 }],
    ['runAt', { runAt: new Date('not a date') }],
    ['runAt', { runAt: new Date(-8.64e15) }], // a JavaScript date, not a timestamptz (raw 22008 before)
    ['idempotencyKey', { idempotencyKey: 'k'.repeat(2_001) }], // beyond a btree entry (raw 54000 before)
    ['idempotencyKey', { idempotencyKey: '' }],
    // text stores a lone surrogate as U+FFFD: 'k\ud800' and 'k\udbff' would be one key, one job dropped
    ['idempotencyKey', { idempotencyKey: 'k\ud800' }],
    ['"delayMs"', { delayMs: 500 }], // a misspelt option is not ignored silently
    ['"priorty"', { priorty: 5 }],
  ];
  for (const [name, options] of bad) {
    await expect(countedClient.enqueue('job', {}, options)).rejects.toThrow(ConfigError);
    await expect(countedClient.enqueue('job', {}, options)).rejects.toThrow(name);
    await expect(countedClient.enqueueMany([{ definition: 'job', payload: { ok: true } }, { definition: 'job', payload: {}, ...options }])).rejects.toThrow(ConfigError);
  }
  // runAt names what it was given, and how to make the Date a number of ms or a text needs.
  await expect(countedClient.enqueue('job', {}, { runAt: (Date.now() + 60_000) as never })).rejects.toThrow(/^runAt must be a valid Date from 4713 BC on \(timestamptz\), got number \d+ \(a Date is needed: new Date\(ms\)\)$/);
  await expect(countedClient.enqueue('job', {}, { runAt: '2030-01-01' as never })).rejects.toThrow(/, got string "2030-01-01" \(a Date is needed: new Date\(text\)\)$/);
  // tx must be a transaction: anything without a query function failed mid-call as a TypeError
  // ("q.query is not a function"). Refused before any statement, by every call that takes one.
  for (const tx of [{}, 'x', 42, { query: 'select 1' }]) {
    const message = /^tx must be the caller's transaction: an object with a query function/;
    await expect(countedClient.enqueue('job', {}, { tx: tx as never })).rejects.toThrow(ConfigError);
    await expect(countedClient.enqueue('job', {}, { tx: tx as never })).rejects.toThrow(message);
    await expect(countedClient.enqueueMany([{ definition: 'job', payload: {} }], { tx: tx as never })).rejects.toThrow(message);
    await expect(countedClient.getJob('1', { tx: tx as never })).rejects.toThrow(message);
    await expect(countedClient.cancel('1', { tx: tx as never })).rejects.toThrow(message);
    await expect(countedClient.publish('topic', {}, { tx: tx as never })).rejects.toThrow(message);
    await expect(countedClient.signal('1', 'go', {}, { tx: tx as never })).rejects.toThrow(message);
  }
  // A transaction per item would be ignored: it is given once for the batch.
  await expect(countedClient.enqueueMany([{ definition: 'job', payload: {}, tx: db } as never])).rejects.toThrow(/"tx".*enqueueMany\(items, \{ tx \}\)/);
  await expect(countedClient.enqueue('', {})).rejects.toThrow(ConfigError);
  await expect(countedClient.enqueue('a\u0000b', {})).rejects.toThrow(ConfigError);
  await expect(countedClient.enqueue('a\udc00b', {})).rejects.toThrow(ConfigError);
  await expect(countedClient.enqueue('job', {}, { idempotencyKey: 'emoji 😀 keys are fine' })).resolves.toMatchObject({ created: true });
  await expect(countedClient.enqueue('job', {}, { idempotencyKey: 'k'.repeat(2_000), runAt: new Date('-004713-11-24T00:00:00Z') })).resolves.toMatchObject({ created: true });
  expect(statements).toHaveLength(2); // the emoji key's, the longest key's
  expect(await client.enqueueMany([])).toEqual([]);
  expect(await jobCount()).toBe(2);
});

test('a payload the database refuses as too large for jsonb (54000) is an InvalidJsonError for one job; a batch keeps the database error', async () => {
  // PostgreSQL's own error for a 300 MB string; producing it for real takes > 1 GB here.
  const tooLong = Object.assign(new DatabaseError('string too long to represent as jsonb string', 0, 'error'), { code: '54000' });
  const refusing = aroundStatements(db, () => Promise.reject(tooLong));
  const one = createClient({ force: true, db: refusing }).enqueue('job', { big: '…' });
  await expect(one).rejects.toThrow(InvalidJsonError);
  await expect(one).rejects.toMatchObject({ code: 'ACTA_INVALID_JSON', path: '$', cause: tooLong });
  await expect(createClient({ force: true, db: refusing }).enqueueMany([{ definition: 'job', payload: 1 }, { definition: 'job', payload: 2 }])).rejects.toBe(tooLong);
});

test('enqueue on a database with no acta schema, or one older than the client, is a SchemaNotMigratedError saying to migrate; newer, a SchemaNewerError; a user\'s own missing function keeps its error', async () => {
  // The case it guards: the client reached the server's raw "does not exist" error (3F000; 42883 for the
  // procedure of a client newer than the schema), where a worker says to run `acta migrate`.
  const bare = await createTestDatabase({ migrate: false });
  const older = await createTestDatabase();
  try {
    const unmigrated = createClient({ force: true, db: bare.open() });
    await expect(unmigrated.enqueue('x', { n: 1 })).rejects.toThrow(SchemaNotMigratedError);
    await expect(unmigrated.enqueue('x', { n: 1 })).rejects.toMatchObject({ code: 'ACTA_SCHEMA_NOT_MIGRATED', message: expect.stringMatching(/acta migrate/) });
    const olderDb = older.open();
    await olderDb.query('drop procedure acta.enqueue_jobs_wake_early');
    await olderDb.query(`update acta.migrations set checksum = 'older' where name = 'functions/enqueue_jobs_wake_early.sql'`);
    await expect(createClient({ force: true, db: olderDb }).enqueue('x', { n: 1 })).rejects.toMatchObject({
      code: 'ACTA_SCHEMA_NOT_MIGRATED',
      message: expect.stringContaining('enqueue_jobs_wake_early.sql'),
      cause: expect.objectContaining({ code: '42883', message: expect.stringContaining('enqueue_jobs_wake_early') }),
    });
    expect((await olderDb.query<{ n: string }>('select count(*) as n from acta.jobs')).rows[0].n).toBe('0');
    // Newer than the client: the procedure it calls has another shape now, and
    // the schema holds a migration this build does not know. Migrating with this build would be
    // refused; the error says to run the newer acta.
    await olderDb.query(`insert into acta.migrations (name, checksum) values ('migrations/9999_future.sql', 'future')`);
    await expect(createClient({ force: true, db: olderDb }).enqueue('x', { n: 1 })).rejects.toMatchObject({ code: 'ACTA_SCHEMA_NEWER' });
    // Also inside a caller's transaction, while the pool has a connection to ask on (the error's
    // message alone said to migrate).
    // (In a transaction the client calls acta.enqueue_jobs, renamed here as a newer acta might.)
    await olderDb.query('alter function acta.enqueue_jobs rename to enqueue_jobs_v2');
    await withPgClient(older.url, async (tx) => {
      await tx.query('begin');
      await expect(createClient({ force: true, db: olderDb }).enqueue('x', { n: 1 }, { tx })).rejects.toMatchObject({ code: 'ACTA_SCHEMA_NEWER' });
      await tx.query('rollback');
    });
    await olderDb.query('alter function acta.enqueue_jobs_v2 rename to enqueue_jobs');
    await olderDb.query(`delete from acta.migrations where name = 'migrations/9999_future.sql'`);
    // Not about the schema: a user's trigger on acta.jobs calling a function of its own that is
    // missing keeps its own error, though its message names "acta".
    await migrate(olderDb); // back to this build's functions
    await olderDb.query(`create function acta.user_audit_trigger() returns trigger language plpgsql as 'begin perform acta.user_audit(new.id); return new; end'`);
    await olderDb.query('create trigger user_audit after insert on acta.jobs for each row execute function acta.user_audit_trigger()');
    const audited = createClient({ force: true, db: olderDb }).enqueue('x', { n: 1 });
    await expect(audited).rejects.toMatchObject({ code: '42883', message: expect.stringContaining('acta.user_audit(bigint) does not exist') });
    await expect(audited).rejects.not.toThrow(SchemaNotMigratedError);
  } finally {
    await bare.drop();
    await older.drop();
  }
});

test('createWorker refuses a setting out of range with ConfigError naming it, before touching the database', () => {
  const job = defineJob({ name: 'job', handler: () => undefined });
  const make = (options: Record<string, number>) => () => createWorker({ db, definitions: [job], logger: silentLogger, ...options });
  expect(make({ executors: 0 })).toThrow(/^executors must be an integer between 1 and 10000, got 0$/);
  expect(make({ executors: 2.5 })).toThrow(ConfigError);
  expect(make({ safetyPollMs: 0 })).toThrow(/^safetyPollMs must be an integer between 1 and /);
  expect(make({ shutdownTimeoutMs: -1 })).toThrow(/^shutdownTimeoutMs must be an integer between 0 and /);
  expect(make({ shutdownTimeoutMs: Number.NaN })).toThrow(ConfigError);
  expect(make({ heartbeatIntervalMs: 5 })).toThrow(/^heartbeatIntervalMs must be between 100 and 3600000, got 5$/);
  expect(make({ shutdownTimeoutMs: 0 })).not.toThrow();
  // Beyond 2^31 - 1 ms a Node.js timer fires after 1 ms: a 30-day setting would act at once.
  expect(make({ safetyPollMs: 3e9 })).toThrow(/^safetyPollMs must be an integer between 1 and 2147483647, got 3000000000$/);
  expect(make({ shutdownTimeoutMs: 3e9 })).toThrow(/^shutdownTimeoutMs must be an integer between 0 and 2147483647/);
  const slow = (timeoutMs: number) => () => createWorker({ db, definitions: [defineJob({ name: 'slow', timeoutMs, handler: () => undefined })], logger: silentLogger });
  expect(slow(Number.POSITIVE_INFINITY)).toThrow(/^timeoutMs of definition "slow" must be an integer between 1 and 2147483647, got Infinity$/);
  expect(slow(30 * 24 * 3_600_000)).toThrow(ConfigError);
  expect(slow(0)).toThrow(ConfigError);
  expect(slow(2_147_483_647)).not.toThrow();
});

test('createWorker and createClient refuse unknown options, bad definitions and bad namespaces with ConfigError', async () => {
  const job = defineJob({ name: 'job', handler: () => undefined });
  const worker = (options: object) => () => createWorker({ db, definitions: [job], logger: silentLogger, ...options } as never);
  // A misspelt option used to start a worker with the default instead.
  expect(worker({ executor: 4 })).toThrow(/^unknown worker option "executor"; known: db, definitions, executors, /);
  expect(worker({ namespace: '' })).toThrow(/^namespace must be a non-empty string/);
  expect(worker({ namespace: 'a\u0000b' })).toThrow(ConfigError);
  const withDefinition = (d: object) => () => createWorker({ db, definitions: [d as never], logger: silentLogger });
  // Each of these was accepted: maxAttempts 0 failed every enqueue in the database (23514), 1.5 with
  // 22P02; no handler used up every attempt; '' could never be enqueued; a NUL failed start().
  expect(withDefinition({ name: 'j', handler: () => undefined, maxAttempts: 0 })).toThrow(/^maxAttempts of definition "j" must be an integer between 1 and 2147483647, got 0$/);
  expect(withDefinition({ name: 'j', handler: () => undefined, maxAttempts: 1.5 })).toThrow(ConfigError);
  expect(withDefinition({ name: 'j' })).toThrow(/^definition "j" needs a handler function$/);
  expect(withDefinition({ name: '', handler: () => undefined })).toThrow(/^a definition name must be a non-empty string/);
  expect(withDefinition({ name: 'a\u0000b', handler: () => undefined })).toThrow(ConfigError);
  expect(withDefinition({ name: 'j', handler: () => undefined, maxAttempt: 3 })).toThrow(/^unknown field of definition "j" "maxAttempt"; known: name, handler, /);
  expect(withDefinition({ name: 'j', handler: () => undefined, backoff: { delayMs: -1 } })).toThrow(/^backoff of definition "j" must be a function or/);
  expect(withDefinition({ name: 'j', handler: () => undefined, backoff: { delayMs: 10, factor: 0 } })).toThrow(ConfigError);
  expect(withDefinition({ name: 'j', handler: () => undefined, backoff: (n: number) => n, maxAttempts: 3, timeoutMs: 10 })).not.toThrow();
  // defineJob checks the same where the definition is written (it accepted each before).
  expect(() => defineJob({ name: 'j', handler: () => undefined, maxAttempts: 0 })).toThrow(/^maxAttempts of definition "j" must be an integer between 1/);
  expect(() => defineJob({ name: 'j', handler: () => undefined, timeoutMs: -5 })).toThrow(/^timeoutMs of definition "j" must be an integer between 1/);
  expect(() => defineJob({ name: '', handler: () => undefined })).toThrow(/^a definition name must be a non-empty string/);
  expect(() => defineJob({ name: 'j' } as never)).toThrow(/^definition "j" needs a handler function$/);
  // One definition not in an array was told "at least one definition", which it had.
  expect(() => createWorker({ db, definitions: job as never, logger: silentLogger })).toThrow(/^definitions must be an array of definitions \(definitions: \[sendEmail, resize\]\), got one definition \("job"\) not in an array$/);
  expect(() => createWorker({ db, definitions: 'job' as never, logger: silentLogger })).toThrow(/^definitions must be an array of definitions .*, got "job"$/);
  expect(() => createWorker({ db, logger: silentLogger } as never)).toThrow(/^definitions must be an array of definitions .*, got nothing$/);
  expect(() => createWorker({ db, definitions: [], logger: silentLogger })).toThrow(/^a worker needs at least one definition$/);
  expect(() => (createWorker as (o?: unknown) => unknown)()).toThrow(/^createWorker takes options: \{ db, definitions: \[\.\.\.\] \}, got nothing$/);

  // Called bare it failed as a TypeError on `options.ledger`; a URL given bare too.
  expect(() => (createClient as (o?: unknown) => unknown)()).toThrow(ConfigError);
  expect(() => (createClient as (o?: unknown) => unknown)()).toThrow(/^createClient takes options: \{ db \} with a Db \(createClient\(\{ db: await connect\(\) \}\)\), or \{ ledger \} \(acta\/testing\); got nothing$/);
  expect(() => createClient('postgres://x' as never)).toThrow(/^createClient takes options: .*; got "postgres:\/\/x"$/);
  expect(() => createClient(null as never)).toThrow(/^createClient takes options/);

  expect(() => createClient({ force: true, db, namspace: 'x' } as never)).toThrow(/^unknown client option "namspace"; known: db, namespace, publishWakeup, definitions, ledger, scheduler, force$/);
  expect(() => createClient({ force: true, db, namespace: '' })).toThrow(ConfigError);
  expect(() => createClient({ force: true, db, definitions: [{ name: 'j', maxAttempts: 0 }] })).toThrow(/^maxAttempts of definition "j"/);
  // The client needs no handler: a worker's definitions or { name, maxAttempts } both do.
  expect(() => createClient({ force: true, db, definitions: [job, { name: 'other', maxAttempts: 3 }] })).not.toThrow();
  // null options are no options (it threw a bare TypeError).
  await expect(createClient({ force: true, db }).enqueue('job', { n: 1 }, null)).resolves.toMatchObject({ created: true });
  expect(await jobCount()).toBe(1);

  // Names beyond 255 bytes: each was accepted, then failed as a raw database error: a
  // 3,000-byte definition name at every worker's start (definitions_pkey: 54000), a
  // 1,500-byte namespace with a 2,000-byte key at enqueue (jobs_idempotency_key_idx: 54000), an
  // 8,000-byte namespace at every enqueue (pg_notify: 22023).
  const long = 'é'.repeat(128); // 256 bytes in UTF-8
  expect(withDefinition({ name: long, handler: () => undefined })).toThrow(/^a definition name must be at most 255 bytes in UTF-8, got 256/);
  expect(worker({ namespace: long })).toThrow(/^namespace must be at most 255 bytes in UTF-8, got 256/);
  expect(() => createClient({ force: true, db, namespace: long })).toThrow(/^namespace must be at most 255 bytes in UTF-8, got 256/);
  await expect(createClient({ force: true, db }).enqueue(long, {})).rejects.toThrow(/^definition must be at most 255 bytes in UTF-8, got 256/);
  const longest = 'é'.repeat(127) + 'n'; // 255 bytes: the longest of each, with the longest key
  const longestJob = defineJob({ name: longest, handler: () => 'ran' });
  const longestClient = createClient({ force: true, db, namespace: longest });
  await expect(longestClient.enqueue(longestJob, {}, { idempotencyKey: 'k'.repeat(2_000) })).resolves.toMatchObject({ created: true });
  const longestWorker = createWorker({ db, definitions: [longestJob], namespace: longest, logger: silentLogger });
  await longestWorker.start();
  try {
    await waitFor(async () => (await db.query(`select 1 from acta.all_jobs where namespace = $1 and status = 'succeeded'`, [longest])).rows.length === 1, 'the job to run');
  } finally {
    await longestWorker.stop();
  }
});

test('enqueueMany names the item its error is about (index and message), and writes nothing', async () => {
  const client = createClient({ force: true, db, definitions: [{ name: 'job' }] });
  const items = Array.from({ length: 6 }, (_, i) => ({ definition: 'job', payload: { i } as unknown }));
  const refusal = async (bad: Partial<(typeof items)[number]> & Record<string, unknown>, at: number) => {
    const batch = items.map((item, i) => (i === at ? { ...item, ...bad } : item));
    try {
      await client.enqueueMany(batch as never);
    } catch (err) {
      return err as ActaError;
    }
    throw new Error('enqueueMany accepted the batch');
  };
  const json = await refusal({ payload: { s: 'a\u0000b' } }, 4);
  expect(json).toBeInstanceOf(InvalidJsonError);
  expect(json).toMatchObject({ item: 4, path: '$.s', message: expect.stringMatching(/^enqueueMany item 4: value at \$\.s cannot be stored as jsonb/) });
  expect(json.stack!.split('\n')[0]).toBe(`InvalidJsonError: ${json.message}`);
  expect(await refusal({ priority: 0.5 }, 5)).toMatchObject({ item: 5, message: expect.stringMatching(/^enqueueMany item 5: priority must be an integer/) });
  expect(await refusal({ definition: 'jbo' }, 1)).toMatchObject({ item: 1, code: 'ACTA_UNKNOWN_DEFINITION', message: expect.stringMatching(/^enqueueMany item 1: no job definition named "jbo"/) });
  expect(await refusal({ definition: null as never, payload: undefined } as never, 2)).toMatchObject({ item: 2, code: 'ACTA_CONFIG' });
  expect(await client.enqueueMany([null] as never).catch((err: ActaError) => err)).toMatchObject({ item: 0, message: 'enqueueMany item 0: an enqueueMany item is an object { definition, payload, ...options }, got null' });
  // One item given bare (not in an array) enqueued nothing, silently; a misspelt option ran outside the caller's transaction.
  await expect(client.enqueueMany({ definition: 'job', payload: 1 } as never)).rejects.toMatchObject({ code: 'ACTA_CONFIG', message: expect.stringMatching(/^enqueueMany takes an array of items, got /) });
  await expect(client.enqueueMany([{ definition: 'job', payload: 1 }], { txn: db } as never)).rejects.toMatchObject({ code: 'ACTA_CONFIG', message: expect.stringMatching(/^unknown enqueueMany option "txn"/) });
  // A batch of one names its item too (code reading items[err.item] works for any size); enqueue has no item to name.
  expect(await client.enqueueMany([{ definition: 'job', payload: 1n }]).catch((err: ActaError) => err)).toMatchObject({ item: 0, message: expect.stringMatching(/^enqueueMany item 0: value at \$ cannot/) });
  // The caller's own ActaError, thrown from an item's getter: marked once, and a frozen one goes out untouched.
  const shared = new ConfigError('tenant not configured');
  const throwing = (err: Error) => [{ definition: 'job', payload: 1, get priority(): number { throw err; } }];
  expect(((await client.enqueueMany(throwing(shared)).catch((err: ActaError) => err)) as ActaError).message).toBe('enqueueMany item 0: tenant not configured');
  expect(((await client.enqueueMany(throwing(shared)).catch((err: ActaError) => err)) as ActaError).message).toBe('enqueueMany item 0: tenant not configured');
  const frozen = Object.freeze(new ConfigError('frozen'));
  expect(await client.enqueueMany(throwing(frozen)).catch((err: ActaError) => err)).toBe(frozen);
  const one = await client.enqueue('job', 1n).catch((err: ActaError) => err);
  expect(one).toMatchObject({ item: undefined, message: expect.stringMatching(/^value at \$ cannot/) });
  expect(await jobCount()).toBe(0);
});

test("a tx used after its db.transaction ended is refused with ConfigError, nothing written: on a server its connection went back to the pool, where another caller's transaction may hold it", async () => {
  const client = createClient({ force: true, db });
  let stale!: Queryable;
  await db.transaction(async (tx) => {
    stale = tx;
  });
  // Without the check the enqueue ran on the released pool client: outside any transaction, or
  // inside whichever transaction had taken that client since, here one that rolls back, so the
  // job promised by `created: true` was lost with it.
  let answer: unknown;
  await expect(
    db.transaction(async () => {
      answer = await client.enqueue('after-end', { n: 1 }, { tx: stale }).catch((err: unknown) => err);
      throw new Error('roll back');
    }),
  ).rejects.toThrow('roll back');
  expect(answer).toBeInstanceOf(ConfigError);
  expect((answer as Error).message).toMatch(/^tx was used after its transaction ended/);
  await expect(client.enqueueMany([{ definition: 'after-end', payload: {} }], { tx: stale })).rejects.toBeInstanceOf(ConfigError);
  expect(await jobCount()).toBe(0);
  // Inside its transaction it works as before.
  await db.transaction((tx) => client.enqueue('after-end', { n: 2 }, { tx }));
  expect(await jobCount()).toBe(1);
});
