// injectFaults reads its arguments strictly (src/testing/faults.ts): a fault that could never
// apply, or one of whose options would be dropped, is refused with ConfigError when it is set.
import { ConfigError } from '../../src';
import { injectFaults, memoryLedger } from '../../src/testing';

const faults = () => injectFaults(memoryLedger());

test('fail takes either times or forMs: both, neither, or an unknown option is refused', () => {
  const f = faults();
  expect(() => f.fail('readJob', { times: 1, forMs: 100 } as never)).toThrow(new ConfigError('fail: give either times or forMs, not both (nor neither)'));
  expect(() => f.fail('readJob', {} as never)).toThrow(ConfigError);
  expect(() => f.fail('readJob', { time: 1 } as never)).toThrow('unknown fail option "time"');
  expect(() => f.fail('readJob', null as never)).toThrow(ConfigError);
  expect(() => f.fail('readJob', { times: 2 })).not.toThrow();
  expect(() => f.fail('readJob', { forMs: 50 })).not.toThrow();
});

test('loseLease, deliverTwice and crashAfterStep take a job id as enqueue returned it (or a safe integer, a bigint): anything else is refused', () => {
  const f = faults();
  for (const bad of ['x', '', -1, 1.5, null, undefined, {}, '99999999999999999999']) {
    expect(() => f.loseLease(bad as never)).toThrow(ConfigError);
    expect(() => f.deliverTwice(bad as never)).toThrow(ConfigError);
  }
  expect(() => f.loseLease('x')).toThrow(/^loseLease: a job id is a positive integer/);
  expect(() => f.crashAfterStep('charge', { jobId: 'x' })).toThrow(/^crashAfterStep: a job id/);
  expect(() => f.crashAfterStep('charge', { job: '1' } as never)).toThrow('unknown crashAfterStep option "job"');
  expect(() => f.loseLease('12')).not.toThrow();
  expect(() => f.deliverTwice(7 as never)).not.toThrow();
  expect(() => f.crashAfterStep('charge', { jobId: '3' })).not.toThrow();
});

test('every ledger call fails when told to, with the transient InjectedFaultError, and writes nothing; then works again', async () => {
  const f = faults();
  const calls: [string, () => Promise<unknown>][] = [
    ['enqueueJobs', () => f.ledger.enqueueJobs('default', { definitions: ['d'], payloads: ['1'], priorities: [null], runAts: [null], maxAttempts: [null], idempotencyKeys: [null] })],
    ['publishEvents', () => f.ledger.publishEvents('default', { topics: ['t'], messages: ['1'], keys: [null] })],
    ['fanOutEvents', () => f.ledger.fanOutEvents({ namespace: 'default', limit: 10, timeoutMs: 1_000 })],
    ['pause', () => f.ledger.pause({ namespace: 'default' })],
    ['resume', () => f.ledger.resume({ namespace: 'default' })],
    ['listPauses', () => f.ledger.listPauses('default')],
    ['sendSignal', () => f.ledger.sendSignal({ namespace: 'default', jobId: '1', jobKey: null, name: 'go', payloadJson: 'null', idempotencyKey: null })],
    ['readChildren', () => f.ledger.readChildren('1', [])],
  ];
  f.fail(calls.map(([name]) => name) as never, { times: 1 });
  for (const [name, call] of calls) await expect(call()).rejects.toMatchObject({ name: 'InjectedFaultError', code: '08006', message: expect.stringContaining(`${name} failed`) });
  expect(await f.ledger.listPauses('default')).toEqual([]); // the failed pause wrote nothing
  for (const [, call] of calls) await expect(call()).resolves.not.toThrow();
});

test("a lost lease fences the attempt's spawns and progress as it fences its steps: answered stale or not written", async () => {
  const f = faults();
  const workerId = '00000000-0000-4000-8000-000000000001';
  await f.ledger.registerWorker({ workerId, namespace: 'default', hostname: 'h', pid: 1, definitions: ['p'], maxAttempts: [null], leaseMs: 60_000, build: null, policies: {} });
  await f.ledger.enqueueJobs('default', { definitions: ['p'], payloads: ['1'], priorities: [null], runAts: [null], maxAttempts: [null], idempotencyKeys: [null] });
  const [row] = (await f.ledger.claimJobs({ namespace: 'default', workerId, definitions: ['p'], limit: 1, leaseMs: 60_000 })).rows;
  f.loseLease(row.id);
  const spawn = { workerId, parentId: row.id, execution: row.execution, step: 'acta:spawn:0', rows: { definitions: ['c'], payloads: ['1'], priorities: [null], runAts: [null], maxAttempts: [null], idempotencyKeys: [null] }, failParent: [false] };
  expect(await f.ledger.spawnChildren(spawn)).toEqual({ status: 'stale', result: null });
  expect(await f.ledger.reportProgress(workerId, [{ id: row.id, execution: row.execution, json: '50' }])).toBe(0);
  expect(await f.ledger.claimJobs({ namespace: 'default', workerId, definitions: ['c'], limit: 5, leaseMs: 60_000 })).toMatchObject({ rows: [] });
});
