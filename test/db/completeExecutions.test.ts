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

