import { INT8_MAX } from '../db/types';
import { ConfigError } from '../errors';

/**
 * A job id as the statement takes it (decimal text), or null for a well-formed id no job can have
 * (beyond bigint). Throws ConfigError for anything but a positive integer (string of digits,
 * safe integer, bigint).
 */
export function jobIdText(id: unknown): string | null {
  let n: bigint;
  if (typeof id === 'string' && /^[0-9]+$/.test(id)) {
    const digits = id.replace(/^0+(?=[0-9])/, ''); // leading zeros, any number of them
    if (digits.length > 19) return null; // beyond bigint (19 digits), without parsing a long text
    n = BigInt(digits);
  } else if (typeof id === 'number' && Number.isSafeInteger(id)) n = BigInt(id);
  else if (typeof id === 'bigint') n = id;
  else throw new ConfigError(`a job id is a positive integer (the decimal string enqueue returned, a safe integer or a bigint), got ${shown(id)}`);
  if (n < 1n) throw new ConfigError(`a job id is a positive integer, got ${n}`);
  return n > INT8_MAX ? null : n.toString();
}

/** A value as an error message shows it: at most 80 characters; never throws (an object without toString, or whose toString throws). */
export function shown(value: unknown): string {
  try {
    return (typeof value === 'string' ? JSON.stringify(value) : String(value)).slice(0, 80);
  } catch {
    return `a value of type ${typeof value}`;
  }
}
