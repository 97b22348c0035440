/** Markdown table, target checks and the SVG chart. */
import { SETTINGS, SYSTEMS, type SystemName } from './common';
import { type BenchResult, type Row, type RowSystem, SCENARIOS, type TargetCheck } from './results';
import { summarize } from './stats';

const fmtInt = (x: number) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '–');

export function fmt(x: number, unit: string): string {
  if (!Number.isFinite(x)) return '–';
  switch (unit) {
    case 'jobs/s':
    case 'rows':
    case 'attempts':
      return fmtInt(x);
    case '×':
      return x.toFixed(2);
    case 'ms':
      return x < 10 ? x.toFixed(2) : x.toFixed(1);
    case 'tx/job':
      return x.toFixed(3);
    case 'tx/s':
      return x.toFixed(2);
    case 'MiB':
      return x.toFixed(0);
    default:
      return String(x);
  }
}

export function find(rows: Row[], scenario: string, system: RowSystem): Row | undefined {
  return rows.find((r) => r.scenario === scenario && r.system === system && r.samples.length > 0);
}

const med = (rows: Row[], scenario: string, system: RowSystem) => find(rows, scenario, system)?.median ?? NaN;

/** The floor row an acta row compares with, if any. */
function floorFor(scenario: string): string | undefined {
  if (scenario === 'enqueue') return 'floor-enqueue';
  if (scenario === 'drain-keys-1000' || scenario === 'drain-hot-key' || scenario === 'drain-rate-1m') return undefined; // the floor has no keys
  if (scenario.startsWith('drain')) return scenario.endsWith('analyzed') ? 'floor-drain-analyzed' : 'floor-drain-fresh';
  return undefined;
}

function cell(rows: Row[], scenario: string, system: RowSystem, unit: string): string {
  const row = rows.find((r) => r.scenario === scenario && r.system === system);
  if (!row) return '';
  if (row.samples.length === 0) return row.errors.length ? 'error' : '';
  let text = fmt(row.median, unit);
  if (row.samples.length > 1) text += ` (${fmt(row.min, unit)}–${fmt(row.max, unit)})`;
  if (String(system).startsWith('acta')) {
    const floor = floorFor(scenario);
    const f = floor ? med(rows, floor, 'floor') : NaN;
    if (Number.isFinite(f) && f > 0) text += ` · ${Math.round((100 * row.median) / f)} % of floor`;
  }
  if (row.errors.length) text += ` [${row.errors.length} failed]`;
  return text;
}

export function markdownTable(result: BenchResult): string {
  const systems: RowSystem[] = [...SYSTEMS.filter((s) => result.rows.some((r) => r.system === s)), 'floor'];
  const header = `| scenario | unit | ${systems.join(' | ')} |`;
  const rule = `|---|---|${systems.map(() => '---:').join('|')}|`;
  const lines = [header, rule];
  for (const s of SCENARIOS) {
    if (!result.rows.some((r) => r.scenario === s.id)) continue;
    lines.push(`| ${s.label} | ${s.unit} | ${systems.map((sys) => cell(result.rows, s.id, sys, s.unit)).join(' | ')} |`);
  }
  return lines.join('\n');
}

/** One measured value of one run (BenchResult.raw). */
export type RunValue = { run: number; scenario: string; system: string; value?: number };

/**
 * A ratio of acta's figure to another's "against the same run's figures" (docs/performance.md, "The
 * targets, and how they are judged"): the ratio in each run that measured both, then their median
 * (min–max), so that a host that speeds up or slows down between runs (the in-server floor measured
 * 20,297 and 41,249 jobs/s in two runs of one bench) compares each figure with its neighbour
 * minutes apart, not with another run's. `top` and `bottom` compute one side from a run's values
 * (e.g. the better of two systems). Without per-run values, the ratio of the medians.
 */
