import { check, type Ledger, type ViolationKind } from '../../certify/checker';

// Hand-made ledgers: a clean one, and one per kind of violation, so the checker is shown to
// catch what it claims to catch. Times are ms on one (database) clock.

const plain = { concurrencyKey: null, concurrencyLimit: null, lane: null };

/** A clean ledger: job 1 ran once; job 2 lost its first attempt (worker killed after step a ran
 * and was recorded, and after step b ran but before b was recorded), then succeeded. */
function clean(): Ledger {
  return {
    jobs: [
      { id: '1', status: 'succeeded', execution: 1, attempts: 1, ...plain },
      { id: '2', status: 'succeeded', execution: 2, attempts: 2, ...plain },
    ],
    executions: [
      { jobId: '1', execution: 1, workerId: 'w1', claimedAt: 100, finishedAt: 200, outcome: 'succeeded', charged: true },
      { jobId: '2', execution: 1, workerId: 'w1', claimedAt: 100, finishedAt: 5_000, outcome: 'lost', charged: true },
      { jobId: '2', execution: 2, workerId: 'w2', claimedAt: 5_010, finishedAt: 5_100, outcome: 'succeeded', charged: true },
    ],
    steps: [
      { jobId: '1', name: 'a', execution: 1, recordedAt: 150 },
      { jobId: '2', name: 'a', execution: 1, recordedAt: 150 },
      { jobId: '2', name: 'b', execution: 2, recordedAt: 5_050 },
    ],
    effects: [
      { jobId: '1', step: 'a', execution: 1 },
      { jobId: '2', step: 'a', execution: 1 },
      { jobId: '2', step: 'b', execution: 1 }, // ran, attempt died before the record: allowed
      { jobId: '2', step: 'b', execution: 2 },
    ],
  };
}

const kinds = (ledger: Ledger): ViolationKind[] => check(ledger).violations.map((v) => v.kind);

test('a clean ledger with a recovery passes and counts what happened', () => {
  const verdict = check(clean());
  expect(verdict.violations).toEqual([]);
  expect(verdict.ok).toBe(true);
  expect(verdict.counts).toEqual({
    jobs: 2,
    succeeded: 2,
    attempts: 3,
    charged: 3,
    uncharged: 0,
    recovered: 1,
    stepsRecorded: 3,
    stepRuns: 4,
    stepRunsUnrecorded: 1,
    keyedJobs: 0,
    keyedAttempts: 0,
    lanedJobs: 0,
    lanes: 0,
    spanMs: 5_000,
    laneSpanMs: 0,
    signalsConsumed: 0,
    parents: 0,
  });
  expect(verdict.keys).toEqual([]);
});

test('a job that did not succeed', () => {
  const l = clean();
  l.jobs[0].status = 'failed';
  l.executions[0].outcome = 'failed_final';
  expect(kinds(l)).toEqual(expect.arrayContaining(['job_not_succeeded']));
  expect(check(l).ok).toBe(false);
});

test('a step recorded twice', () => {
  const l = clean();
  l.steps.push({ jobId: '2', name: 'a', execution: 2, recordedAt: 5_020 });
  expect(kinds(l)).toContain('step_recorded_twice');
});

test('a recorded step that ran again in a later attempt', () => {
  const l = clean();
  l.effects.push({ jobId: '2', step: 'a', execution: 2 });
  expect(kinds(l)).toEqual(['recorded_step_ran_again']);
});

test('an attempt number used twice', () => {
  const l = clean();
  l.executions.push({ ...l.executions[0], claimedAt: 300, finishedAt: 400 });
  expect(kinds(l)).toContain('attempt_number_duplicate');
});

test('an attempt missing from the ledger', () => {
  const l = clean();
  l.executions.splice(1, 1); // job 2's lost attempt vanished
  l.jobs[1].attempts = 1;
  l.steps = l.steps.filter((s) => !(s.jobId === '2' && s.name === 'a'));
  expect(kinds(l)).toEqual(['attempt_missing']);
});

test('two attempts of one job overlapping', () => {
  const l = clean();
  l.executions[2].claimedAt = 4_000; // claimed before the lost attempt was recovered
  expect(kinds(l)).toEqual(['attempts_overlap']);
});

