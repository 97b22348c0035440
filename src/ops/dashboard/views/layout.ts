/*
 * The frame of every page and the pieces the pages share: navigation, an action's form (a POST with
 * the CSRF token; absent in read-only mode), times and sizes as people read them.
 */
import { type Html, html, raw } from '../html';

/** What a page needs to know about the request it answers. */
export interface ViewContext {
  /** The path the handler is mounted at ('' at the root). */
  base: string;
  /** The namespace shown. */
  namespace: string;
  /** The CSRF token of the requester. */
  csrf: string;
  readOnly: boolean;
  who: string;
  /** The path and query of this page (where an action returns to). */
  here: string;
}

const STYLE = raw(`
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:10px 20px;display:flex;gap:20px;align-items:center}
header a{color:#cfd8ff;text-decoration:none}header a:hover{text-decoration:underline}
header .brand{font-weight:700;color:#fff}header .who{margin-left:auto;color:#9aa3b5;font-size:12px}
main{padding:16px 20px;max-width:1200px}h1{font-size:20px;margin:4px 0 12px}h2{font-size:16px;margin:20px 0 8px}
table{border-collapse:collapse;background:#fff;width:100%;margin-bottom:8px}
th,td{border-bottom:1px solid #e3e6eb;padding:5px 8px;text-align:left;vertical-align:top}
th{background:#eef0f4;font-weight:600;font-size:12px;text-transform:uppercase;color:#4a5367}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.s{display:inline-block;padding:0 6px;border-radius:8px;font-size:12px;background:#e3e6eb}
.s-succeeded{background:#d4f3dc}.s-failed{background:#fbd5d5}.s-executing{background:#d7e6ff}
.s-cancelled{background:#eee}.s-waiting{background:#fff1c7}.s-alive{background:#d4f3dc}.s-dead{background:#fbd5d5}.s-silent{background:#fde2c4}
.s-open{background:#fbd5d5}.s-resolved{background:#d4f3dc}.s-paused{background:#fff1c7}
form.inline{display:inline}button{cursor:pointer;padding:2px 10px;margin:0 2px}
pre{background:#fff;border:1px solid #e3e6eb;padding:8px;overflow:auto;max-height:360px;white-space:pre-wrap;word-break:break-all}
.note{color:#6b7385;font-size:12px}.filters input,.filters select{margin-right:8px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;background:#fff;padding:8px;border:1px solid #e3e6eb}dt{color:#6b7385}dd{margin:0}
.flash{background:#fff8d6;border:1px solid #e8d27a;padding:6px 10px;margin-bottom:12px}
.warn{background:#fdecec;border:1px solid #e9a6a6;padding:6px 10px;margin:0 0 12px}
`);

/** A path under the handler with its query (values encoded). */
export function href(ctx: ViewContext, path: string, query: Record<string, string | number | null | undefined> = {}): string {
  const q = new URLSearchParams();
  q.set('ns', ctx.namespace);
  for (const [k, v] of Object.entries(query)) if (v !== null && v !== undefined && v !== '') q.set(k, String(v));
  return `${ctx.base}${path}?${q.toString()}`;
}

export function layout(ctx: ViewContext, title: string, body: Html, flash?: string | null): Html {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${title} · acta</title><style>${STYLE}</style></head>
<body><header><a class="brand" href="${href(ctx, '/')}">acta</a>
<a href="${href(ctx, '/')}">Overview</a><a href="${href(ctx, '/jobs')}">Jobs</a><a href="${href(ctx, '/workers')}">Workers</a><a href="${href(ctx, '/schedules')}">Schedules</a><a href="${href(ctx, '/alerts')}">Alerts</a>
<span class="who">namespace <b>${ctx.namespace}</b>${ctx.who ? html` · ${ctx.who}${ctx.readOnly ? ' · read-only' : ''}` : ''}</span></header>
<main>${flash ? html`<div class="flash" role="status">${flash}</div>` : ''}<h1>${title}</h1>${body}</main></body></html>`;
}

/**
 * A button that POSTs one action with its fields, the CSRF token and the page to return to; nothing
 * in read-only mode (the handler refuses the action there too).
 */
export function actionButton(ctx: ViewContext, action: string, label: string, fields: Record<string, string | null | undefined>): Html | '' {
  if (ctx.readOnly) return '';
  const hidden = Object.entries(fields)
    .filter(([, v]) => v !== null && v !== undefined)
    .map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`);
  return html`<form class="inline" method="post" action="${ctx.base}/actions/${action}"><input type="hidden" name="csrf" value="${ctx.csrf}"><input type="hidden" name="ns" value="${ctx.namespace}"><input type="hidden" name="back" value="${ctx.here}">${hidden}<button type="submit" data-action="${action}">${label}</button></form>`;
}

export const status = (s: string): Html => html`<span class="s s-${s}">${s}</span>`;
export const time = (d: Date | null | undefined): Html | '' => (d ? html`<time datetime="${d.toISOString()}">${d.toISOString().replace('T', ' ').slice(0, 19)}</time>` : '');
export function ago(ms: number | null): string {
  if (ms === null) return '';
  if (ms < 1_000) return `${ms} ms`;
  if (ms < 120_000) return `${Math.round(ms / 1_000)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  return `${Math.round(ms / 3_600_000)} h`;
}
export function bytes(n: number): string {
  if (n < 1_024) return `${n} B`;
  if (n < 1_048_576) return `${(n / 1_024).toFixed(1)} KiB`;
  return `${(n / 1_048_576).toFixed(1)} MiB`;
}
