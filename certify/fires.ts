/**
 * The schedules' part of the verdict, a pure function of the ledger (test/certify/checker.spec.ts):
 * one fire per (schedule, scheduled instant), and no gap beyond the schedule's catch-up policy
 * (docs/schedules.md, "How a fire happens" and "Catch-up"). Times are ms on the database clock.
 *
 * Read from the fire rows (acta.jobs with a schedule) and their attempts alone, in instant order:
 * - a fire that ran (or ended failed or cancelled) is followed by the cron's next instant after it;
 * - a fire skipped (its one attempt recorded `skipped`) was missed at that attempt's claim: with
 *   'latest' and 'none' its successor was due, with 'all' it was older than the window; and it is
 *   followed by the policy's instant: 'latest' the last instant at or before the claim, 'none' the
 *   first after it, 'all' the first inside the window;
 * - a fire that ran was not missed at its first claim (the policy would have skipped it);
 * - only the last fire of a schedule may still be unfinished (armed, or running at the end).
 * It holds for schedules that were neither changed, paused, resumed nor triggered during the run
 * (those arm from "now", docs/schedules.md, "At runtime").
 */
import { cronSchedule, type CronSchedule } from '../src/recurring/cron';

export interface LedgerSchedule {
  name: string;
  cron: string;
  timeZone: string;
  catchUp: 'latest' | 'all' | 'none';
  catchUpWindowMs: number | null;
}

/** A fire: a job row with a schedule (acta.jobs.schedule, scheduled_at). */
export interface LedgerFire {
  jobId: string;
  schedule: string;
  scheduledAt: number;
  status: string;
}

/** The attempts of a fire, as certify/checker.ts's LedgerExecution (only these fields are read). */
export interface FireAttempt {
  execution: number;
  claimedAt: number;
  outcome: string;
}

export type FireViolationKind = 'fire_duplicate' | 'fire_gap' | 'fire_skipped_not_missed' | 'fire_missed_ran' | 'fire_unfinished' | 'fire_unknown_schedule';

export interface FireViolation {
  kind: FireViolationKind;
  jobId: string;
  detail: string;
}

export interface FireFigures {
  schedule: string;
  fires: number;
  ran: number;
  skipped: number;
  /** The longest distance between two successive fires' instants, ms. */
  longestGapMs: number;
}

const DEFAULT_WINDOW_MS = 86_400_000;
const iso = (ms: number) => new Date(ms).toISOString();

/** The instant that follows fire `at` whose attempt was claimed at `claimedAt` and skipped, by the policy; null: the cron ends. */
function policyInstant(cron: CronSchedule, s: LedgerSchedule, at: number, claimedAt: number): number | null {
  if (s.catchUp === 'none') return cron.next(new Date(claimedAt))?.getTime() ?? null;
  if (s.catchUp === 'all') return cron.next(new Date(claimedAt - (s.catchUpWindowMs ?? DEFAULT_WINDOW_MS) - 1))?.getTime() ?? null;
  let last = at;
  for (let t = cron.next(new Date(at)); t && t.getTime() <= claimedAt; t = cron.next(t)) last = t.getTime();
  return last;
}

/** Was fire `at` missed at a claim at `claimedAt` (docs/schedules.md, "Catch-up")? */
function missed(cron: CronSchedule, s: LedgerSchedule, at: number, claimedAt: number): boolean {
  if (s.catchUp === 'all') return at < claimedAt - (s.catchUpWindowMs ?? DEFAULT_WINDOW_MS);
  const next = cron.next(new Date(at));
  return next !== null && next.getTime() <= claimedAt;
}

/** Checks every schedule's fires; `attemptsOf` gives a fire's attempts (any order). */
export function checkFires(schedules: LedgerSchedule[], fires: LedgerFire[], attemptsOf: (jobId: string) => FireAttempt[]): { violations: FireViolation[]; figures: FireFigures[] } {
  const violations: FireViolation[] = [];
  const flag = (kind: FireViolationKind, jobId: string, detail: string) => violations.push({ kind, jobId, detail });
  const figures: FireFigures[] = [];
  const byName = new Map(schedules.map((s) => [s.name, s]));
  for (const f of fires) if (!byName.has(f.schedule)) flag('fire_unknown_schedule', f.jobId, `fire of "${f.schedule}", which the ledger has no schedule of`);
  for (const s of [...schedules].sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const cron = cronSchedule(s.cron, s.timeZone);
    const mine = fires.filter((f) => f.schedule === s.name).sort((a, b) => a.scheduledAt - b.scheduledAt);
    const fig: FireFigures = { schedule: s.name, fires: mine.length, ran: 0, skipped: 0, longestGapMs: 0 };
    figures.push(fig);
    for (let i = 0; i < mine.length; i++) {
      const f = mine[i];
      const next = mine[i + 1];
      if (next) fig.longestGapMs = Math.max(fig.longestGapMs, next.scheduledAt - f.scheduledAt);
      if (next && next.scheduledAt === f.scheduledAt) {
        flag('fire_duplicate', next.jobId, `two fires of "${s.name}" at ${iso(f.scheduledAt)} (jobs ${f.jobId} and ${next.jobId})`);
        continue;
      }
      const attempts = [...attemptsOf(f.jobId)].sort((a, b) => a.execution - b.execution);
      const finished = ['succeeded', 'failed', 'cancelled'].includes(f.status);
      if (!finished) {
        if (next) flag('fire_unfinished', f.jobId, `fire of "${s.name}" at ${iso(f.scheduledAt)} is ${f.status}, yet a later one exists`);
        continue;
      }
      const skip = attempts.find((a) => a.outcome === 'skipped');
      let expected: number | null;
      if (skip) {
        fig.skipped++;
        if (!missed(cron, s, f.scheduledAt, skip.claimedAt)) flag('fire_skipped_not_missed', f.jobId, `fire of "${s.name}" at ${iso(f.scheduledAt)} skipped at its claim at ${iso(skip.claimedAt)}, not missed by '${s.catchUp}'`);
        expected = policyInstant(cron, s, f.scheduledAt, skip.claimedAt);
      } else {
        fig.ran++;
        const first = attempts[0];
        if (first && missed(cron, s, f.scheduledAt, first.claimedAt)) flag('fire_missed_ran', f.jobId, `fire of "${s.name}" at ${iso(f.scheduledAt)} ran though missed at its claim at ${iso(first.claimedAt)} ('${s.catchUp}')`);
        expected = cron.next(new Date(f.scheduledAt))?.getTime() ?? null;
      }
      if (next && next.scheduledAt !== expected) {
        flag('fire_gap', next.jobId, `after "${s.name}" at ${iso(f.scheduledAt)} (${skip ? 'skipped' : f.status}) came ${iso(next.scheduledAt)}, expected ${expected === null ? 'none' : iso(expected)}`);
      }
    }
  }
  return { violations, figures };
}
