import { Cron } from 'croner';
import { ConfigError } from '../errors';

/**
 * A cron expression's fire instants in a time zone, by acta's DST rule (docs/schedules.md, "The
 * DST rule"; held by test/recurring/dst.spec.ts over two years in five zones):
 *
 * - The next fire is computed forward from the previous fire's scheduled instant, never from "now".
 * - Fixed hours (the hour field is neither `*` nor `*∕n`, e.g. `30 2 * * *`, `0 9,17 * * 1-5`):
 *   each matching wall time fires once. One that does not exist (spring forward) fires at the end
 *   of the gap, the first instant after it; one that exists twice (fall back) fires at the first.
 * - Hour `*` or `*∕n` (or croner's `?`, `?∕n`, its alias of `*`): every real instant whose wall time matches, nothing shifted: `0 * * * *`
 *   fires once per real hour, the repeated hour included, and never in a gap (Vixie cron's rule).
 * - A schedule fires at most once per instant: wall times that map to the same instant (several
 *   in one gap) are one fire.
 *
 * croner (https://github.com/hexagon/croner) parses the expression and walks its matching wall
 * times as if they were UTC (no zone involved); acta maps each wall time to real instants itself.
 */
export interface CronSchedule {
  /** The first fire instant strictly after `after`, or null when the expression never fires again. */
  next(after: Date): Date | null;
}

/** The longest offset change of a zone at one transition, with room (Antarctica/Troll: 2 h). */
const MAX_SHIFT_MS = 3 * 3_600_000;
const DAY_MS = 86_400_000;

/**
 * Parses `expr` (5 fields, or croner's 6 with seconds first) for `timeZone` (IANA). Throws
 * ConfigError for an expression croner refuses, an unknown zone, or a field form acta does not take
 * (croner's extensions `L`, `W`, `#`, `?` are allowed; nicknames such as `@daily` are not: the hour
 * field decides the DST rule).
 */
export function cronSchedule(expr: string, timeZone = 'UTC'): CronSchedule {
  if (typeof expr !== 'string' || expr.trim() === '') throw new ConfigError(`a schedule's cron must be a non-empty string, got ${JSON.stringify(expr)}`);
  const fields = expr.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) throw new ConfigError(`cron "${expr}" must have 5 fields (minute hour day month weekday) or 6 (seconds first), got ${fields.length}`);
  const offsetOf = zoneOffsets(timeZone);
  let walk: Cron;
  try {
    walk = new Cron(fields.join(' '), { timezone: 'UTC', paused: true });
  } catch (err) {
    throw new ConfigError(`cron "${expr}" is not valid: ${err instanceof Error ? err.message : String(err)}`);
  }
  // croner reads '?' as '*' (its README): hour '?' and '?/n' are hour '*' and '*/n' here too.
  const hour = fields[fields.length - 5 + 1].replace(/^\?/, '*');
  const fixedHours = !(hour === '*' || hour.startsWith('*/'));
  /** The first matching wall time (as UTC ms) at or after `wall`, or null. */
  const wallAtOrAfter = (wall: number): number | null => walk.nextRun(new Date(wall - 1))?.getTime() ?? null;
  return {
    next(after: Date): Date | null {
      // Real time is cut into segments of one UTC offset; within one, wall = instant + offset.
      let from = after.getTime() + 1; // the segment's first instant considered (inclusive)
      let offset = offsetOf(from);
      // Fixed hours: wall times below `floor` already happened before a fall-back (the repeat).
      let floor = fixedHours ? repeatFloor(from, offset, offsetOf) : -Infinity;
      for (let segments = 0; segments < 1_000; segments++) {
        const wall = wallAtOrAfter(Math.max(from + offset, floor));
        const candidate = wall === null ? null : wall - offset;
        const change = nextTransition(from, candidate ?? from + 400 * DAY_MS, offset, offsetOf);
        if (change === null) return candidate === null ? null : new Date(candidate);
        const later = offsetOf(change);
        // Fixed hours: a matching wall time skipped by a spring-forward gap fires at its end.
        if (fixedHours && later > offset) {
          const skipped = wallAtOrAfter(change + offset);
          if (skipped !== null && skipped < change + later) return new Date(change);
        }
        floor = fixedHours && later < offset ? change + offset : -Infinity;
        from = change;
        offset = later;
      }
      return null;
    },
  };
}

/** Fixed hours at `from`: the wall time below which the current repeat (after a fall-back within MAX_SHIFT_MS) already happened, else -Infinity. */
function repeatFloor(from: number, offset: number, offsetOf: (ms: number) => number): number {
  const before = offsetOf(from - MAX_SHIFT_MS);
  if (before <= offset) return -Infinity;
  const change = nextTransition(from - MAX_SHIFT_MS, from, before, offsetOf);
  return change === null ? -Infinity : change + before;
}

/** The first instant in (from, until] whose offset is not `offset` (to the second), or null. Sampled every 6 h: no zone changes twice within that. */
function nextTransition(from: number, until: number, offset: number, offsetOf: (ms: number) => number): number | null {
  const STEP = 6 * 3_600_000;
  let lo = from;
  for (;;) {
    const hi = Math.min(lo + STEP, until);
    if (hi <= lo) return null;
    if (offsetOf(hi) !== offset) {
      // Offsets are read per whole second, and transitions fall on whole seconds.
      let a = Math.floor(lo / 1_000) * 1_000;
      let b = Math.floor(hi / 1_000) * 1_000;
      while (b - a > 1_000) {
        const mid = a + Math.floor((b - a) / 2_000) * 1_000;
        if (offsetOf(mid) !== offset) b = mid;
        else a = mid;
      }
      return b;
    }
    if (hi === until) return null;
    lo = hi;
  }
}

const zones = new Map<string, (ms: number) => number>();

/** The zone's UTC offset (ms) at an instant; ConfigError for a zone Intl does not know. */
export function zoneOffsets(timeZone: string): (ms: number) => number {
  const known = zones.get(timeZone);
  if (known) return known;
  let format: Intl.DateTimeFormat;
  try {
    format = new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric' });
  } catch {
    throw new ConfigError(`timeZone "${timeZone}" is not an IANA time zone this runtime knows`);
  }
  const cache = new Map<number, number>();
  const offsetOf = (ms: number): number => {
    const second = Math.floor(ms / 1_000) * 1_000;
    const hit = cache.get(second);
    if (hit !== undefined) return hit;
    const p: Record<string, number> = {};
    for (const part of format.formatToParts(second)) if (part.type !== 'literal') p[part.type] = Number(part.value);
    const offset = Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second) - second;
    if (cache.size > 10_000) cache.clear();
    cache.set(second, offset);
    return offset;
  };
  zones.set(timeZone, offsetOf);
  return offsetOf;
}
