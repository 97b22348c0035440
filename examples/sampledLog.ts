/**
 * A sampling logger of completions (docs/rx.md, "Operators in the pipeline"): the `beforeWrite`
 * hook sees every completion before it is written; this one logs every failure and one success
 * in ten. What the hook emits is ignored: it cannot hold or drop a completion. Run:
 * `node dist/examples/sampledLog.js`.
 */
import { filter, firstValueFrom, type Observable, take, tap, toArray } from 'rxjs';
import { type AttemptCompletion, connect, createClient, createWorker, defineJob, migrate } from '../src';

/** Logs, with `log`, every completion that is not a success, and the first success of every `every`. */
export function sampledLog(every: number, log: (line: string) => void) {
  let successes = 0;
  return (completions: Observable<AttemptCompletion>): Observable<AttemptCompletion> =>
    completions.pipe(
      filter((c) => c.outcome !== 'succeeded' || successes++ % every === 0),
      tap((c) => log(`${c.outcome}: job ${c.attempt.jobId} (${c.attempt.definition}, attempt ${c.attempt.attempt})${c.error ? `: ${c.error.name}: ${c.error.message}` : ''}`)),
    );
}

const work = defineJob<{ n: number }, void>({
  name: 'example-sampled-work',
  maxAttempts: 1,
  handler: async ({ n }) => {
    if (n === 13) throw new Error('thirteen');
  },
});

async function main(): Promise<void> {
  const db = await connect();
  await migrate(db);
  const logged: string[] = [];
  const worker = createWorker({ db, definitions: [work], hooks: { beforeWrite: sampledLog(10, (line) => logged.push(line)) } });
  const jobs = Array.from({ length: 25 }, (_, n) => ({ definition: work, payload: { n } }));
  const done = firstValueFrom(worker.events$.pipe(filter((e) => (e.type === 'succeeded' || e.type === 'failed') && e.definition === work.name), take(jobs.length), toArray()));
  await worker.start();
  await createClient({ db }).enqueueMany(jobs);
  const ended = await done;
  await worker.stop();
  await db.close();
  for (const line of logged) console.log(line.replace(/job \d+/, 'job <id>'));
  console.log(`logged ${logged.length} of ${ended.length} completions`);
}

if (require.main === module) void main();
