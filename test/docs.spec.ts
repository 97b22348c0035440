// The user-facing docs against the code: links that resolve, and the tables of docs/reference.md and
// docs/operating.md that name what the code has. Each check reads the files as they are; a name
// renamed or added on one side only fails here.
import * as fs from 'node:fs';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..');
const read = (file: string) => fs.readFileSync(path.join(ROOT, file), 'utf8');

/** README.md and every Markdown file under docs/, relative to ROOT. */
function markdownFiles(): string[] {
  const out = ['README.md'];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      const rel = path.join(dir, e.name);
      if (e.isDirectory()) walk(rel);
      else if (e.name.endsWith('.md')) out.push(rel);
    }
  };
  walk('docs');
  return out;
}

/** The lines of a Markdown text outside fenced code blocks, each with its 1-based number. */
function proseLines(md: string): { line: string; n: number }[] {
  const out: { line: string; n: number }[] = [];
  let fenced = false;
  md.split('\n').forEach((line, i) => {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    else if (!fenced) out.push({ line, n: i + 1 });
  });
  return out;
}

/**
 * The anchors a Markdown file offers: its headings as GitHub slugs them (lowercase, markup and
 * punctuation dropped, each space a '-', a repeated slug suffixed -1, -2, …) and explicit
 * `<a id="…">` / `name="…"` targets.
 */
function anchors(md: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  for (const { line } of proseLines(md)) {
    for (const m of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) out.add(m[1]);
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!h) continue;
    const slug = h[1]
      .toLowerCase()
      .replace(/<[^>]+>/g, '')
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

test('every relative link of README.md and docs/ resolves to a file, and its #anchor to a heading there', () => {
  const broken: string[] = [];
  const anchorsOf = new Map<string, Set<string>>();
  for (const file of markdownFiles()) {
    for (const { line, n } of proseLines(read(file))) {
      // Code spans hold examples, not links.
      const prose = line.replace(/`[^`]*`/g, '');
      for (const m of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)|<(?:img|a)\s[^>]*(?:src|href)="([^"]+)"|^\[[^\]]+\]:\s*(\S+)/g)) {
        const href = m[1] ?? m[2] ?? m[3];
        if (/^[a-z][a-z0-9+.-]*:/i.test(href)) continue; // https:, mailto:
        const [target, anchor] = href.split('#');
        const resolved = target ? path.resolve(path.dirname(path.join(ROOT, file)), decodeURIComponent(target)) : path.join(ROOT, file);
        if (!fs.existsSync(resolved)) {
          broken.push(`${file}:${n}: ${href} (no such file)`);
          continue;
        }
        if (anchor === undefined || !resolved.endsWith('.md')) continue;
        if (!anchorsOf.has(resolved)) anchorsOf.set(resolved, anchors(fs.readFileSync(resolved, 'utf8')));
        if (!anchorsOf.get(resolved)!.has(anchor)) broken.push(`${file}:${n}: ${href} (no such heading)`);
      }
    }
  }
  expect(broken).toEqual([]);
});

test('the heading slugs follow GitHub: punctuation dropped, spaces to -, repeats numbered', () => {
  const md = "# API reference\n## acta/testing\n## A job's keys\n## `createWorker` options\n```\n# not a heading\n```\n## Errors\n## Errors\n";
  expect([...anchors(md)]).toEqual(['api-reference', 'actatesting', 'a-jobs-keys', 'createworker-options', 'errors', 'errors-1']);
});
