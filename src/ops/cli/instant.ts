import { InvalidArgumentError } from 'commander';

/**
 * An ISO 8601 date-time with its offset: `Z` or `±hh:mm` (or `±hhmm`). Without one, JavaScript
 * reads a date-time in the process's zone but a date alone in UTC, so the zone would be a guess:
 * both are refused (docs/operating.md, "acta enqueue", "acta jobs").
 */
const WITH_OFFSET = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/i;

/** The option parser of an instant (`acta enqueue --run-at`, `acta jobs list --created-after`…): the instant, or InvalidArgumentError (commander names the flag). */
export function instantOption(value: string): Date {
  const at = WITH_OFFSET.test(value.trim()) ? new Date(value.trim()) : undefined;
  if (at === undefined || Number.isNaN(at.getTime())) {
    throw new InvalidArgumentError('must be an ISO 8601 date-time with its offset, e.g. 2026-12-01T09:00:00Z or 2026-12-01T10:00:00+01:00 (without one the zone would be a guess).');
  }
  return at;
}