test('a success written by a stale execution', () => {
  const l = clean();
  l.jobs[1].execution = 3;
  l.executions.push({ jobId: '2', execution: 3, workerId: 'w3', claimedAt: 5_200, finishedAt: 5_300, outcome: 'handed_back', charged: false });
  expect(kinds(l)).toEqual(['write_not_current']);
});

test('a step recorded outside its attempt', () => {
  const l = clean();
  l.steps[2].recordedAt = 9_000; // after execution 2 ended
  expect(kinds(l)).toEqual(['write_not_current']);
});

test('two successes of one job', () => {
  const l = clean();
  l.executions[1].outcome = 'succeeded';
  expect(kinds(l)).toEqual(expect.arrayContaining(['success_count', 'write_not_current']));
});

test('charged attempts not adding up to the row', () => {
  const l = clean();
  l.jobs[1].attempts = 1;
  expect(kinds(l)).toEqual(['attempts_mismatch']);
});

/**
 * A clean ledger with policies (no steps). Key k, limit 2: jobs 3, 4, 5; job 3's first attempt is
 * lost and ends when recovery returned it (1_000), and its retry is claimed then; job 5 is claimed
 * at the instant job 4 ends, so the key touches its limit without passing it. Lane L: jobs 9, 10,
 * 11 (ids in numeric, not string, order), each claimed when the one before finished for good; job
 * 9's first attempt failed and was retried, the lane waiting for it.
 */
function withPolicies(): Ledger {
  const keyed = { concurrencyKey: 'k', concurrencyLimit: 2, lane: null };
  const laned = { concurrencyKey: null, concurrencyLimit: null, lane: 'L' };
  const run = (jobId: string, execution: number, claimedAt: number, finishedAt: number, outcome = 'succeeded') => ({
    jobId,
    execution,
    workerId: 'w1',
    claimedAt,
    finishedAt,
    outcome,
    charged: true,
  });
  return {
    jobs: [
      { id: '3', status: 'succeeded', execution: 2, attempts: 2, ...keyed },
      { id: '4', status: 'succeeded', execution: 1, attempts: 1, ...keyed },
      { id: '5', status: 'succeeded', execution: 1, attempts: 1, ...keyed },
      { id: '9', status: 'succeeded', execution: 2, attempts: 2, ...laned },
      { id: '10', status: 'succeeded', execution: 1, attempts: 1, ...laned },
      { id: '11', status: 'succeeded', execution: 1, attempts: 1, ...laned },
    ],
    executions: [
      run('3', 1, 100, 1_000, 'lost'),
      run('4', 1, 200, 1_500),
      run('3', 2, 1_000, 1_200),
      run('5', 1, 1_500, 1_600),
      run('9', 1, 100, 200, 'failed'),
      run('9', 2, 300, 400),
      run('10', 1, 400, 500),
      run('11', 1, 500, 600),
    ],
    steps: [],
    effects: [],
  };
}

