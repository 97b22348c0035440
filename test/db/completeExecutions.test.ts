// acta.complete_executions shape by shape (sql/functions/complete_executions.sql, its `decision`
// table): for each outcome, on a job with attempts left, on its last attempt, and with no limit of
// its own, the row and the ledger row it writes and the letter it answers. One batch holds them
// all, as a worker's finalizer sends mixed shapes in one call. A plain success's row leaves
// acta.jobs for acta.succeeded_jobs and is its attempt's ledger record (migration 0023): readers
// see both tables in acta.all_jobs and acta.all_executions.
import { randomUUID } from 'node:crypto';
import { useTestDatabase } from '../helpers/db';

const { db } = useTestDatabase();

const worker = randomUUID();
const outcomes = ['succeeded', 'failed', 'failed_final', 'handed_back', 'expired'] as const;
type Outcome = (typeof outcomes)[number];
/** The job before its completion: attempts charged so far and its own limit (null: none). */
const states = { 'attempts left': { attempts: 1, max: 3 }, 'last attempt': { attempts: 2, max: 3 }, 'no limit of its own': { attempts: 7, max: null } } as const;
type State = keyof typeof states;

interface Expected {
  answer: string;
  /** The table the row is in after the call. */
  table: 'jobs' | 'succeeded_jobs';
  status: string;
  attempts: number;
  uncharged_returns: number;
  run_at: 'kept' | 'now' | 'retry';
  result: unknown;
  error: unknown;
  /** finished_at: null, the call's now(), or (a moved row) a clock read after the call's start. */
  finished: 'no' | 'now' | 'clock';
  /** The worker that ran it, on a moved row (its ledger record's worker_id); else cleared. */
  lease_holder: string | null;
  /** The attempt's record in acta.all_executions; in_executions: an acta.executions row (a moved row's record is the row itself). */
  ledger: { outcome: string; charged: boolean; error: unknown; in_executions: boolean };
}

const RESULT = { r: 1 };
const OLD_ERROR = { name: 'Error', message: 'the previous attempt' };
const NEW_ERROR = { name: 'Error', message: 'this attempt' };

function expected(outcome: Outcome, state: State): Expected {
  const { attempts } = states[state];
  const last = state === 'last attempt';
  const kept = { result: null, error: OLD_ERROR };
  switch (outcome) {
    case 'succeeded':
      // Plain (no parent, key, schedule or watch): moved, its row its attempt's record.
      return { answer: 's', table: 'succeeded_jobs', status: 'succeeded', attempts: attempts + 1, uncharged_returns: 0, run_at: 'kept', result: RESULT, error: null, finished: 'clock', lease_holder: worker, ledger: { outcome: 'succeeded', charged: true, error: null, in_executions: false } };
    case 'failed':
      return last
        ? { answer: 'f', table: 'jobs', status: 'failed', attempts: attempts + 1, uncharged_returns: 0, run_at: 'kept', ...kept, error: NEW_ERROR, finished: 'now', lease_holder: null, ledger: { outcome: 'failed_final', charged: true, error: NEW_ERROR, in_executions: true } }
        : { answer: 'r', table: 'jobs', status: 'ready', attempts: attempts + 1, uncharged_returns: 0, run_at: 'retry', ...kept, error: NEW_ERROR, finished: 'no', lease_holder: null, ledger: { outcome: 'failed', charged: true, error: NEW_ERROR, in_executions: true } };
    case 'failed_final':
      return { answer: 'f', table: 'jobs', status: 'failed', attempts: attempts + 1, uncharged_returns: 0, run_at: 'kept', ...kept, error: NEW_ERROR, finished: 'now', lease_holder: null, ledger: { outcome: 'failed_final', charged: true, error: NEW_ERROR, in_executions: true } };
    case 'handed_back':
      return { answer: 'r', table: 'jobs', status: 'ready', attempts, uncharged_returns: 0, run_at: 'now', ...kept, finished: 'no', lease_holder: null, ledger: { outcome: 'handed_back', charged: false, error: null, in_executions: true } };
    case 'expired':
      return { answer: 'r', table: 'jobs', status: 'ready', attempts, uncharged_returns: 1, run_at: 'now', ...kept, finished: 'no', lease_holder: null, ledger: { outcome: 'expired', charged: false, error: null, in_executions: true } };
  }
}

