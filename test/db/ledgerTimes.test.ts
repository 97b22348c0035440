// The ledger's times order what was written (docs/decisions/2026-12-05-ledger-times.md): every time
// the certification's verdict compares (executions.claimed_at, executions.finished_at,
// steps.recorded_at) is read after its writer holds the job row's lock, so a write that committed
// before another took the lock carries the earlier time. The interleaving: a batch completion
// [X, J] waits on X's row lock; record_step of J, started after it, is accepted (J is still its
// execution 1, Executing, held) and commits; then the completion locks J and ends its attempt.
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { check } from '../../certify/checker';
import { readLedger } from '../../certify/run';
import { useTestDatabase } from '../helpers/db';
import { waitFor } from '../helpers/wait';

const { db, tdb } = useTestDatabase();

const worker = randomUUID();
const clients: Client[] = [];

async function connect(): Promise<Client> {
  const client = new Client({ connectionString: tdb.url, statement_timeout: 10_000 });
  client.on('error', () => undefined); // the database is dropped, with its connections, after the file
  await client.connect();
  clients.push(client);
  return client;
}

afterAll(async () => {
  await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
});

/** Two jobs of one worker, each at its execution 1, Executing, held by `worker` (as its claim left them). */
async function twoHeldJobs(definition: string): Promise<[string, string]> {
  const { rows } = await db.query<{ id: string }>(
    `insert into acta.jobs (definition, payload, status, execution, lease_holder, lease_expires_at, claimed_at)
     select $1, '{}', 'executing', 1, $2, now() + interval '1 minute', clock_timestamp() from generate_series(1, 2)
     returning id`,
    [definition, worker],
  );
  const ids = rows.map((r) => r.id).sort((a, b) => Number(a) - Number(b));
  return [ids[0], ids[1]];
}

/** Waits until the backend `pid` is waiting for a row lock. */
const waitingOnLock = (pid: number) =>
  waitFor(async () => {
    const { rows } = await db.query<{ waiting: boolean }>(`select wait_event_type = 'Lock' as waiting from pg_stat_activity where pid = $1`, [pid]);
    return rows[0]?.waiting === true;
  }, 'the completion to wait on a row lock');

const complete = (client: Client, ids: string[]) =>
  client.query<{ answer: string }>(`select acta.complete_executions($1, $2, $3, $4, $5::jsonb[], $6::jsonb[], $7) as answer`, [
    worker,
    ids,
    ids.map(() => 1),
    ids.map(() => 'succeeded'),
    ids.map(() => '{}'),
    ids.map(() => null),
    ids.map(() => 0),
  ]);

const recordStep = (client: Client, id: string, name: string) =>
  client.query<{ status: string }>(`select status from acta.record_step($1, $2, 1, $3, '{}'::jsonb)`, [worker, id, name]);

/** Whether job `id`'s one recorded step lies within [claimed_at, finished_at] of the attempt that recorded it. */
async function stepInsideItsAttempt(id: string): Promise<boolean> {
  const { rows } = await db.query<{ inside: boolean }>(
    `select s.recorded_at >= e.claimed_at and s.recorded_at <= e.finished_at as inside
     from acta.steps s join acta.all_executions e on e.job_id = s.job_id and e.execution = s.execution where s.job_id = $1`,
    [id],
  );
  expect(rows).toHaveLength(1);
  return rows[0].inside;
}

const pidOf = async (client: Client) => (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0].pid;

beforeAll(async () => {
  await db.query(`insert into acta.workers (id, namespace, hostname, pid, definitions) values ($1, 'default', 'test', 1, '{times}')`, [worker]);
  // readLedger reads the certification's effect log too: none here.
  await db.query(`create schema certify; create table certify.effects (job_id bigint not null, step text not null, execution integer not null)`);
});

test('a step recorded while a batch completion waits on another row is inside its attempt; the verdict passes', async () => {
  const [x, j] = await twoHeldJobs('times');
  const holder = await connect();
  const completer = await connect();
  const stepper = await connect();
  await holder.query('begin');
  await holder.query('select 1 from acta.jobs where id = $1 for update', [x]);
  const completerPid = await pidOf(completer);
  const completion = complete(completer, [x, j]);
  await waitingOnLock(completerPid);
  // Accepted: J is still execution 1, Executing, held; the completion has not reached it.
  expect((await recordStep(stepper, j, 's1')).rows).toEqual([{ status: 'recorded' }]);
  await holder.query('commit');
  expect((await completion).rows).toEqual([{ answer: 'ss' }]);

  const verdict = check(await readLedger(tdb.url));
  expect(verdict.violations).toEqual([]);
  expect(verdict.counts).toMatchObject({ jobs: 2, succeeded: 2, attempts: 2, stepsRecorded: 1 });
  expect(await stepInsideItsAttempt(j)).toBe(true);
});

