// `acta enqueue --run-at` (src/ops/cli/runAt.ts; docs/operating.md): an ISO 8601 date-time with its
// offset is the instant it names; one without an offset, or a date alone, is refused rather than
// read in a zone the user did not choose (the process's local one, or UTC for a date alone).
import { InvalidArgumentError } from 'commander';
import { runAtOption } from '../src/ops/cli/runAt';

test('a date-time with its offset is the instant it names, whatever the process zone', () => {
  expect(runAtOption('2027-01-01T00:00:00Z').toISOString()).toBe('2027-01-01T00:00:00.000Z');
  expect(runAtOption('2027-01-01T09:30:00.250+01:00').toISOString()).toBe('2027-01-01T08:30:00.250Z');
  expect(runAtOption('2027-01-01T00:00-0530').toISOString()).toBe('2027-01-01T05:30:00.000Z');
  expect(runAtOption('2027-01-01 00:00:00z').toISOString()).toBe('2027-01-01T00:00:00.000Z');
});

test('a date-time without an offset, a date alone, or anything else is refused', () => {
  for (const value of ['2027-01-01T00:00:00', '2027-01-01', '2027-01-01T00:00', 'tomorrow', '2027-13-01T00:00:00Z', '']) {
    expect(() => runAtOption(value)).toThrow(InvalidArgumentError);
  }
  expect(() => runAtOption('2027-01-01T00:00:00')).toThrow(/must be an ISO 8601 date-time with its offset/);
});
