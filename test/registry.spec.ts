import type { ClaimedRow } from '../src/db/types';
import { Registry } from '../src/worker/registry';

const row = (id: string, execution: number): ClaimedRow => ({ id, definition: 'd', payload: {}, execution, attempts: 0, maxAttempts: 25, unchargedReturns: 0, priority: 0 });

test("a new claim under the same execution number fences out the old attempt's completion still waiting for its write (it would have landed on the new attempt)", () => {
  const registry = new Registry();
  const [old] = registry.addClaimed([row('7', 3)], 1_000);
  const completion = { entry: old, row: { id: '7', execution: 3, outcome: 'failed', result: null, error: null, retryDelayMs: 0 }, bytes: 0 } as unknown as NonNullable<typeof old.completion>;
  old.completion = completion;
  const queued = completion.row; // the finalizer holds the row itself: a write not sent yet, or repeated
  registry.addClaimed([row('7', 3)], 2_000);
  expect(queued.execution).toBe(0);
  // A claim under another execution number (recovery gave the row back, and it was claimed again)
  // leaves the old completion's own fence, which the database refuses by itself.
  const [older] = registry.addClaimed([row('8', 1)], 1_000);
  const olderRow = { id: '8', execution: 1 };
  older.completion = { entry: older, row: olderRow } as unknown as NonNullable<typeof older.completion>;
  registry.addClaimed([row('8', 2)], 2_000);
  expect(olderRow.execution).toBe(1);
});

test('a new claim of a job already held supersedes the old entry: it is aborted as lost and removing it keeps the new one', () => {
  const registry = new Registry();
  const [old] = registry.addClaimed([row('7', 3)], 1_000);
  // The server lost the first claim (crash before its async commit was flushed) and gave the
  // same row to this same worker again, with the same execution number.
  const [fresh] = registry.addClaimed([row('7', 3)], 2_000);
  expect(old.controller.signal.aborted).toBe(true);
  expect(old.abortCause).toBe('lost');
  expect(registry.isCurrent(old)).toBe(false);
  expect(registry.isCurrent(fresh)).toBe(true);
  registry.remove(old);
  expect(registry.get('7')).toBe(fresh);
  expect(registry.heldPairs()).toEqual([{ id: '7', execution: 3, started: false }]);
  registry.remove(fresh);
  expect(registry.size).toBe(0);
});

test('counts entries by state and reports as started only those whose handler started', () => {
  const registry = new Registry();
  const [a, b, c] = registry.addClaimed([row('1', 1), row('2', 1), row('4', 1)], 0);
  a.state = 'executing';
  b.state = 'executing';
  b.state = 'finalizing'; // ran, now finalizing
  // Claimed straight to Finalizing (a skipped fire, a hand-back): never ran, so recovery must not
  // charge it (a charged skip made its retry run a missed fire: certify's fire_missed_ran).
  c.state = 'finalizing';
  registry.addClaimed([row('3', 2)], 0);
  expect(registry.countByState()).toEqual({ claimed: 1, executing: 1, finalizing: 2 });
  expect(registry.heldPairs().map((p) => p.started)).toEqual([true, true, false, false]);
});
