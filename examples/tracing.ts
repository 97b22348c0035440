/**
 * An OpenTelemetry-style span around each handler (docs/rx.md, "Operators in the pipeline"): the
 * `aroundHandler` hook opens a span when the run starts and ends it with the attempt's outcome.
 * The spans go to an in-memory list here; with OpenTelemetry, `tracer.startSpan` and
 * `span.setStatus` / `span.end` take their place. Run: `node dist/examples/tracing.js`.
 */
import { defer, filter, finalize, firstValueFrom, type Observable, take, tap, toArray } from 'rxjs';
import { type Attempt, type AttemptCompletion, connect, createClient, createWorker, defineJob, migrate } from '../src';

export interface Span {
  name: string;
  attributes: Record<string, string | number>;
  startMs: number;
  endMs?: number;
  status?: string;
}

/** An aroundHandler hook that records one span per attempt into `spans`. */
export function spanAroundHandler(spans: Span[], now: () => number = () => performance.now()) {
  return (attempt: Attempt, run: Observable<AttemptCompletion>): Observable<AttemptCompletion> =>
    defer(() => {
      const span: Span = { name: `job ${attempt.definition}`, attributes: { 'job.id': attempt.jobId, 'job.attempt': attempt.attempt }, startMs: now() };
      spans.push(span);
      return run.pipe(
        tap((completion) => (span.status = completion.outcome === 'succeeded' ? 'ok' : `error: ${completion.outcome} ${completion.error?.message ?? ''}`.trim())),
        finalize(() => (span.endMs = now())),
      );
    });
}

const flaky = defineJob<{ n: number }, { n: number }>({
  name: 'example-tracing-flaky',
  backoff: () => 10,
  handler: async ({ n }, { attempt }) => {
    if (n === 2 && attempt === 1) throw new Error('first try fails');
    return { n };
  },
});

async function main(): Promise<void> {
  const db = await connect();
  await migrate(db);
  const spans: Span[] = [];
  const worker = createWorker({ db, definitions: [flaky], hooks: { aroundHandler: spanAroundHandler(spans) } });
  const done = firstValueFrom(worker.events$.pipe(filter((e) => e.type === 'succeeded' && e.definition === flaky.name), take(3), toArray()));
  await worker.start();
  await createClient({ db }).enqueueMany([1, 2, 3].map((n) => ({ definition: flaky, payload: { n } })));
  await done;
  await worker.stop();
  await db.close();
  const lines = spans.map((s) => `${s.name} attempt ${s.attributes['job.attempt']}: ${s.status}, ended: ${s.endMs !== undefined && s.endMs >= s.startMs}`);
  for (const line of lines.sort()) console.log(line);
}

if (require.main === module) void main();
