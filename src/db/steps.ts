import type { Queryable } from './Db';
import type { JobId, StepRecord } from './types';

/** acta.record_step: record a step for the attempt (job, execution), fenced. `resultJson` is checked JSON text. */
export async function recordStep(
  q: Queryable,
  args: { workerId: string; jobId: JobId; execution: number; name: string; resultJson: string },
): Promise<StepRecord> {
  const { rows } = await q.query<{ status: StepRecord['status']; result: unknown }>(
    'select * from acta.record_step($1, $2, $3, $4, $5::jsonb)',
    [args.workerId, args.jobId, args.execution, args.name, args.resultJson],
  );
  return rows[0];
}

/** Every recorded step of a job: name → result. */
export async function loadSteps(q: Queryable, jobId: JobId): Promise<Map<string, unknown>> {
  const { rows } = await q.query<{ name: string; result: unknown }>('select name, result from acta.steps where job_id = $1', [jobId]);
  return new Map(rows.map((r) => [r.name, r.result]));
}
