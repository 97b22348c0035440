/*
 * A rate meter's log (migration 0011; docs/policies.md, "Rate limits"): one acta.meter_starts row per
 * admission instant, numbered by the meter's running count of starts, so the starts after an instant are
 * the meter's count less one row's. As acta.gate_room and acta.claim_jobs read and write it.
 */
import type { MemoryMeterStart, Store } from './state';

/** The index of the last row at or before `at` (order by at desc limit 1); -1: none. */
function lastAtOrBefore(log: MemoryMeterStart[], at: number): number {
  let lo = 0;
  let hi = log.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (log[mid].at <= at) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

/** The first row whose count reaches `upto` (order by upto limit 1). */
function firstReaching(log: MemoryMeterStart[], upto: number): MemoryMeterStart | undefined {
  let lo = 0;
  let hi = log.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (log[mid].upto < upto) lo = mid + 1;
    else hi = mid;
  }
  return log[lo];
}

/** acta.gate_room's meter (a meter not held shut, with a limit): its room at `now` and when the token after it frees. */
export function meterRoom(store: Store, namespace: string, key: string, limit: number, perMs: number, now: number): { room: number; nextAt: number } {
  const gate = store.gate(namespace, 'rate', key);
  const log = store.meterLog(namespace, key);
  const i = lastAtOrBefore(log, now - perMs);
  const before = i >= 0 ? log[i].upto : (gate?.startsPruned ?? 0);
  const starts = gate?.starts ?? 0;
  const frees = firstReaching(log, Math.max(before + 1, starts - limit + 1));
  return { room: limit - (starts - before), nextAt: (frees?.at ?? now) + perMs };
}

/** acta.claim_jobs: `n` starts admitted through the meter at `now`; its rows before the window of `perMs` deleted but the last. */
export function recordStarts(store: Store, namespace: string, key: string, n: number, perMs: number, now: number): void {
  const log = store.meterLog(namespace, key);
  const base = lastAtOrBefore(log, now - perMs);
  const pruned = base > 0 ? log.splice(0, base) : [];
  const gate = store.upsertGate(namespace, 'rate', key);
  gate.starts += n;
  gate.startsPruned = Math.max(gate.startsPruned, pruned.at(-1)?.upto ?? 0);
  // One row per instant (the primary key): a second claim at one instant adds to its row.
  const last = log.at(-1);
  if (last?.at === now) last.upto = gate.starts;
  else log.push({ namespace, key, at: now, upto: gate.starts });
}
