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