describe('concurrency keys and lanes', () => {
  test('a clean ledger: a key that touches its limit ([a, b) and [b, c) do not overlap), a lane in order', () => {
    const verdict = check(withPolicies());
    expect(verdict.violations).toEqual([]);
    expect(verdict.keys).toEqual([{ key: 'k', limit: 2, jobs: 3, attempts: 4, maxHeld: 2, spanMs: 1_500 }]);
    expect(verdict.counts).toMatchObject({ keyedJobs: 3, keyedAttempts: 4, lanedJobs: 3, lanes: 1, recovered: 1, spanMs: 1_500, laneSpanMs: 500 });
  });

  test('one attempt too many of a key at once', () => {
    const l = withPolicies();
    l.executions[3].claimedAt = 1_100; // job 5, while jobs 3 (its retry) and 4 hold the key
    const verdict = check(l);
    expect(kinds(l)).toEqual(['key_over_limit']);
    expect(verdict.violations[0].jobId).toBe('5');
    expect(verdict.keys[0].maxHeld).toBe(3);
  });

  test('a lost attempt holds its slot until recovery returned it', () => {
    const l = withPolicies();
    l.executions[3].claimedAt = 999; // job 5, while job 3's lost attempt is still held (with job 4)
    l.executions[3].finishedAt = 1_000;
    expect(kinds(l)).toEqual(['key_over_limit']);
  });

  test('one key across definitions: an attempt is admitted by its own definition\'s limit', () => {
    const l = withPolicies();
    l.jobs[2].concurrencyLimit = 1; // job 5's definition: limit 1
    l.executions[3].claimedAt = 1_400; // while job 4 holds the key: 2 > 1
    expect(kinds(l)).toEqual(['key_over_limit']);
    l.jobs[2].concurrencyLimit = 2;
    expect(kinds(l)).toEqual([]);
  });

  test('a lane\'s job claimed before the one before it finished for good', () => {
    const l = withPolicies();
    l.executions[6].claimedAt = 250; // job 10, while job 9 waits for its retry
    l.executions[6].finishedAt = 290;
    const verdict = check(l);
    expect(kinds(l)).toEqual(['lane_out_of_order']);
    expect(verdict.violations[0].jobId).toBe('10');
  });

  test('a lane\'s order is its commit order: a job of a lower id committed later runs after (lanePosition), and before it is out of order', () => {
    const l = withPolicies();
    l.jobs[3].lanePosition = '12'; // job 9 committed after 10 and 11
    l.executions[4] = { ...l.executions[4], claimedAt: 600, finishedAt: 700 };
    l.executions[5] = { ...l.executions[5], claimedAt: 700, finishedAt: 800 };
    l.executions[6] = { ...l.executions[6], claimedAt: 100, finishedAt: 200 };
    l.executions[7] = { ...l.executions[7], claimedAt: 300, finishedAt: 400 };
    expect(check(l).violations).toEqual([]);
    l.jobs[3].lanePosition = '9'; // committed first after all: jobs 10 and 11 ran before it
    expect(check(l).violations.map((v) => [v.kind, v.jobId])).toEqual([
      ['lane_out_of_order', '10'],
      ['lane_out_of_order', '11'],
    ]);
  });

  test('a lane\'s jobs out of enqueue order without overlapping', () => {
    const l = withPolicies();
    l.executions[7].claimedAt = 10; // job 11 ran first, done before job 9 began
    l.executions[7].finishedAt = 20;
    expect(kinds(l)).toEqual(['lane_out_of_order']);
  });

  test('two lane attempts overlapping', () => {
    const l = withPolicies();
    l.executions[7].claimedAt = 450; // job 11 while job 10 runs
    expect(kinds(l)).toEqual(['lane_out_of_order']);
  });
});

test('the verdict is a pure function: the same ledger gives the same verdict', () => {
  const l = clean();
  l.effects.push({ jobId: '2', step: 'a', execution: 2 });
  expect(check(l)).toEqual(check(JSON.parse(JSON.stringify(l))));
});

/**
 * A clean workflow ledger: job 10 parked on a signal (execution 1) and consumed signal 1; job 11
 * timed out (timeout 1,000 ms) and consumed signal 2 with its second wait; parent 20 spawned
 * children 21 and 22 (two spawn steps), parked, and resumed after both ended.
 */