test('every shape on every attempt state writes its row, its ledger row and its letter, in one batch', async () => {
  await db.query(`insert into acta.workers (id, namespace, hostname, pid, definitions) values ($1, 'default', 'test', 1, '{shapes}')`, [worker]);
  const cases = outcomes.flatMap((outcome) => (Object.keys(states) as State[]).map((state) => ({ outcome, state })));
  const ids: string[] = [];
  for (const { state } of cases) {
    const { attempts, max } = states[state];
    const { rows } = await db.query<{ id: string }>(
      `insert into acta.jobs (definition, payload, status, execution, attempts, max_attempts, lease_holder, lease_expires_at, claimed_at, started, error, run_at)
       values ('shapes', '{}', 'executing', 4, $1, $2, $3, now() + interval '1 minute', now(), true, $4, now() - interval '1 hour')
       returning id`,
      [attempts, max, worker, OLD_ERROR],
    );
    ids.push(rows[0].id);
  }
  // now(): the call's start, from which the row's run_at counts (sql/functions/complete_executions.sql, "Ledger").
  const { rows: [{ answer, called_at }] } = await db.query<{ answer: string; called_at: string }>(
    `select acta.complete_executions($1, $2, $3, $4, $5::jsonb[], $6::jsonb[], $7) as answer, now()::text as called_at`,
    [
      worker,
      ids,
      ids.map(() => 4),
      cases.map((c) => c.outcome),
      cases.map((c) => (c.outcome === 'succeeded' ? JSON.stringify(RESULT) : null)),
      cases.map((c) => (c.outcome.startsWith('failed') ? JSON.stringify(NEW_ERROR) : null)),
      cases.map(() => 60_000),
    ],
  );
  const { rows } = await db.query<{ id: string; table: string; status: string; attempts: number; uncharged_returns: number; run_at: string; result: unknown; error: unknown; finished: string; lease_holder: string | null; started: boolean }>(
    // Times against the completion's own now(), which a kept row's finished_at took.
    `select j.id, j.tbl as table, j.status, j.attempts, j.uncharged_returns, j.result, j.error, j.lease_holder, j.started,
            case when j.finished_at is null then 'no'
                 when j.finished_at = $1::timestamptz then 'now'
                 when j.finished_at > $1::timestamptz then 'clock' end as finished,
            case when j.run_at < $1::timestamptz - interval '1 minute' then 'kept'
                 when j.run_at = $1::timestamptz then 'now'
                 when j.run_at = $1::timestamptz + interval '1 minute' then 'retry' end as run_at
       from (select 'jobs' as tbl, * from acta.jobs union all select 'succeeded_jobs', * from acta.succeeded_jobs) j
       join acta.all_executions e on e.job_id = j.id order by j.id`,
    [called_at],
  );
  // The ledger's end of every attempt in acta.executions: one clock read once the call held every
  // row, after its start (a moved row's is its own finished_at, 'clock' above).
  const { rows: ends } = await db.query<{ after_start: boolean }>('select finished_at >= $1::timestamptz as after_start from acta.executions group by finished_at', [called_at]);
  expect(ends).toEqual([{ after_start: true }]);
  const { rows: ledger } = await db.query<{ job_id: string; execution: number; worker_id: string; outcome: string; charged: boolean; error: unknown; in_executions: boolean }>(
    `select a.job_id, a.execution, a.worker_id, a.outcome, a.charged, a.error,
            exists (select 1 from acta.executions e where e.job_id = a.job_id and e.execution = a.execution) as in_executions
       from acta.all_executions a order by a.job_id`,
  );
  const seen = cases.map((c, i) => ({
    ...c,
    answer: answer[i],
    row: rows[i],
    ledger: ledger.find((l) => l.job_id === ids[i]),
  }));
  expect(seen).toEqual(
    cases.map((c, i) => {
      const e = expected(c.outcome, c.state);
      return {
        ...c,
        answer: e.answer,
        row: { id: ids[i], table: e.table, status: e.status, attempts: e.attempts, uncharged_returns: e.uncharged_returns, run_at: e.run_at, result: e.result, error: e.error, finished: e.finished, lease_holder: e.lease_holder, started: false },
        ledger: { job_id: ids[i], execution: 4, worker_id: worker, ...e.ledger },
      };
    }),
  );
});

