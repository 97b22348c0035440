/**
 * acta's DST rule (docs/schedules.md, "The DST rule"; src/recurring/cron.ts), held over two years (every 15 minutes: over 2026)
 * in five zones. The expected fires are derived here without croner: walking real instants and
 * reading their wall time with Intl.DateTimeFormat. The walk steps 15 minutes: every expression
 * below fires on a 15-minute wall boundary, and every transition of these zones in 2026-2027
 * (Lord_Howe's 30-minute shift included) is on one, so no fire or gap end lies between steps.
 */
import { cronSchedule } from '../../src/recurring/cron';

const ZONES = ['Europe/Berlin', 'America/New_York', 'Australia/Lord_Howe', 'America/Santiago', 'UTC'];
const START = Date.UTC(2026, 0, 1);
const END = Date.UTC(2028, 0, 1);
const STEP = 15 * 60_000;
/** Fires compared inside [START + MARGIN, END - MARGIN]: the walk covers every wall day whose fires can land there. */
const MARGIN = 2 * 86_400_000;

interface Field { matches(v: number): boolean }
const field = (text: string): Field => {
  if (text === '*') return { matches: () => true };
  const step = /^\*\/(\d+)$/.exec(text);
  if (step) return { matches: (v) => v % Number(step[1]) === 0 };
  const values = text.split(',').map(Number);
  return { matches: (v) => values.includes(v) };
};

/** `until`: the last instant compared (the every-15-minutes expression over 2026 only: its two years
 * cost most of this file's time, and 2026 holds every zone's transitions here). */
interface Expr { cron: string; fixedHours: boolean; minute: Field; hour: Field; day: Field; until: number }
const expr = (cron: string, until = END - MARGIN): Expr => {
  const [minute, hour, day] = cron.split(' ');
  return { cron, fixedHours: !(hour === '*' || hour.startsWith('*/')), minute: field(minute), hour: field(hour), day: field(day), until };
};

const EXPRESSIONS = [
  expr('30 2 * * *'), // daily, in Berlin's and New York's spring gap, Lord_Howe's shift
  expr('45 1 * * *'), // daily, in New York's and Lord_Howe's repeated fall-back times
  expr('0 0 * * *'), // daily at midnight: Santiago's gap and repeat are at midnight
  expr('0 * * * *'), // hourly
  expr('*/15 * * * *', Date.UTC(2027, 0, 1)), // every 15 minutes
  expr('30 2 1 * *'), // monthly
  expr('0 0 1 * *'), // monthly at midnight
];

interface Wall { y: number; mo: number; d: number; h: number; mi: number; ms: number }

