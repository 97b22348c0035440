// The dashboard's html tagged template (src/ops/dashboard/html.ts): every value escaped, Html kept.
import { escapeHtml, html, raw } from '../../src/ops/dashboard/html';

test('every interpolated value is escaped: text, attributes, numbers, dates, arrays; null and false are nothing', () => {
  const name = `<script>alert("x")</script>&'\``;
  expect(html`<td title="${name}">${name}</td>`.text).toBe(
    '<td title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;&#96;">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;&#96;</td>',
  );
  expect(html`${1}${null}${undefined}${false}${new Date(0)}`.text).toBe('11970-01-01T00:00:00.000Z');
  expect(html`<ul>${['<a>', '"b"'].map((x) => html`<li>${x}</li>`)}</ul>`.text).toBe('<ul><li>&lt;a&gt;</li><li>&quot;b&quot;</li></ul>');
  // An object's own toString cannot smuggle markup in.
  expect(html`${{ toString: () => '<img src=x onerror=alert(1)>' }}`.text).toBe('&lt;img src=x onerror=alert(1)&gt;');
});

test('Html from a template or raw() is kept as it is, nested at any depth; escapeHtml leaves plain text alone', () => {
  const inner = html`<b>${'<i>'}</b>`;
  expect(html`<p>${inner}${raw('<hr>')}</p>`.text).toBe('<p><b>&lt;i&gt;</b><hr></p>');
  expect(escapeHtml('plain text 123')).toBe('plain text 123');
});
