import { intOption, knownKeys, MAX_KEY_BYTES, MAX_NAME_BYTES, nameOption } from '../config';
import { type ClaimedFire, type DeclaredSchedule, INT4_MAX } from '../db/types';
import { ConfigError } from '../errors';
import { toJsonText } from '../json';
import { cronSchedule, type CronSchedule } from './cron';

/**
 * A cron schedule of a definition (docs/schedules.md): declared in code on `defineJob({ schedule })`
 * or added at runtime (client.schedules.add). Each fire is a job of the definition with `payload`,
 * due at its scheduled instant, which the handler gets as `ctx.scheduledAt`.
 */
export interface ScheduleSpec {
  /** Stable name, unique in the namespace (default: the definition's name). */
  name?: string;
  /** 5 fields (minute hour day month weekday), or croner's 6 with seconds first. */
  cron: string;
  /** IANA zone the cron's wall times are read in (default 'UTC'); DST by docs/schedules.md. */
  timeZone?: string;
  /** The fired job's payload (default null). */
  payload?: unknown;
  /** Missed fires (every worker down, or a fire claimed after its successor was due): 'latest' (default) one fire, for the latest missed instant; 'all' each one within catchUpWindowMs; 'none' no fire, the next on schedule. */
  catchUp?: 'latest' | 'all' | 'none';
  /** With 'all': how far back missed fires are run, ms (default 86,400,000 = 1 day). */
  catchUpWindowMs?: number;
  /** Each fire's priority, as enqueue's (default 0): a higher one is claimed ahead of a backlog due before its instant. */
  priority?: number;
  /**
   * Each fire's policy keys, as enqueue's options (migration 0021): each given one wins, else the
   * definition's `concurrency.key`, `rate.key` and `lane` functions compute it from `payload`, so
   * fires are admitted by the definition's limits like enqueued jobs (docs/schedules.md, "Policies").
   */
  concurrencyKey?: string;
  rateKey?: string;
  lane?: string;
}

/** 'all' without a window: missed fires of the last day run. */
export const DEFAULT_CATCH_UP_WINDOW_MS = 86_400_000;

const SPEC_KEYS = ['name', 'cron', 'timeZone', 'payload', 'catchUp', 'catchUpWindowMs', 'priority', 'concurrencyKey', 'rateKey', 'lane'];

/** Checks and normalizes one spec (ConfigError naming `where`); the cron and zone are parsed once here. */
export function checkScheduleSpec(where: string, spec: unknown, defaultName: string): DeclaredSchedule {
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) throw new ConfigError(`${where} must be an object { cron, name?, timeZone?, payload?, catchUp?, catchUpWindowMs?, priority?, concurrencyKey?, rateKey?, lane? }, got ${JSON.stringify(spec) ?? typeof spec}`);
  knownKeys(`field of ${where}`, spec, SPEC_KEYS);
  const s = spec as ScheduleSpec;
  const name = s.name === undefined ? defaultName : nameOption(`the name of ${where}`, s.name, MAX_NAME_BYTES);
  const typedZone = s.timeZone ?? 'UTC';
  if (typeof typedZone !== 'string') throw new ConfigError(`timeZone of ${where} must be an IANA zone name, got ${JSON.stringify(typedZone)}`);
  // A cron with no instant from now on (a 30 February) is refused where it is written, not left unarmed.
  if (cronSchedule(s.cron, typedZone).next(new Date()) === null) throw new ConfigError(`${where}: cron ${JSON.stringify(s.cron)} in ${typedZone} has no instant from now on: it would never fire`);
  // Stored and listed by its canonical name ('europe/berlin' is Europe/Berlin, 'Etc/UTC' is UTC), so
  // one zone is one spec whatever its spelling (test/recurring/runtime.test.ts, "canonical IANA name").
  const timeZone = new Intl.DateTimeFormat(undefined, { timeZone: typedZone }).resolvedOptions().timeZone;
  const catchUp = s.catchUp ?? 'latest';
  if (!['latest', 'all', 'none'].includes(catchUp)) throw new ConfigError(`catchUp of ${where} must be 'latest', 'all' or 'none', got ${JSON.stringify(catchUp)}`);
  if (s.catchUpWindowMs !== undefined && catchUp !== 'all') throw new ConfigError(`catchUpWindowMs of ${where} goes with catchUp: 'all'`);
  const catchUpWindowMs = catchUp === 'all' ? intOption(`catchUpWindowMs of ${where}`, s.catchUpWindowMs ?? DEFAULT_CATCH_UP_WINDOW_MS, 0) : null;
  const priority = intOption(`priority of ${where}`, s.priority ?? 0, -INT4_MAX, INT4_MAX);
  const payload = s.payload === undefined ? null : JSON.parse(toJsonText(s.payload));
  const key = (what: 'concurrencyKey' | 'rateKey' | 'lane') => (s[what] === undefined ? null : nameOption(`${what} of ${where}`, s[what], MAX_KEY_BYTES));
  return { name, cron: s.cron.trim().split(/\s+/).join(' '), timeZone, payload, catchUp, catchUpWindowMs, priority, concurrencyKey: key('concurrencyKey'), rateKey: key('rateKey'), lane: key('lane') };
}

