/**
 * The CLI's option parsers: a bad value is refused before anything connects, with an
 * InvalidArgumentError that commander prints naming the flag (test/cli.test.ts, "an option out of
 * range is refused, naming the flag").
 */
import { InvalidArgumentError } from 'commander';
import { nameOption } from '../../config';

/** Integers in [min, max]; an empty value is refused (Number('') is 0). */
export const int =
  (min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER) =>
  (value: string) => {
    // Decimal digits only: Number() would also read '1e3', '0x10' and '1_000'-free forms a typo makes.
    const n = /^\s*[+-]?\d+\s*$/.test(value) ? Number(value) : Number.NaN;
    if (Number.isInteger(n) && n >= min && n <= max) return n;
    const range = max === Number.MAX_SAFE_INTEGER ? (min === Number.MIN_SAFE_INTEGER ? '' : ` ≥ ${min}`) : ` between ${min} and ${max}`;
    throw new InvalidArgumentError(`must be an integer${range}.`);
  };

/** A name as the API takes it (nameOption: non-empty, at most `maxBytes` of UTF-8, no \u0000). */
export const name = (maxBytes: number) => (value: string) => {
  try {
    return nameOption('it', value, maxBytes);
  } catch (err) {
    throw new InvalidArgumentError(`${(err as Error).message.replace(/^it /, '')}.`);
  }
};
