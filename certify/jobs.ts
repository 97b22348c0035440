/**
 * The certification job, run by `acta worker dist/certify/jobs.js` processes. Each job runs 2–3
 * recorded steps; each step's function first logs one row in certify.effects (outside the step's
 * record, as any external effect would be), then does a little random work. The checker compares
 * effects with recorded steps: a recorded step must never run again.
 */
import { Pool } from 'pg';
import { defineJob } from '../src';

const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 4 });
pool.on('error', () => undefined);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const certifyJob = defineJob<{ steps: number; workMs: number }, { sum: number }>({
  name: 'certify',
  maxAttempts: 50,
  backoff: { delayMs: 100, maxDelayMs: 2_000 },
  async handler({ steps, workMs }, ctx) {
    let sum = 0;
    for (let k = 1; k <= steps; k++) {
      sum += await ctx.step(`s${k}`, async () => {
        await pool.query('insert into certify.effects (job_id, step, execution) values ($1, $2, $3)', [ctx.jobId, `s${k}`, ctx.execution]);
        await sleep(Math.random() * workMs);
        return k;
      });
    }
    return { sum };
  },
});

export const definitions = [certifyJob];