/** Every walked instant with its wall time in the zone (ms of the wall time read as UTC). */
function walk(zone: string): { at: number; wall: Wall }[] {
  const format = new Intl.DateTimeFormat('en-US', { timeZone: zone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric' });
  const out: { at: number; wall: Wall }[] = [];
  for (let at = START; at <= END; at += STEP) {
    const p: Record<string, number> = {};
    for (const part of format.formatToParts(at)) if (part.type !== 'literal') p[part.type] = Number(part.value);
    out.push({ at, wall: { y: p.year, mo: p.month, d: p.day, h: p.hour, mi: p.minute, ms: Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute) } });
  }
  return out;
}

/** The rule, applied to the walk: hour `*`/`*∕n` every matching real instant; fixed hours each matching wall time once, at its first instant or, in a gap, the first instant after it. */
function expected(e: Expr, walked: { at: number; wall: Wall }[]): number[] {
  const fires = new Set<number>();
  if (!e.fixedHours) {
    for (const { at, wall } of walked) if (e.minute.matches(wall.mi) && e.hour.matches(wall.h) && e.day.matches(wall.d)) fires.add(at);
  } else {
    // The first walked instant of each wall time (a fall-back repeats some): the walk is in time order.
    const firstAt = new Map<number, number>();
    for (const x of walked) if (!firstAt.has(x.wall.ms)) firstAt.set(x.wall.ms, x.at);
    const first = walked[0].wall;
    for (let day = Date.UTC(first.y, first.mo - 1, first.d); day <= END; day += 86_400_000) {
      const date = new Date(day);
      if (!e.day.matches(date.getUTCDate())) continue;
      for (let h = 0; h < 24; h++) {
        for (let mi = 0; mi < 60; mi += 15) {
          if (!e.hour.matches(h) || !e.minute.matches(mi)) continue;
          const wall = day + h * 3_600_000 + mi * 60_000;
          // In a gap (no instant has this wall time): the first instant after it.
          const at = firstAt.get(wall) ?? walked.find((x) => x.wall.ms > wall)?.at;
          if (at !== undefined) fires.add(at);
        }
      }
    }
  }
  return [...fires].filter((t) => t >= START + MARGIN && t <= e.until).sort((a, b) => a - b);
}

function actual(e: Expr, zone: string): number[] {
  const schedule = cronSchedule(e.cron, zone);
  const fires: number[] = [];
  let t: Date | null = new Date(START + MARGIN - 1);
  while ((t = schedule.next(t)) && t.getTime() <= e.until) fires.push(t.getTime());
  return fires;
}

describe.each(ZONES)('the DST rule in %s over 2026-2027', (zone) => {
  const walked = walk(zone);
  it.each(EXPRESSIONS.map((e) => [e.cron, e] as const))('%s fires exactly the expected instants', (_cron, e) => {
    expect(actual(e, zone).map((t) => new Date(t).toISOString())).toEqual(expected(e, walked).map((t) => new Date(t).toISOString()));
  });
});

describe('the DST rule at known transitions', () => {
  const fires = (cron: string, zone: string, from: string, n: number) => {
    const s = cronSchedule(cron, zone);
    const out: string[] = [];
    let t: Date | null = new Date(from);
    for (let i = 0; i < n && (t = s.next(t)); i++) out.push(t.toISOString());
    return out;
  };
  it('New York 02:30 fires at 03:00 EDT on the spring-forward day, once', () => {
    expect(fires('30 2 * * *', 'America/New_York', '2026-03-07T12:00:00Z', 3)).toEqual(['2026-03-08T07:00:00.000Z', '2026-03-09T06:30:00.000Z', '2026-03-10T06:30:00.000Z']);
  });
  it('New York 01:30 fires once on the fall-back day, at the first 01:30 (EDT)', () => {
    expect(fires('30 1 * * *', 'America/New_York', '2026-10-31T12:00:00Z', 2)).toEqual(['2026-11-01T05:30:00.000Z', '2026-11-02T06:30:00.000Z']);
  });
  it('hourly fires once per real hour on the fall-back day: 25 fires', () => {
    const day = fires('0 * * * *', 'America/New_York', '2026-11-01T03:59:59Z', 25);
    expect(day[0]).toBe('2026-11-01T04:00:00.000Z');
    expect(day[24]).toBe('2026-11-02T04:00:00.000Z');
    expect(new Set(day).size).toBe(25);
  });
  it("hour '?' (croner's alias of '*') and '?/n' are hour '*' and '*/n': the repeated hour fires too on the fall-back day", () => {
    expect(fires('0 ? * * *', 'America/New_York', '2026-11-01T03:59:59Z', 25)).toEqual(fires('0 * * * *', 'America/New_York', '2026-11-01T03:59:59Z', 25));
    expect(fires('0 ?/2 * * *', 'America/New_York', '2026-11-01T03:59:59Z', 13)).toEqual(fires('0 */2 * * *', 'America/New_York', '2026-11-01T03:59:59Z', 13));
    expect(fires('0 0 ? * * *', 'America/New_York', '2026-11-01T03:59:59Z', 25)).toEqual(fires('0 0 * * * *', 'America/New_York', '2026-11-01T03:59:59Z', 25));
  });
  it('Lord_Howe 02:15 on the 30-minute spring shift fires at 02:30, the end of the gap', () => {
    // 2026-10-04 02:00 +10:30 becomes 02:30 +11:00 (15:30 UTC on the 3rd).
    expect(fires('15 2 * * *', 'Australia/Lord_Howe', '2026-10-03T00:00:00Z', 2)).toEqual(['2026-10-03T15:30:00.000Z', '2026-10-04T15:15:00.000Z']);
  });
  it('six fields: every second', () => {
    expect(fires('* * * * * *', 'UTC', '2026-01-01T00:00:00.500Z', 2)).toEqual(['2026-01-01T00:00:01.000Z', '2026-01-01T00:00:02.000Z']);
  });
  it('refuses a bad expression or zone with ConfigError', () => {
    expect(() => cronSchedule('61 * * * *')).toThrow(expect.objectContaining({ name: 'ConfigError' }));
    expect(() => cronSchedule('* * *')).toThrow(/5 fields/);
    expect(() => cronSchedule('0 * * * *', 'Mars/Olympus')).toThrow(/IANA/);
  });
});
