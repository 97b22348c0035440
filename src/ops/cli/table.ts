/**
 * Rows as an aligned text table: the first row is the header; columns padded to their widest cell
 * (at most 60 characters), the last one cut at 60 too unless `wholeLast` (a value read whole, as
 * acta alerts' DETAIL: nothing is aligned after it).
 */
export function formatTable(rows: string[][], options: { wholeLast?: boolean } = {}): string {
  if (rows.length <= 1) return rows.length === 0 ? '' : `${rows[0].join('  ')}\n(none)`;
  const cell = (s: string) => (s.length > 60 ? `${s.slice(0, 59)}…` : s).replace(/\n/g, ' ');
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => cell(r[c] ?? '').length)));
  const last = (s: string) => (options.wholeLast ? s.replace(/\n/g, ' ') : cell(s));
  return rows.map((r) => r.map((s, c) => (c === r.length - 1 ? last(s) : cell(s).padEnd(widths[c]))).join('  ').trimEnd()).join('\n');
}