test("a rate-limited attempt whose completion waited on another row shuts its meter for its whole delay after the ledger's end", async () => {
  const [x, j] = await twoHeldJobs('times');
  await db.query(`update acta.jobs set rate_key = 'r' where id = $1`, [j]);
  const holder = await connect();
  const completer = await connect();
  await holder.query('begin');
  await holder.query('select 1 from acta.jobs where id = $1 for update', [x]);
  const completerPid = await pidOf(completer);
  const completion = completer.query<{ answer: string }>(
    `select acta.complete_executions($1, $2, '{1,1}', '{succeeded,rate_limited}', '{"{}",null}'::jsonb[], '{null,null}'::jsonb[], '{0,1500}') as answer`,
    [worker, [x, j]],
  );
  await waitingOnLock(completerPid);
  await new Promise((r) => setTimeout(r, 300)); // the call's now() falls 300 ms behind its locks
  await holder.query('commit');
  expect((await completion).rows).toEqual([{ answer: 'sr' }]);
  // A claim compares shut_until with its admission instant (claimed_at): none of the key may be
  // admitted before the ledger's finished_at + 1,500 ms.
  const { rows } = await db.query<{ gap_ms: number }>(
    `select extract(epoch from g.shut_until - (e.finished_at + interval '1500 milliseconds')) * 1000 as gap_ms
     from acta.gates g, acta.executions e where g.kind = 'rate' and g.key = 'r' and e.job_id = $1 and e.outcome = 'rate_limited'`,
    [j],
  );
  expect(rows).toHaveLength(1);
  expect(Number(rows[0].gap_ms)).toBeGreaterThanOrEqual(0);
});

test('a step recorded while a recovery pass waits is inside the attempt the pass ends', async () => {
  const [, j] = await twoHeldJobs('times-recovered');
  await db.query(`update acta.jobs set lease_expires_at = now() - interval '1 second' where id = $1`, [j]);
  // A silent worker's row, locked: the pass, which marks it dead first, waits for it.
  const silent = randomUUID();
  await db.query(
    `insert into acta.workers (id, namespace, hostname, pid, definitions, last_heartbeat_at) values ($1, 'default', 'test', 2, '{}', now() - interval '1 hour')`,
    [silent],
  );
  const holder = await connect();
  const recoverer = await connect();
  const stepper = await connect();
  await holder.query('begin');
  await holder.query('select 1 from acta.workers where id = $1 for update', [silent]);
  const recovererPid = await pidOf(recoverer);
  const pass = recoverer.query<{ job_id: string; status: string }>(`select job_id::text, status from acta.recover_jobs('default', 60000)`);
  await waitingOnLock(recovererPid);
  // Accepted: the lease ran out, but no pass has returned the row yet.
  expect((await recordStep(stepper, j, 's1')).rows).toEqual([{ status: 'recorded' }]);
  await holder.query('commit');
  expect((await pass).rows).toEqual([{ job_id: j, status: 'ready' }]);
  expect(await stepInsideItsAttempt(j)).toBe(true);
  const verdict = check(await readLedger(tdb.url));
  expect(verdict.violations.filter((v) => v.jobId === j)).toEqual([{ kind: 'job_not_succeeded', jobId: j, detail: 'status ready' }]);
});

/** Parks job `id` (execution 1) on signal 'go': the completion a worker writes for a waitForSignal. */
const park = (client: Client, id: string) =>
  client.query<{ answer: string }>(`select acta.complete_executions($1, $2, $3, $4, $5::jsonb[], $6::jsonb[], $7) as answer`, [
    worker, [id], [1], ['signal_wait'], [JSON.stringify({ names: ['go'], step: 'acta:signal:0', timeoutMs: null })], [null], [0],
  ]);
const signal = (client: Client, id: string) => client.query(`select * from acta.send_signal('default', $1, null, 'go', '1'::jsonb, null)`, [id]);

/** Whether job `id`'s wait step was recorded at or after the end of the attempt that parked. */
async function wakeAfterPark(id: string): Promise<boolean> {
  const { rows } = await db.query<{ after: boolean }>(
    `select s.recorded_at >= e.finished_at as after
     from acta.steps s join acta.executions e on e.job_id = s.job_id and e.execution = s.execution where s.job_id = $1 and s.name = 'acta:signal:0'`,
    [id],
  );
  expect(rows).toHaveLength(1);
  return rows[0].after;
}

test("a wait answered by its own park's completion (the signal came first), or by a sender whose transaction began before the park, is recorded after the park", async () => {
  const [first, second] = await twoHeldJobs('times-waits');
  const client = await connect();
  // 1. The signal is in the mailbox before the park: the park's completion consumes it.
  expect((await signal(client, first)).rows).toEqual([{ job_id: first, outcome: 'queued' }]);
  await park(client, first);
  // 2. A sender's transaction began before the park; its signal, sent after the park, wakes it.
  const sender = await connect();
  await sender.query('begin');
  await sender.query('select now()');
  await park(client, second);
  expect((await signal(sender, second)).rows).toEqual([{ job_id: second, outcome: 'consumed' }]);
  await sender.query('commit');
  expect(await wakeAfterPark(first)).toBe(true);
  expect(await wakeAfterPark(second)).toBe(true);
  const verdict = check(await readLedger(tdb.url));
  expect(verdict.violations.filter((v) => v.jobId === first || v.jobId === second).map((v) => v.kind)).toEqual(['job_not_succeeded', 'job_not_succeeded']);
});
