import { InvalidArgumentError } from 'commander';

/**
 * An ISO 8601 date-time with its offset: `Z` or `±hh:mm` (or `±hhmm`). Without one, JavaScript
 * reads a date-time in the process's zone but a date alone in UTC, so the zone would be a guess:
 * both are refused (docs/operating.md, "acta enqueue", "acta jobs").
 */
const WITH_OFFSET = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:Z|[+-](\d{2}):?(\d{2}))$/i;

/**
 * The option parser of an instant (`acta enqueue --run-at`, `acta jobs list --created-after`…): the
 * instant, or InvalidArgumentError (commander names the flag). A field out of its calendar range
 * (2026-02-30, 24:00, an offset of 25 hours) is refused: Date would roll it over into another instant.
 */
export function instantOption(value: string): Date {
  const m = WITH_OFFSET.exec(value.trim());
  const at = m ? new Date(value.trim()) : undefined;
  const inRange = (field: string | undefined, max: number, min = 0) => field === undefined || (Number(field) >= min && Number(field) <= max);
  const fieldsValid =
    m !== null &&
    inRange(m[2], 12, 1) &&
    inRange(m[3], new Date(Date.UTC(Number(m[1]), Number(m[2]), 0)).getUTCDate(), 1) &&
    inRange(m[4], 23) &&
    inRange(m[5], 59) &&
    inRange(m[6], 59) &&
    inRange(m[7], 23) &&
    inRange(m[8], 59);
  if (at === undefined || Number.isNaN(at.getTime()) || !fieldsValid) {
    throw new InvalidArgumentError('must be an ISO 8601 date-time with its offset, e.g. 2026-12-01T09:00:00Z or 2026-12-01T10:00:00+01:00 (without one the zone would be a guess).');
  }
  return at;
}