/** acta's system schedules, each its definition's own (src/recurring/system.ts: RETENTION_NAME, ALERTS_NAME, OUTBOX_NAME). */
const SYSTEM_SCHEDULES = ['sys.retention', 'sys.alerts', 'sys.outbox'];

/** A definition's `schedule` field: one spec or several, names unique. */
export function checkSchedules(definition: string, value: unknown): DeclaredSchedule[] {
  const specs = Array.isArray(value) ? value : [value];
  const out = specs.map((spec, i) => checkScheduleSpec(`schedule${Array.isArray(value) ? `[${i}]` : ''} of definition "${definition}"`, spec, definition));
  const names = new Set<string>();
  for (const s of out) {
    // Names beginning "sys." are acta's system schedules, each declared by its own definition of that
    // name (src/recurring/system.ts): another definition under one would take the slot's fires, and
    // one of yours named "sys.…" would be told to be a worker option's (test/testing/schedules.spec.ts).
    if (s.name.startsWith('sys.') && !(s.name === definition && SYSTEM_SCHEDULES.includes(definition))) throw new ConfigError(`schedule "${s.name}" of definition "${definition}": names beginning "sys." are acta's system schedules (sys.retention, sys.alerts, sys.outbox), declared by worker options; give it another name`);
    if (names.has(s.name)) throw new ConfigError(`definition "${definition}" declares two schedules named "${s.name}": give each a name`);
    names.add(s.name);
  }
  return out;
}

