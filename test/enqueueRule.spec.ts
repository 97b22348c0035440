// The enqueue rule (docs/reference.md, "Which definitions a client may enqueue") on acta/testing's
// memory ledger: the same refusal as on the database (test/db/enqueueRule.test.ts), without the
// hints a database gives.
import { createClient, defineJob, EnqueueRefusedError } from '../src';
import { memoryLedger, VirtualClock } from '../src/testing';

test('a client on a memory ledger refuses a name no worker declared, naming the fix; force, or the definition itself, enqueues it', async () => {
  const clock = new VirtualClock();
  const ledger = memoryLedger({ scheduler: clock.scheduler });
  const client = createClient({ ledger });
  const refused = clock.await(client.enqueue('report', {}));
  await expect(refused).rejects.toBeInstanceOf(EnqueueRefusedError);
  await expect(refused).rejects.toMatchObject({
    code: 'ACTA_UNKNOWN_DEFINITION',
    refusal: { namespace: 'default', name: 'report', missing: [], declaredHere: null },
    message: 'no worker has declared a job definition named "report" in namespace "default"; start its worker first, or to enqueue it anyway (a definition whose worker has not started yet): the enqueue option { force: true }',
  });
  await expect(clock.await(client.enqueue('report', {}, { force: true }))).resolves.toMatchObject({ id: '1', created: true });
  await expect(clock.await(client.enqueue(defineJob({ name: 'report', handler: () => undefined }), {}))).resolves.toMatchObject({ id: '2', created: true });
});