function pairedRatio(
  rows: Row[],
  raw: RunValue[] | undefined,
  top: (value: (scenario: string, system: string) => number) => number,
  bottom: (value: (scenario: string, system: string) => number) => number,
): { ratio: number; min: number; max: number; runs: number; top: number; bottom: number } {
  const fromMedians = { top: top((sc, sys) => med(rows, sc, sys as RowSystem)), bottom: bottom((sc, sys) => med(rows, sc, sys as RowSystem)) };
  const runs = [...new Set((raw ?? []).map((r) => r.run))].sort((a, b) => a - b);
  const ratios: number[] = [];
  for (const run of runs) {
    const value = (scenario: string, system: string) => raw!.find((r) => r.run === run && r.scenario === scenario && r.system === system)?.value ?? NaN;
    const t = top(value);
    const b = bottom(value);
    if (Number.isFinite(t) && Number.isFinite(b) && b > 0) ratios.push(t / b);
  }
  if (ratios.length === 0) {
    const r = fromMedians.bottom > 0 ? fromMedians.top / fromMedians.bottom : NaN;
    return { ratio: r, min: r, max: r, runs: 0, ...fromMedians };
  }
  const { median, min, max } = summarize(ratios);
  return { ratio: median, min, max, runs: ratios.length, ...fromMedians };
}

/** The highest of the values measured (NaN: none was). */
function bestOf(values: number[]): number {
  const measured = values.filter(Number.isFinite);
  return measured.length > 0 ? Math.max(...measured) : NaN;
}

/** "0.90× (0.77–0.97 over 3 runs; medians 19,764 vs 21,941 jobs/s)". */
function ratioText(r: ReturnType<typeof pairedRatio>, digits: number, unit?: string): string {
  if (!Number.isFinite(r.ratio)) return 'not measured';
  let text = `${r.ratio.toFixed(digits)}×`;
  const extra: string[] = [];
  if (r.runs > 1) extra.push(`${r.min.toFixed(digits)}–${r.max.toFixed(digits)} over ${r.runs} runs`);
  if (unit) extra.push(`medians ${fmtInt(r.top)} vs ${fmtInt(r.bottom)} ${unit}`);
  return extra.length ? `${text} (${extra.join('; ')})` : text;
}

/**
 * The benchmark's targets (docs/performance.md, "The targets, and how they are judged"). Ratios are
 * paired by run (pairedRatio: the median of each run's ratio); absolute targets (latency,
 * transactions, idle, memory) take the medians.
 */
