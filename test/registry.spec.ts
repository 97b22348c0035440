import type { ClaimedRow } from '../src/db/types';
import { Registry } from '../src/worker/registry';

const row = (id: string, execution: number): ClaimedRow => ({ id, definition: 'd', payload: {}, execution, attempts: 0, maxAttempts: 25, unchargedReturns: 0, priority: 0 });

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
