import { check, type Ledger, type ViolationKind } from '../../certify/checker';

// Hand-made ledgers: a clean one, and one per kind of violation, so the checker is shown to
// catch what it claims to catch. Times are ms on one (database) clock.

/** A clean ledger: job 1 ran once; job 2 lost its first attempt (worker killed after step a ran
 * and was recorded, and after step b ran but before b was recorded), then succeeded. */
function clean(): Ledger {
  return {
    jobs: [
      { id: '1', status: 'succeeded', execution: 1, attempts: 1 },
      { id: '2', status: 'succeeded', execution: 2, attempts: 2 },
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
  });
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

test('the verdict is a pure function: the same ledger gives the same verdict', () => {
  const l = clean();
  l.effects.push({ jobId: '2', step: 'a', execution: 2 });
  expect(check(l)).toEqual(check(JSON.parse(JSON.stringify(l))));
});