function workflows(): Ledger {
  return {
    jobs: [
      { id: '10', status: 'succeeded', execution: 2, attempts: 1, ...plain },
      { id: '11', status: 'succeeded', execution: 3, attempts: 1, ...plain, signalTimeoutMs: 1_000 },
      { id: '20', status: 'succeeded', execution: 2, attempts: 1, ...plain },
      { id: '21', status: 'succeeded', execution: 1, attempts: 1, ...plain, parentId: '20' },
      { id: '22', status: 'succeeded', execution: 1, attempts: 1, ...plain, parentId: '20' },
    ],
    executions: [
      { jobId: '10', execution: 1, workerId: 'w1', claimedAt: 100, finishedAt: 200, outcome: 'signal_wait', charged: false },
      { jobId: '10', execution: 2, workerId: 'w1', claimedAt: 900, finishedAt: 950, outcome: 'succeeded', charged: true },
      { jobId: '11', execution: 1, workerId: 'w1', claimedAt: 100, finishedAt: 200, outcome: 'signal_wait', charged: false },
      { jobId: '11', execution: 2, workerId: 'w1', claimedAt: 1_200, finishedAt: 1_250, outcome: 'signal_wait', charged: false },
      { jobId: '11', execution: 3, workerId: 'w2', claimedAt: 1_600, finishedAt: 1_650, outcome: 'succeeded', charged: true },
      { jobId: '20', execution: 1, workerId: 'w1', claimedAt: 100, finishedAt: 200, outcome: 'children_wait', charged: false },
      { jobId: '21', execution: 1, workerId: 'w2', claimedAt: 210, finishedAt: 400, outcome: 'succeeded', charged: true },
      { jobId: '22', execution: 1, workerId: 'w2', claimedAt: 210, finishedAt: 600, outcome: 'succeeded', charged: true },
      { jobId: '20', execution: 2, workerId: 'w1', claimedAt: 610, finishedAt: 700, outcome: 'succeeded', charged: true },
    ],
    steps: [
      { jobId: '10', name: 'acta:signal:0', execution: 1, recordedAt: 800, result: { name: 'go', payload: 1 } }, // recorded by the wake, after the park
      { jobId: '11', name: 'acta:signal:0', execution: 1, recordedAt: 1_150, result: { timedOut: true } },
      { jobId: '11', name: 'acta:signal:1', execution: 2, recordedAt: 1_500, result: { name: 'go', payload: 2 } },
      { jobId: '20', name: 'acta:spawn:0', execution: 1, recordedAt: 140, result: { ids: ['21'] } },
      { jobId: '20', name: 'acta:spawn:1', execution: 1, recordedAt: 150, result: { ids: ['22'] } },
      { jobId: '20', name: 'acta:children:0', execution: 1, recordedAt: 600, result: {} },
    ],
    effects: [],
    signals: [
      { id: '1', jobId: '10', consumedStep: 'acta:signal:0', sentAt: 50 },
      { id: '2', jobId: '11', consumedStep: 'acta:signal:1', sentAt: 1_400 },
    ],
  };
}

test('workflows: a clean ledger of signal waits (one timed out) and a parent passes; a wait step recorded after its attempt parked is not a stale write', () => {
  const verdict = check(workflows());
  expect(verdict.violations).toEqual([]);
  expect(verdict.counts).toMatchObject({ signalsConsumed: 2, parents: 1 });
  expect(verdict.workflows).toEqual({
    signals: 2,
    signalWaits: 3,
    timeouts: 1,
    sentBeforeClaim: 1,
    sentBeforePark: 0,
    sentWhileParked: 1,
    consumedAfterTimeout: 1,
    children: 2,
    childrenWaits: 1,
  });
});

test('workflows: a wait step recorded before its attempt parked is a write outside the wake', () => {
  const l = workflows();
  l.steps[0].recordedAt = 150;
  expect(kinds(l)).toEqual(['write_not_current']);
});

test('workflows: two signals consumed by one wait', () => {
  const l = workflows();
  l.signals!.push({ id: '3', jobId: '10', consumedStep: 'acta:signal:0' });
  expect(kinds(l)).toEqual(['signal_consumed_twice']);
});

test('workflows: a signal wait recorded with no signal consumed for it, and a signal consumed by a wait never recorded', () => {
  const l = workflows();
  l.signals![0].consumedStep = 'acta:signal:1';
  expect(kinds(l).sort()).toEqual(['signal_consumed_by_no_wait', 'signal_wait_unanswered']);
});

test('workflows: a signal left in the mailbox at the end (the run sends each signalled job the one it consumes)', () => {
  const l = workflows();
  l.signals!.push({ id: '3', jobId: '10', consumedStep: null });
  expect(check(l).violations).toEqual([{ kind: 'signal_not_consumed', jobId: '10', detail: 'signal 3 left in the mailbox' }]);
});

test('workflows: a wait timed out before its timeout, or with no timeout', () => {
  const l = workflows();
  l.steps[1].recordedAt = 1_050; // claimed at 100, timeout 1,000 ms
  l.executions[3].claimedAt = 1_100;
  expect(check(l).violations).toEqual([{ kind: 'signal_timeout_early', jobId: '11', detail: "wait acta:signal:0 timed out 950 ms after its attempt's claim, timeout 1000 ms" }]);
  const m = workflows();
  m.jobs[1].signalTimeoutMs = null;
  expect(kinds(m)).toEqual(['signal_timeout_early']);
});

