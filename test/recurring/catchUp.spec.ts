// The catch-up rule of a claimed fire (src/recurring/schedules.ts, fireDecision; docs/schedules.md,
// "Catch-up: missed fires"): only a missed fire (its successor already due at the claim) is judged
// by the policy; a fire claimed late within its cadence runs under every policy.
import type { ClaimedFire } from '../../src/db/types';
import { fireDecision } from '../../src/recurring/schedules';

const HOUR = 3_600_000;
const at = new Date('2027-01-01T01:00:00Z');
const fire = (catchUp: 'latest' | 'all' | 'none', claimedAfterMs: number, catchUpWindowMs?: number): ClaimedFire => ({
  name: 'hourly',
  at,
  claimedAt: new Date(at.getTime() + claimedAfterMs),
  cron: '0 * * * *',
  timeZone: 'UTC',
  catchUp,
  catchUpWindowMs: catchUpWindowMs ?? null,
  armed: true,
});

test.each(['latest', 'all', 'none'] as const)("a fire claimed late, before its successor is due, runs under '%s' and arms its successor", (policy) => {
  for (const window of [0, 500]) {
    expect(fireDecision(fire(policy, 800, policy === 'all' ? window : undefined), true)).toEqual({ skip: false, nextFireAt: new Date(at.getTime() + HOUR) });
  }
});

test("a missed fire: 'all' runs it inside the window and skips it outside, arming the first instant inside", () => {
  // Claimed 2.5 h late: the successors at +1 h and +2 h are due.
  expect(fireDecision(fire('all', 2.5 * HOUR, 3 * HOUR), true)).toEqual({ skip: false, nextFireAt: new Date(at.getTime() + HOUR) });
  expect(fireDecision(fire('all', 2.5 * HOUR, 2 * HOUR), true)).toEqual({ skip: true, nextFireAt: new Date(at.getTime() + HOUR) });
  expect(fireDecision(fire('all', 2.5 * HOUR, 0), true)).toEqual({ skip: true, nextFireAt: new Date(at.getTime() + 3 * HOUR) });
  expect(fireDecision(fire('latest', 2.5 * HOUR), true)).toEqual({ skip: true, nextFireAt: new Date(at.getTime() + 2 * HOUR) });
  expect(fireDecision(fire('none', 2.5 * HOUR), true)).toEqual({ skip: true, nextFireAt: new Date(at.getTime() + 3 * HOUR) });
  // A retry runs its instant whatever the policy.
  expect(fireDecision(fire('none', 2.5 * HOUR), false).skip).toBe(false);
});