test('an element whose outcome names no shape is not applied and is answered as stale, beside one that is applied', async () => {
  const { rows } = await db.query<{ id: string }>(
    `insert into acta.jobs (definition, payload, status, execution, lease_holder, lease_expires_at, claimed_at)
     select 'shapes', '{}', 'executing', 1, $1, now() + interval '1 minute', now() from generate_series(1, 2) returning id`,
    [worker],
  );
  const ids = rows.map((r) => r.id);
  const before = (await db.query('select * from acta.jobs where id = $1', [ids[0]])).rows;
  const { rows: [{ answer }] } = await db.query<{ answer: string }>(
    `select acta.complete_executions($1, $2, '{1,1}', '{no-such-shape,succeeded}', null, null, null) as answer`,
    [worker, ids],
  );
  expect(answer).toBe('xs');
  expect((await db.query('select * from acta.jobs where id = $1', [ids[0]])).rows).toEqual(before);
  expect((await db.query('select job_id, outcome from acta.all_executions where job_id = any ($1) order by job_id', [ids])).rows).toEqual([{ job_id: ids[1], outcome: 'succeeded' }]);
});

// The answer string is built from the applied rows alone when every element applied, else element
// by element (sql/functions/complete_executions.sql): an element repeating an applied one answers
// as it did, and the row and its ledger are written once.
test('an element repeated in a batch is applied once and answered at each of its places; a stale one answers x', async () => {
  const { rows } = await db.query<{ id: string }>(
    `insert into acta.jobs (definition, payload, status, execution, lease_holder, lease_expires_at, claimed_at)
     select 'shapes', '{}', 'executing', 1, $1, now() + interval '1 minute', now() from generate_series(1, 2) returning id`,
    [worker],
  );
  const [a, b] = rows.map((r) => r.id);
  const { rows: [{ answer }] } = await db.query<{ answer: string }>(
    `select acta.complete_executions($1, $2, '{1,1,1,2}', '{succeeded,failed_final,succeeded,succeeded}', null, null, null) as answer`,
    [worker, [a, b, a, b]],
  );
  expect(answer).toBe('sfsx');
  expect((await db.query('select job_id, outcome from acta.all_executions where job_id = any ($1) order by job_id', [[a, b]])).rows).toEqual([
    { job_id: a, outcome: 'succeeded' },
    { job_id: b, outcome: 'failed_final' },
  ]);
});