test('workflows: a parked job run again before its wait was answered, or with none answered', () => {
  const l = workflows();
  l.executions[1].claimedAt = 700; // signal 1's wake recorded at 800
  expect(check(l).violations).toEqual([{ kind: 'resumed_before_wake', jobId: '10', detail: 'execution 2 claimed 100 ms before its wait acta:signal:0 was answered (parked by execution 1)' }]);
  const m = workflows();
  m.steps.splice(0, 1); // no wake for job 10's park: its signal's step vanished too
  expect(kinds(m).sort()).toEqual(['resumed_before_wake', 'signal_consumed_by_no_wait']);
});

test('workflows: a child spawned twice (a row no spawn step lists, or listed twice), and a listed child with no row', () => {
  const l = workflows();
  l.jobs.push({ id: '23', status: 'succeeded', execution: 1, attempts: 1, ...plain, parentId: '20' });
  l.executions.push({ jobId: '23', execution: 1, workerId: 'w2', claimedAt: 210, finishedAt: 300, outcome: 'succeeded', charged: true });
  expect(check(l).violations).toEqual([{ kind: 'child_spawned_twice', jobId: '20', detail: "child 23 listed 0 times in the parent's spawn steps" }]);
  const m = workflows();
  m.steps[4].result = { ids: ['22', '21'] };
  expect(kinds(m)).toEqual(['child_spawned_twice']);
  const n = workflows();
  n.steps[4].result = { ids: ['22', '24'] };
  expect(kinds(n)).toEqual(['child_missing']);
});

test('workflows: a parent resumed before its last child ended, or with a child that never ended', () => {
  const l = workflows();
  l.executions[8].claimedAt = 550; // before child 22 ended at 600
  l.executions[8].finishedAt = 560;
  l.steps[5].recordedAt = 540; // its wake, too early as well: the resume checks the children themselves
  expect(check(l).violations).toEqual([{ kind: 'parent_resumed_early', jobId: '20', detail: 'execution 2 claimed 50 ms before child 22 ended' }]);
  const m = workflows();
  m.executions.splice(7, 1); // child 22's attempt vanished: it never ended
  m.jobs[4].status = 'executing';
  expect(kinds(m)).toEqual(expect.arrayContaining(['parent_resumed_early', 'job_not_succeeded']));
});

test('workflows: a resume lost to a kill, then a later attempt: each attempt after the park is held to the children', () => {
  const l = workflows();
  // The resume (execution 2) claimed early and lost; execution 3 succeeded after the children.
  l.jobs[2].execution = 3;
  l.jobs[2].attempts = 2;
  l.executions[8] = { jobId: '20', execution: 2, workerId: 'w1', claimedAt: 500, finishedAt: 520, outcome: 'lost', charged: true };
  l.executions.push({ jobId: '20', execution: 3, workerId: 'w2', claimedAt: 610, finishedAt: 700, outcome: 'succeeded', charged: true });
  l.steps[5].recordedAt = 450;
  expect(kinds(l)).toEqual(['parent_resumed_early']);
});