export function checkTargets(
  rows: Row[],
  extra: { memoryFlat?: Record<string, boolean>; backpressure?: Record<string, { claims: number; bound: number }>; raw?: RunValue[] },
): TargetCheck[] {
  const out: TargetCheck[] = [];
  const add = (target: string, required: string, measured: string, met: boolean | null) => out.push({ target, required, measured, met });
  const paired = (top: Parameters<typeof pairedRatio>[2], bottom: Parameters<typeof pairedRatio>[3]) => pairedRatio(rows, extra.raw, top, bottom);
  for (const variant of ['fresh', 'analyzed']) {
    const sc = `drain1-${variant}`;
    const r = paired(
      (v) => bestOf([v(sc, 'acta-best'), v(sc, 'acta-default')]),
      (v) => bestOf([v(sc, 'graphile-perf'), v(sc, 'graphile-default'), v(sc, 'pgboss-best')]),
    );
    add(`drain (${variant}) ≥ 1.25 × the best PostgreSQL peer's (graphile-worker, pg-boss)`, '≥ 1.25×', ratioText(r, 2, 'jobs/s'), Number.isFinite(r.ratio) ? r.ratio >= 1.25 : null);
    const d = paired((v) => v(sc, 'acta-default'), (v) => v(sc, 'graphile-default'));
    add(`acta DEFAULT drain (${variant}) ≥ 5 × graphile-worker defaults`, '≥ 5×', ratioText(d, 1), Number.isFinite(d.ratio) ? d.ratio >= 5 : null);
    // Beside it, not instead: retention zero keeps no row of a success, as graphile-worker keeps none.
    if (rows.some((row) => row.scenario === sc && row.system === 'acta-zero')) {
      const z = paired((v) => v(sc, 'acta-zero'), (v) => bestOf([v(sc, 'graphile-perf'), v(sc, 'graphile-default'), v(sc, 'pgboss-best')]));
      add(`drain (${variant}) with retention zero ≥ 1.25 × the best PostgreSQL peer's`, '≥ 1.25×', ratioText(z, 2, 'jobs/s'), Number.isFinite(z.ratio) ? z.ratio >= 1.25 : null);
    }
  }
  // A held snapshot: acta's drain under it ≥ the best peer's under the same hold.
  if (rows.some((r) => r.scenario === 'drain-held')) {
    const h = paired(
      (v) => bestOf(['acta-best', 'acta-default'].map((s) => v('drain-held', s))),
      (v) => bestOf(['graphile-perf', 'graphile-default', 'pgboss-best'].map((s) => v('drain-held', s))),
    );
    add("drain under a held snapshot ≥ the best peer's under the same hold", '≥ 1×', ratioText(h, 2, 'jobs/s'), Number.isFinite(h.ratio) ? h.ratio >= 1 : null);
  }
  const e = paired((v) => v('enqueue', 'acta-default'), (v) => bestOf([v('enqueue', 'graphile-perf'), v('enqueue', 'graphile-default')]));
  add('bulk enqueue ≥ 1.25 × graphile-worker addJobs', '≥ 1.25×', ratioText(e, 2, 'jobs/s'), Number.isFinite(e.ratio) ? e.ratio >= 1.25 : null);
  for (const system of (['acta-default', 'acta-best'] as const).filter((s) => rows.some((r) => r.system === s))) {
    const p50 = med(rows, 'latency-p50', system);
    const p99 = med(rows, 'latency-p99', system);
    add(`latency p50 ≤ 2 ms (${system})`, '≤ 2 ms', Number.isFinite(p50) ? `${fmt(p50, 'ms')} ms` : 'not measured', Number.isFinite(p50) ? p50 <= 2 : null);
    add(`latency p99 ≤ 8 ms (${system})`, '≤ 8 ms', Number.isFinite(p99) ? `${fmt(p99, 'ms')} ms` : 'not measured', Number.isFinite(p99) ? p99 <= 8 : null);
    const tx = med(rows, 'xacts-per-job', system);
    add(`transactions per job ≤ 0.05 (${system})`, '≤ 0.05', Number.isFinite(tx) ? tx.toFixed(3) : 'not measured', Number.isFinite(tx) ? tx <= 0.05 : null);
    for (const p of [2, 8]) {
      for (const variant of ['fresh', 'analyzed']) {
        const r = paired((v) => v(`drain${p}-${variant}`, system), (v) => v(`drain1-${variant}`, system));
        add(`${p} processes ≥ 0.9 × 1 process (${system}, ${variant})`, '≥ 0.9×', ratioText(r, 2), Number.isFinite(r.ratio) ? r.ratio >= 0.9 : null);
      }
    }
    // Not one of the original targets: the same check with warmed processes (see "Warm drains").
    if (rows.some((r) => r.scenario === 'drain8-warm' && r.system === system)) {
      const w = paired((v) => v('drain8-warm', system), (v) => v('drain1-warm', system));
      add(`(not an original target) 8 warm processes ≥ 0.9 × 1 warm process (${system})`, '≥ 0.9×', ratioText(w, 2), Number.isFinite(w.ratio) ? w.ratio >= 0.9 : null);
    }
    // Issue 26: a drain over 1,000 keys of limit 1 keeps ≥ 0.8 × the plain one of the same run.
    if (rows.some((r) => r.scenario === 'drain-keys-1000' && r.system === system)) {
      const k = paired((v) => v('drain-keys-1000', system), (v) => v('drain1-fresh', system));
      add(`drain over 1,000 keys of limit 1 ≥ 0.8 × the plain drain (${system}, fresh)`, '≥ 0.8×', ratioText(k, 2, 'jobs/s'), Number.isFinite(k.ratio) ? k.ratio >= 0.8 : null);
    }
    const idle = med(rows, 'idle-xacts', system);
    add(`idle worker ≤ 1.1 transactions/s (${system})`, '≤ 1.1/s', Number.isFinite(idle) ? `${idle.toFixed(2)}/s` : 'not measured', Number.isFinite(idle) ? idle <= 1.1 : null);
    const flat = extra.memoryFlat?.[system];
    const rss = find(rows, 'memory-rss', system);
    add(`flat RSS under a large backlog (${system})`, 'last third max ≤ 1.1 × middle third max', rss ? `max ${fmt(rss.median, 'MiB')} MiB, ${flat ? 'flat' : 'growing'}` : 'not measured', rss ? flat === true : null);
    const bp = extra.backpressure?.[system];
    add(`claims bounded while completions stall (${system})`, '≤ 128 + 2N', bp ? `${bp.claims} (bound ${bp.bound})` : 'not measured', bp ? bp.claims <= bp.bound : null);
  }
  return out;
}

