/**
 * The README's API example, type-checked in CI. Run: `node dist/examples/quickstart.js`
 * (PGlite in ./.acta/quickstart) or with DATABASE_URL=postgres://... for a server.
 */
import { connect, createClient, createWorker, defineJob, migrate } from '../src';

const sendEmail = defineJob<{ to: string; subject: string }, { messageId: string }>({
  name: 'send-email',
  maxAttempts: 5,
  backoff: { delayMs: 1_000, factor: 2, maxDelayMs: 60_000 },
  timeoutMs: 30_000,
  async handler(payload, { signal, attempt, logger }) {
    logger.info({ to: payload.to }, `sending (attempt ${attempt})`);
    signal.throwIfAborted(); // stop work when the attempt is cancelled
    return { messageId: `msg-${payload.to}` };
  },
});

async function main(): Promise<void> {
  // DATABASE_URL when set, else PGlite in ./.acta/quickstart (an explicit dataDir would win over DATABASE_URL).
  const db = await connect(process.env.DATABASE_URL ? {} : { dataDir: '.acta/quickstart' });
  await migrate(db);

  const client = createClient({ db, definitions: [sendEmail] });
  // The definition itself (its payload type is checked) or its name.
  const { id } = await client.enqueue(sendEmail, { to: 'ada@example.com', subject: 'hi' }, { idempotencyKey: 'welcome:ada' });
  await client.enqueueMany([
    { definition: sendEmail, payload: { to: 'bob@example.com', subject: 'later' }, runAt: new Date(Date.now() + 1_000) },
    { definition: 'send-email', payload: { to: 'eve@example.com', subject: 'urgent' }, priority: 10 },
  ]);

  const worker = createWorker({ db, definitions: [sendEmail] });
  await worker.start();
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  await worker.stop();

  // The job, its result and its attempts (null if the namespace has no such job).
  const job = await client.getJob<{ to: string }, { messageId: string }>(id);
  console.log(job?.status, job?.result?.messageId, job?.executions.map((e) => e.outcome));
  await db.close();
}

if (require.main === module) void main();