describe('schedules: one fire per instant, no gap beyond the catch-up policy (certify/fires.ts)', () => {
  const S = 1_000;
  const T0 = Date.UTC(2026, 11, 5, 12, 0, 0);
  const every = (catchUp: 'latest' | 'all' | 'none', catchUpWindowMs: number | null = null) => ({ name: 'tick', cron: '* * * * * *', timeZone: 'UTC', catchUp, catchUpWindowMs });
  type Fire = { at: number; status?: string; claimedAt?: number; outcome?: string; extra?: { claimedAt: number; outcome: string; charged: boolean }[] };
  /** A ledger of fires of 'tick' (each succeeded, claimed 10 ms after its instant, unless told) and one plain job. */
  function fires(schedule: ReturnType<typeof every>, list: Fire[]): Ledger {
    const ledger = clean();
    ledger.schedules = [schedule];
    list.forEach((f, i) => {
      const id = `f${i}`;
      const status = f.status ?? 'succeeded';
      const attempts = [...(f.extra ?? []), ...(status === 'ready' ? [] : [{ claimedAt: f.claimedAt ?? f.at + 10, outcome: f.outcome ?? (status === 'cancelled' ? 'skipped' : status), charged: status !== 'cancelled' }])];
      ledger.jobs.push({ id, status, execution: attempts.length, attempts: attempts.filter((a) => a.charged).length, ...plain, schedule: 'tick', scheduledAt: f.at });
      attempts.forEach((a, n) => ledger.executions.push({ jobId: id, execution: n + 1, workerId: 'w1', claimedAt: a.claimedAt, finishedAt: a.claimedAt + 5, outcome: a.outcome, charged: a.charged }));
    });
    return ledger;
  }

  test("a clean run: each instant once; after an outage 'latest' skips the armed fire for the latest due instant; a lost uncharged claim before a skip; the last fire still armed", () => {
    const ledger = fires(every('latest'), [
      { at: T0 },
      { at: T0 + S },
      // Every worker down from T0 + 1.5 s to T0 + 20.5 s: the armed fire is claimed then, missed.
      { at: T0 + 2 * S, status: 'cancelled', claimedAt: T0 + 20_500, extra: [{ claimedAt: T0 + 2_010, outcome: 'lost_uncharged', charged: false }] },
      { at: T0 + 20 * S, claimedAt: T0 + 20_510 },
      { at: T0 + 21 * S, status: 'ready' },
    ]);
    const verdict = check(ledger);
    expect(verdict.violations).toEqual([]);
    expect(verdict.fires).toEqual([{ schedule: 'tick', fires: 5, ran: 3, skipped: 1, longestGapMs: 18 * S }]);
    expect(verdict.counts).toMatchObject({ jobs: 2, succeeded: 2 }); // the plain jobs: fires are counted in `fires`
  });

  test("'all' runs each missed instant within the window, 'none' goes on after the claim", () => {
    const all = fires(every('all', 3 * S), [
      { at: T0, status: 'cancelled', claimedAt: T0 + 10_500 },
      { at: T0 + 8 * S, claimedAt: T0 + 10_510 },
      { at: T0 + 9 * S, claimedAt: T0 + 10_520 },
      { at: T0 + 10 * S, claimedAt: T0 + 10_530 },
      { at: T0 + 11 * S },
    ]);
    expect(check(all).violations).toEqual([]);
    const none = fires(every('none'), [{ at: T0, status: 'cancelled', claimedAt: T0 + 10_500 }, { at: T0 + 11 * S }]);
    expect(check(none).violations).toEqual([]);
  });

  test('each kind of fire violation is caught', () => {
    const fireKinds = (ledger: Ledger) => check(ledger).violations.map((v) => v.kind);
    expect(fireKinds(fires(every('latest'), [{ at: T0 }, { at: T0 + 2 * S }]))).toEqual(['fire_gap']);
    expect(fireKinds(fires(every('latest'), [{ at: T0 }, { at: T0 }]))).toEqual(['fire_duplicate']);
    // Skipped though its successor was not due yet; the next then is the latest due (itself).
    expect(fireKinds(fires(every('latest'), [{ at: T0, status: 'cancelled', claimedAt: T0 + 500 }, { at: T0 + S }]))).toEqual(['fire_skipped_not_missed', 'fire_gap']);
    // Ran though missed at its first claim.
    expect(fireKinds(fires(every('latest'), [{ at: T0, claimedAt: T0 + 5_500 }, { at: T0 + S }]))).toEqual(['fire_missed_ran']);
    // 'latest' after a skip must go to the latest due instant, not the next one ('all' would).
    expect(fireKinds(fires(every('latest'), [{ at: T0, status: 'cancelled', claimedAt: T0 + 5_500 }, { at: T0 + S }]))).toEqual(['fire_gap']);
    expect(fireKinds(fires(every('all', 2 * S), [{ at: T0, status: 'cancelled', claimedAt: T0 + 5_500 }, { at: T0 + S }]))).toEqual(['fire_gap']);
    expect(fireKinds(fires(every('latest'), [{ at: T0, status: 'ready' }, { at: T0 + S }]))).toEqual(['fire_unfinished']);
    const unknown = fires(every('latest'), [{ at: T0 }]);
    unknown.schedules = [];
    expect(fireKinds(unknown)).toEqual(['fire_unknown_schedule']);
  });
});
