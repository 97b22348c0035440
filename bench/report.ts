/** Markdown table, target checks and the SVG chart. */
import { SETTINGS, SYSTEMS, type SystemName } from './common';
import { type BenchResult, type Row, type RowSystem, SCENARIOS, type TargetCheck } from './results';

const fmtInt = (x: number) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '–');

export function fmt(x: number, unit: string): string {
  if (!Number.isFinite(x)) return '–';
  switch (unit) {
    case 'jobs/s':
    case 'rows':
      return fmtInt(x);
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

/** Issue 5's targets against the same run's medians. */
export function checkTargets(rows: Row[], extra: { memoryFlat?: Record<string, boolean>; backpressure?: Record<string, { claims: number; bound: number }> }): TargetCheck[] {
  const out: TargetCheck[] = [];
  const ratio = (a: number, b: number) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? a / b : NaN);
  const add = (target: string, required: string, measured: string, met: boolean | null) => out.push({ target, required, measured, met });
  for (const variant of ['fresh', 'analyzed']) {
    const best = Math.max(med(rows, `drain1-${variant}`, 'graphile-perf'), med(rows, `drain1-${variant}`, 'graphile-default'));
    const acta = Math.max(med(rows, `drain1-${variant}`, 'acta-best'), med(rows, `drain1-${variant}`, 'acta-default'));
    const r = ratio(acta, best);
    add(`drain (${variant}) ≥ 1.25 × graphile-worker's best`, '≥ 1.25×', Number.isFinite(r) ? `${r.toFixed(2)}× (${fmtInt(acta)} vs ${fmtInt(best)} jobs/s)` : 'not measured', Number.isFinite(r) ? r >= 1.25 : null);
    const d = ratio(med(rows, `drain1-${variant}`, 'acta-default'), med(rows, `drain1-${variant}`, 'graphile-default'));
    add(`acta DEFAULT drain (${variant}) ≥ 5 × graphile-worker defaults`, '≥ 5×', Number.isFinite(d) ? `${d.toFixed(1)}×` : 'not measured', Number.isFinite(d) ? d >= 5 : null);
  }
  const gEnq = Math.max(med(rows, 'enqueue', 'graphile-perf'), med(rows, 'enqueue', 'graphile-default'));
  const aEnq = med(rows, 'enqueue', 'acta-default');
  const e = ratio(aEnq, gEnq);
  add('bulk enqueue ≥ 1.25 × graphile-worker addJobs', '≥ 1.25×', Number.isFinite(e) ? `${e.toFixed(2)}× (${fmtInt(aEnq)} vs ${fmtInt(gEnq)} jobs/s)` : 'not measured', Number.isFinite(e) ? e >= 1.25 : null);
  for (const system of (['acta-default', 'acta-best'] as const).filter((s) => rows.some((r) => r.system === s))) {
    const p50 = med(rows, 'latency-p50', system);
    const p99 = med(rows, 'latency-p99', system);
    add(`latency p50 ≤ 2 ms (${system})`, '≤ 2 ms', Number.isFinite(p50) ? `${fmt(p50, 'ms')} ms` : 'not measured', Number.isFinite(p50) ? p50 <= 2 : null);
    add(`latency p99 ≤ 8 ms (${system})`, '≤ 8 ms', Number.isFinite(p99) ? `${fmt(p99, 'ms')} ms` : 'not measured', Number.isFinite(p99) ? p99 <= 8 : null);
    const tx = med(rows, 'xacts-per-job', system);
    add(`transactions per job ≤ 0.05 (${system})`, '≤ 0.05', Number.isFinite(tx) ? tx.toFixed(3) : 'not measured', Number.isFinite(tx) ? tx <= 0.05 : null);
    for (const p of [2, 8]) {
      for (const variant of ['fresh', 'analyzed']) {
        const r = ratio(med(rows, `drain${p}-${variant}`, system), med(rows, `drain1-${variant}`, system));
        add(`${p} processes ≥ 0.9 × 1 process (${system}, ${variant})`, '≥ 0.9×', Number.isFinite(r) ? `${r.toFixed(2)}×` : 'not measured', Number.isFinite(r) ? r >= 0.9 : null);
      }
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
  const lines = ['| target (issue 5) | required | acta, this run | met? |', '|---|---|---|---|'];
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
  'graphile-default': '#ff9896',
  'graphile-perf': '#d62728',
  'pgboss-best': '#2ca02c',
  bullmq: '#9467bd',
  floor: '#7f7f7f',
};

/** A chart of the throughput rows and the latency rows: one panel per row, one bar per system, min–max whiskers. */
export function svgChart(result: BenchResult): string {
  const panels = SCENARIOS.filter((s) => (s.unit === 'jobs/s' && !s.id.startsWith('floor')) || s.id.startsWith('latency')).filter((s) =>
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