// Migration 0023: a success whose row nothing else needs (no parent, idempotency key, schedule or
// watch) leaves acta.jobs for acta.succeeded_jobs in the same call, and that row is its attempt's
// ledger record (no acta.executions row; acta.all_executions shows it). The others stay as before.
// The answers of moved and updated elements are merged into input order.
test('one batch: a plain success moves to acta.succeeded_jobs as its own ledger record; a keyed or watched success and a failure stay in acta.jobs with their ledger rows; the answer is in input order', async () => {
  const moved = randomUUID();
  await db.query(`insert into acta.workers (id, namespace, hostname, pid, definitions) values ($1, 'default', 'test', 1, '{moves}')`, [moved]);
  /** A job at its execution 1, Executing, held by `moved`, with `key` as its idempotency key. */
  const held = async (key: string | null = null) =>
    (await db.query<{ id: string }>(
      `insert into acta.jobs (definition, payload, status, execution, attempts, lease_holder, lease_expires_at, claimed_at, idempotency_key)
       values ('moves', '{}', 'executing', 1, 0, $1, now() + interval '1 minute', clock_timestamp(), $2) returning id`,
      [moved, key],
    )).rows[0].id;
  const keyed = await held(`moves-${randomUUID()}`);
  const plain = await held();
  const failing = await held();
  const watched = await held();
  const plain2 = await held();
  expect((await db.query(`select acta.watch_job('default', $1) as found`, [watched])).rows).toEqual([{ found: true }]);
  const ids = [keyed, plain, failing, watched, plain2];
  const outcomes = ['succeeded', 'succeeded', 'failed', 'succeeded', 'succeeded'];
  const { rows: [{ answer }] } = await db.query<{ answer: string }>(
    `select acta.complete_executions($1, $2, $3, $4, $5::jsonb[], $6::jsonb[], $7) as answer`,
    [
      moved,
      ids,
      ids.map(() => 1),
      outcomes,
      ids.map((id, i) => (outcomes[i] === 'succeeded' ? JSON.stringify({ id }) : null)),
      outcomes.map((o) => (o === 'failed' ? JSON.stringify(NEW_ERROR) : null)),
      ids.map(() => 0),
    ],
  );
  // Input order: the moved answers ('s' at places 2 and 5) merged with the updated ones.
  expect(answer).toBe('ssrss');

  const hot = await db.query<{ id: string; status: string; result: unknown; lease_holder: string | null }>(
    'select id, status, result, lease_holder from acta.jobs where id = any ($1) order by id', [ids],
  );
  expect(hot.rows).toEqual([
    { id: keyed, status: 'succeeded', result: { id: keyed }, lease_holder: null },
    { id: failing, status: 'ready', result: null, lease_holder: null },
    { id: watched, status: 'succeeded', result: { id: watched }, lease_holder: null },
  ]);
  const cold = await db.query<{ id: string; status: string; result: unknown; attempts: number; execution: number; lease_holder: string; after_claim: boolean }>(
    `select id, status, result, attempts, execution, lease_holder, finished_at >= claimed_at as after_claim
       from acta.succeeded_jobs where id = any ($1) order by id`,
    [ids],
  );
  expect(cold.rows).toEqual([plain, plain2].map((id) => ({ id, status: 'succeeded', result: { id }, attempts: 1, execution: 1, lease_holder: moved, after_claim: true })));
  // The ledger: the rows that stayed have their acta.executions rows; a moved one has none, and
  // acta.all_executions shows its one charged 'succeeded' attempt, from its row.
  const executions = await db.query<{ job_id: string; outcome: string; charged: boolean; worker_id: string }>(
    'select job_id, outcome, charged, worker_id from acta.executions where job_id = any ($1) order by job_id', [ids],
  );
  expect(executions.rows).toEqual([
    { job_id: keyed, outcome: 'succeeded', charged: true, worker_id: moved },
    { job_id: failing, outcome: 'failed', charged: true, worker_id: moved },
    { job_id: watched, outcome: 'succeeded', charged: true, worker_id: moved },
  ]);
  const all = await db.query<{ job_id: string; execution: number; outcome: string; charged: boolean; worker_id: string; error: unknown; same_end: boolean }>(
    `select a.job_id, a.execution, a.outcome, a.charged, a.worker_id, a.error, a.finished_at = s.finished_at as same_end
       from acta.all_executions a join acta.succeeded_jobs s on s.id = a.job_id where a.job_id = any ($1) order by a.job_id`,
    [ids],
  );
  expect(all.rows).toEqual([plain, plain2].map((job_id) => ({ job_id, execution: 1, outcome: 'succeeded', charged: true, worker_id: moved, error: null, same_end: true })));
});

test('a batch whose every element moves answers all s and leaves no row in acta.jobs and none in acta.executions', async () => {
  const moved = randomUUID();
  const { rows } = await db.query<{ id: string }>(
    `insert into acta.jobs (definition, payload, status, execution, lease_holder, lease_expires_at, claimed_at)
     select 'moves-all', '{}', 'executing', 1, $1, now() + interval '1 minute', clock_timestamp() from generate_series(1, 3) returning id`,
    [moved],
  );
  const ids = rows.map((r) => r.id).sort((x, y) => Number(x) - Number(y));
  const { rows: [{ answer }] } = await db.query<{ answer: string }>(
    `select acta.complete_executions($1, $2, '{1,1,1}', '{succeeded,succeeded,succeeded}', null, null, null) as answer`,
    [moved, ids],
  );
  expect(answer).toBe('sss');
  expect((await db.query('select id from acta.jobs where id = any ($1)', [ids])).rows).toEqual([]);
  expect((await db.query('select job_id from acta.executions where job_id = any ($1)', [ids])).rows).toEqual([]);
  expect((await db.query<{ id: string; status: string }>('select id, status from acta.succeeded_jobs where id = any ($1) order by id', [ids])).rows)
    .toEqual(ids.map((id) => ({ id, status: 'succeeded' })));
  expect((await db.query<{ n: number }>(`select count(*)::int as n from acta.all_executions where job_id = any ($1) and outcome = 'succeeded' and charged`, [ids])).rows)
    .toEqual([{ n: 3 }]);
});
