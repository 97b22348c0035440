/*
 * A bar chart drawn on the server as SVG: each minute's attempts stacked by outcome. The only
 * arithmetic is scaling counts to pixels; the numbers are in each bar's title (shown on hover) and
 * in a table beside it for readers without the picture.
 */
import { type Html, html } from '../html';
import type { MinuteCounts } from '../queries';

const WIDTH = 720;
const HEIGHT = 160;
const AXIS = 28;

export function attemptsChart(minutes: MinuteCounts[], label: string): Html {
  const max = Math.max(1, ...minutes.map((m) => m.succeeded + m.failed + m.other));
  const slot = (WIDTH - AXIS) / Math.max(1, minutes.length);
  const scale = (n: number) => (n / max) * (HEIGHT - 20);
  const bars = minutes.map((m, i) => {
    const x = AXIS + i * slot;
    const w = Math.max(1, slot - 1);
    let y = HEIGHT;
    const part = (n: number, color: string) => {
      if (n === 0) return '';
      const h = scale(n);
      y -= h;
      return html`<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${w.toFixed(1)}" height="${h.toFixed(1)}" fill="${color}"/>`;
    };
    const hhmm = m.minute.toISOString().slice(11, 16);
    return html`<g><title>${hhmm}: ${m.succeeded} succeeded, ${m.failed} failed, ${m.other} other</title>${part(m.succeeded, '#3aa655')}${part(m.failed, '#d64545')}${part(m.other, '#9aa3b5')}</g>`;
  });
  const first = minutes[0]?.minute.toISOString().slice(11, 16) ?? '';
  const last = minutes[minutes.length - 1]?.minute.toISOString().slice(11, 16) ?? '';
  return html`<figure style="margin:0"><svg role="img" aria-label="${label}" viewBox="0 0 ${WIDTH} ${HEIGHT + 16}" width="${WIDTH}" height="${HEIGHT + 16}" style="background:#fff;border:1px solid #e3e6eb">
<text x="2" y="12" font-size="10" fill="#6b7385">${max}</text><text x="2" y="${HEIGHT}" font-size="10" fill="#6b7385">0</text>
<line x1="${AXIS}" y1="${HEIGHT}" x2="${WIDTH}" y2="${HEIGHT}" stroke="#c5cad3"/>${bars}
<text x="${AXIS}" y="${HEIGHT + 13}" font-size="10" fill="#6b7385">${first} UTC</text><text x="${WIDTH - 60}" y="${HEIGHT + 13}" font-size="10" fill="#6b7385">${last} UTC</text></svg>
<figcaption class="note">${label}: <span style="color:#3aa655">■</span> succeeded <span style="color:#d64545">■</span> failed <span style="color:#9aa3b5">■</span> other (parked for a signal or children, rate limited, skipped, cancelled, handed back, lost); per minute, the last ${minutes.length} minutes.</figcaption></figure>`;
}
