// The CLI's instants, `acta enqueue --run-at` and the `acta jobs` range filters
// (src/ops/cli/instant.ts; docs/operating.md): an ISO 8601 date-time with its offset is the instant
// it names; one without an offset, or a date alone, is refused rather than read in a zone the user
// did not choose (the process's local one, or UTC for a date alone).
import { Command, InvalidArgumentError } from 'commander';
import { registerAdminCommands } from '../src/ops/cli/admin';
import { instantOption } from '../src/ops/cli/instant';

test('a date-time with its offset is the instant it names, whatever the process zone', () => {
  expect(instantOption('2027-01-01T00:00:00Z').toISOString()).toBe('2027-01-01T00:00:00.000Z');
  expect(instantOption('2027-01-01T09:30:00.250+01:00').toISOString()).toBe('2027-01-01T08:30:00.250Z');
  expect(instantOption('2027-01-01T00:00-0530').toISOString()).toBe('2027-01-01T05:30:00.000Z');
  expect(instantOption('2027-01-01 00:00:00z').toISOString()).toBe('2027-01-01T00:00:00.000Z');
});

test('a date-time without an offset, a date alone, or anything else is refused', () => {
  for (const value of ['2027-01-01T00:00:00', '2027-01-01', '2027-01-01T00:00', 'tomorrow', '2027-13-01T00:00:00Z', '']) {
    expect(() => instantOption(value)).toThrow(InvalidArgumentError);
  }
  expect(() => instantOption('2027-01-01T00:00:00')).toThrow(/must be an ISO 8601 date-time with its offset/);
});

test('a field out of its calendar range is refused, not rolled over into another instant', () => {
  for (const value of ['2026-02-30T09:00:00Z', '2026-04-31T23:30:00+01:00', '2027-02-29T00:00Z', '2027-00-10T00:00Z', '2027-01-00T00:00Z', '2027-01-01T24:00:00Z', '2027-01-01T10:60Z', '2027-01-01T10:00:60Z', '2027-01-01T10:00+24:00', '2027-01-01T10:00+01:60']) {
    expect(() => instantOption(value)).toThrow(InvalidArgumentError);
  }
  // The last day of each month, a leap day and the widest offsets are kept.
  expect(instantOption('2028-02-29T23:59:59Z').toISOString()).toBe('2028-02-29T23:59:59.000Z');
  expect(instantOption('2027-04-30T00:00+14:00').toISOString()).toBe('2027-04-29T10:00:00.000Z');
  expect(instantOption('2027-12-31T23:59-12:00').toISOString()).toBe('2028-01-01T11:59:00.000Z');
});

test('acta jobs list reads its range filters the same way: a date-time without an offset is refused before anything runs', async () => {
  const cli = new Command().exitOverride();
  const errors: string[] = [];
  cli.configureOutput({ writeErr: (text) => void errors.push(text), writeOut: () => undefined });
  const withClient = jest.fn();
  registerAdminCommands(cli, withClient as never);
  for (const flag of ['--created-after', '--created-before', '--finished-after', '--finished-before']) {
    errors.length = 0;
    await expect(cli.parseAsync(['node', 'acta', 'jobs', 'list', flag, '2027-01-01T00:00:00'])).rejects.toThrow(/with its offset/);
    expect(errors.join('')).toContain(flag);
  }
  expect(withClient).not.toHaveBeenCalled();
});
