/*
 * The attempts figure the operator's tables show (acta jobs list's ATTEMPTS, the dashboard's job list
 * and job page): the attempts used, the running one counted. `attempts` of a job counts charged
 * attempts (docs/reference.md, getJob), and an attempt is charged when it ends, so a job running its
 * first attempt holds 0: `0/25` beside "executing" reads as "not started". An Executing job is on
 * attempt attempts + 1 (its handler's ctx.attempt), which it shows; the stored field and every JSON
 * output keep the charged count (test/cli.test.ts, "ATTEMPTS counts the running attempt").
 */
import type { JobStatus } from '../db/types';

/** The attempt an Executing job runs (charged + 1), else the charged attempts. */
export function attemptsUsed(job: { status: JobStatus; attempts: number }): number {
  return job.status === 'executing' ? job.attempts + 1 : job.attempts;
}

/** `used/limit` as a table cell: `1/25` for a job on its first attempt, `0/25` before it. */
export function attemptsCell(job: { status: JobStatus; attempts: number; effectiveMaxAttempts: number }): string {
  return `${attemptsUsed(job)}/${job.effectiveMaxAttempts}`;
}
