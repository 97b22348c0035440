/*
 * HTML built on the server: every value interpolated into an `html` template is escaped, unless it
 * is itself Html (a template's result, or a value passed through `raw`, which only the dashboard's
 * own constant markup may use). test/dashboard/html.spec.ts holds the escaping.
 */

/** Markup that is safe to put into a page as it is. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' };

/** Text as it must appear inside an element or a quoted attribute value. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`]/g, (c) => ESCAPES[c]);
}

/** An interpolated value: Html as it is, an array joined, null/undefined/false as nothing, anything else as escaped text. */
function part(value: unknown): string {
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map(part).join('');
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof Date) return escapeHtml(value.toISOString());
  return escapeHtml(String(value));
}

/** The tagged template: `html\`<td>${name}</td>\`` escapes `name`. */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += part(values[i]) + strings[i + 1];
  return new Html(out);
}

/** Constant markup of the dashboard itself (never a value from the database or the request). */
export const raw = (text: string): Html => new Html(text);