export function targetsTable(targets: TargetCheck[]): string {
  const lines = ['| target | required | acta, this run | met? |', '|---|---|---|---|'];
  for (const t of targets) lines.push(`| ${t.target} | ${t.required} | ${t.measured} | ${t.met === null ? 'not measured' : t.met ? '**met**' : '**MISSED**'} |`);
  return lines.join('\n');
}

export function settingsTable(): string {
  const lines = ['| system | settings |', '|---|---|'];
  for (const s of SYSTEMS) lines.push(`| ${s} | ${SETTINGS[s as SystemName].label} |`);
  return lines.join('\n');
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

const COLORS: Record<string, string> = {
  'acta-default': '#1f77b4',
  'acta-best': '#0b3d91',
  'acta-zero': '#17becf',
  'graphile-default': '#ff9896',
  'graphile-perf': '#d62728',
  'pgboss-best': '#2ca02c',
  bullmq: '#9467bd',
  floor: '#7f7f7f',
};

/** A chart of the throughput rows and the latency rows: one panel per row, one bar per system, min–max whiskers. */
export function svgChart(result: BenchResult): string {
  const panels = SCENARIOS.filter((s) => (s.unit === 'jobs/s' && !s.id.startsWith('floor') && !s.id.endsWith('-bound')) || s.id.startsWith('latency')).filter((s) =>
    result.rows.some((r) => r.scenario === s.id && r.samples.length > 0),
  );
  const width = 960;
  const labelW = 150;
  const barH = 16;
  const gap = 4;
  const chartW = width - labelW - 170;
  let y = 40;
  const parts: string[] = [];
  parts.push(`<text x="${width / 2}" y="24" text-anchor="middle" font-size="16" font-weight="bold">${esc(String(result.meta.title ?? 'acta benchmark'))}</text>`);
  for (const s of panels) {
    const rows = result.rows.filter((r) => r.scenario === s.id && r.samples.length > 0);
    const floorId = floorFor(s.id);
    const floor = floorId ? result.rows.find((r) => r.scenario === floorId && r.system === 'floor' && r.samples.length > 0) : undefined;
    const all = [...rows, ...(floor ? [floor] : [])];
    const maxV = Math.max(...all.map((r) => r.max)) || 1;
    parts.push(`<text x="10" y="${y + 12}" font-size="13" font-weight="bold">${esc(`${s.label} (${s.unit}, ${s.better} is better)`)}</text>`);
    y += 20;
    for (const r of all) {
      const w = (r.median / maxV) * chartW;
      const color = COLORS[r.system] ?? '#444';
      parts.push(`<text x="${labelW - 6}" y="${y + barH - 4}" font-size="11" text-anchor="end">${esc(r.system === 'floor' ? 'floor (in-server)' : r.system)}</text>`);
      parts.push(`<rect x="${labelW}" y="${y}" width="${Math.max(1, w).toFixed(1)}" height="${barH}" fill="${color}"/>`);
      if (r.samples.length > 1) {
        const x1 = labelW + (r.min / maxV) * chartW;
        const x2 = labelW + (r.max / maxV) * chartW;
        const cy = y + barH / 2;
        parts.push(`<line x1="${x1.toFixed(1)}" y1="${cy}" x2="${x2.toFixed(1)}" y2="${cy}" stroke="#000" stroke-width="1"/>`);
        parts.push(`<line x1="${x1.toFixed(1)}" y1="${cy - 4}" x2="${x1.toFixed(1)}" y2="${cy + 4}" stroke="#000"/>`);
        parts.push(`<line x1="${x2.toFixed(1)}" y1="${cy - 4}" x2="${x2.toFixed(1)}" y2="${cy + 4}" stroke="#000"/>`);
      }
      parts.push(`<text x="${labelW + Math.max(w, r.max / maxV * chartW) + 6}" y="${y + barH - 4}" font-size="11">${esc(fmt(r.median, s.unit))}</text>`);
      y += barH + gap;
    }
    y += 14;
  }
  const footer = `median of ${String(result.meta.runs ?? '?')} runs, whiskers min–max; ${esc(String(result.meta.machineLine ?? ''))}`;
  parts.push(`<text x="10" y="${y + 6}" font-size="11" fill="#555">${footer}</text>`);
  y += 20;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${y}" viewBox="0 0 ${width} ${y}" font-family="sans-serif">\n<rect width="100%" height="100%" fill="#fff"/>\n${parts.join('\n')}\n</svg>\n`;
}