/** The canonical name this runtime's ICU gives a zone, or null: a zone it does not know. */
function canonicalZone(timeZone: string): string | null {
  try {
    return new Intl.DateTimeFormat(undefined, { timeZone }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
}

/**
 * The zone to write for a declared one: the stored spelling when both name the same zone by this
 * runtime's ICU, else the declared. ICU versions differ on a link's canonical name (Asia/Calcutta
 * or Asia/Kolkata), and acta.put_schedule / acta.reconcile_schedules compare spellings: a new Node
 * must not make an unchanged schedule "changed", which deletes its fire not yet due and arms the
 * next instant after now(), or arms that instant at its due or running fire's end
 * (test/recurring/runtime.test.ts, "an older ICU's name").
 */
export function zoneAsStored(declared: string, stored: string | undefined): string {
  if (stored === undefined || stored === declared) return declared;
  const canonical = canonicalZone(declared);
  return canonical !== null && canonical === canonicalZone(stored) ? stored : declared;
}

/** `schedules` with each zone as `storedZones` (by schedule name) spells it, where it is the same zone (zoneAsStored). */
export function schedulesAsStored(schedules: DeclaredSchedule[], storedZones: Map<string, string>): DeclaredSchedule[] {
  return schedules.map((s) => {
    const timeZone = zoneAsStored(s.timeZone, storedZones.get(s.name));
    return timeZone === s.timeZone ? s : { ...s, timeZone };
  });
}

const parsed = new Map<string, CronSchedule>();
/** The cron of a schedule, parsed once per (expression, zone) in this process. */
export function scheduleOf(cron: string, timeZone: string): CronSchedule {
  const key = `${timeZone}\u0000${cron}`;
  let s = parsed.get(key);
  if (!s) {
    s = cronSchedule(cron, timeZone);
    if (parsed.size > 1_000) parsed.clear();
    parsed.set(key, s);
  }
  return s;
}

/**
 * What the worker does with a claimed fire (docs/schedules.md, "Catch-up"): run it, or skip it as
 * missed, and the instant its end arms. A fire is missed when its successor was already due at the
 * claim (the claim's time is the database's): 'latest' skips it for the latest due instant, 'none'
 * for the first instant after the claim, 'all' runs it unless it is older than the window (then
 * the first instant inside the window). Only the schedule's armed fire on its first attempt is
 * judged: a retry runs the same instant, and a trigger's fire arms nothing.
 */
export function fireDecision(fire: ClaimedFire, firstAttempt: boolean): { skip: boolean; nextFireAt: Date | null } {
  if (!fire.armed || fire.cron === undefined) return { skip: false, nextFireAt: null };
  const cron = scheduleOf(fire.cron, fire.timeZone ?? 'UTC');
  const next = cron.next(fire.at);
  const now = fire.claimedAt.getTime();
  // Not missed (its successor not due yet): run, whatever the policy.
  if (!firstAttempt || next === null || next.getTime() > now) return { skip: false, nextFireAt: next };
  if (fire.catchUp === 'all') {
    const oldest = now - (fire.catchUpWindowMs ?? DEFAULT_CATCH_UP_WINDOW_MS);
    if (fire.at.getTime() >= oldest) return { skip: false, nextFireAt: next };
    const first = next.getTime() >= oldest ? next : cron.next(new Date(oldest - 1));
    return { skip: true, nextFireAt: first };
  }
  if (fire.catchUp === 'none') return { skip: true, nextFireAt: cron.next(fire.claimedAt) };
  return { skip: true, nextFireAt: latestAtOrBefore(cron, next, now) };
}

/** The latest fire instant at or before `now`, given `first` (≤ now) is one: searched back from `now` in growing windows, so a long outage costs a few steps, not one per missed fire. */
function latestAtOrBefore(cron: CronSchedule, first: Date, now: number): Date {
  for (let window = 60_000; ; window *= 16) {
    const from = Math.max(first.getTime() - 1, now - window);
    let t = cron.next(new Date(from));
    if (t && t.getTime() <= now) {
      for (let n = cron.next(t); n && n.getTime() <= now; n = cron.next(n)) t = n;
      return t;
    }
    if (from < first.getTime()) return first;
  }
}

/** A schedule that needs a fire (acta.arm_schedules' input), as the schedules pass reads it. */
export interface UnarmedSchedule {
  name: string;
  version: number;
  cron: string;
  timeZone: string;
  /** The ended fire's instant (its next comes after it), else null: armed after `now`. */
  afterFire: Date | null;
  /** The database's now(). */
  now: Date;
}

/** A stored schedule this runtime cannot parse (its ICU lacks the zone, or the cron is a newer build's): left unarmed. */
export interface UnparsableSchedule {
  name: string;
  cron: string;
  timeZone: string;
  err: Error;
}

/**
 * The instants to arm: the next after the ended fire's instant, else the next after the database's
 * now (a schedule added, changed or resumed). A schedule this runtime cannot parse gets none (left
 * unarmed: another worker's runtime may) and is told to `onUnparsable`.
 */
export function armInstants(unarmed: UnarmedSchedule[], onUnparsable?: (u: UnparsableSchedule) => void): { names: string[]; versions: number[]; instants: (Date | null)[] } {
  const names: string[] = [];
  const versions: number[] = [];
  const instants: (Date | null)[] = [];
  for (const u of unarmed) {
    let at: Date | null;
    try {
      at = scheduleOf(u.cron, u.timeZone).next(u.afterFire ?? u.now);
    } catch (err) {
      at = null;
      onUnparsable?.({ name: u.name, cron: u.cron, timeZone: u.timeZone, err: err instanceof Error ? err : new Error(String(err)) });
    }
    names.push(u.name);
    versions.push(u.version);
    instants.push(at);
  }
  return { names, versions, instants };
}
