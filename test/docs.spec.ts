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

/** The names an entry point exports (`export { a, type B, c as d } from …`), as its users import them. */
function exportsOf(file: string): string[] {
  const names: string[] = [];
  for (const m of read(file).matchAll(/export\s+(?:type\s+)?\{([^}]*)\}/g)) {
    for (const part of m[1].split(',')) {
      const name = part.trim().replace(/^type\s+/, '').split(/\s+as\s+/).pop();
      if (name) names.push(name);
    }
  }
  return names;
}

/** The text of a Markdown file from heading `from` (a line) up to the next heading of that level or higher. */
function section(md: string, from: string): string {
  const start = md.indexOf(`\n${from}\n`);
  if (start < 0) throw new Error(`no heading "${from}"`);
  const level = /^#+/.exec(from)![0].length;
  const rest = md.slice(start + from.length + 2);
  const end = rest.search(new RegExp(`^#{1,${level}} `, 'm'));
  return end < 0 ? rest : rest.slice(0, end);
}

/** Every `acta_…` / `ACTA_…` literal of src/ outside acta/testing, with its file. */
function sourceFiles(dir = 'src'): string[] {
  return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) return rel === path.join('src', 'testing') ? [] : sourceFiles(rel);
    return rel.endsWith('.ts') ? [rel] : [];
  });
}

describe("docs/reference.md names every export, and only what is exported", () => {
  const reference = read('docs/reference.md');
  const exportsSection = section(reference, '## Exports');
  const errorsTable = section(reference, '## Errors');
  const entries = ['src/index.ts', 'operators/index.ts', 'src/testing/index.ts'];
  const exported = new Set(entries.flatMap(exportsOf));
  const errorRows = [...errorsTable.matchAll(/^\| `(\w+)` \| /gm)].map((m) => m[1]);

  test('the three entry points export something (the parse works)', () => {
    expect(exported.has('createWorker') && exported.has('bufferBounded') && exported.has('runAttempt') && exported.has('runWorker$')).toBe(true);
  });

  test.each(entries)('every export of %s is in "Exports" (an error class: a row of "Errors")', (entry) => {
    const missing = exportsOf(entry).filter((name) => !exportsSection.includes(`\`${name}\``) && !errorRows.includes(name));
    expect(missing).toEqual([]);
  });

  test('every name "Exports" lists in code style is exported (field names aside)', () => {
    const listed = [...exportsSection.matchAll(/`([A-Za-z_$][\w$]*)`/g)].map((m) => m[1]);
    expect([...new Set(listed)].filter((name) => !exported.has(name) && name !== 'refusal')).toEqual([]);
  });

  test("every error class of src/errors.ts (with src/dbErrors.ts and src/actaError.ts, which it exports) has a row of \"Errors\", and every row's class is exported", () => {
    const classes = ['src/errors.ts', 'src/dbErrors.ts', 'src/actaError.ts'].flatMap((f) => [...read(f).matchAll(/^export class (\w+) extends/gm)].map((m) => m[1]));
    expect(classes).toEqual(expect.arrayContaining(['DbClosedError', 'DataDirLockedError', 'ActaError', 'ConfigError']));
    expect(classes.filter((c) => !errorRows.includes(c))).toEqual([]);
    expect(errorRows.filter((c) => !exported.has(c))).toEqual([]);
  });

  test('every error code src/ throws (ACTA_…) is in docs/reference.md', () => {
    const codes = new Set(sourceFiles().flatMap((f) => [...read(f).matchAll(/'(ACTA_[A-Z_]+)'/g)].map((m) => m[1])));
    expect(codes.size).toBeGreaterThan(30);
    expect([...codes].filter((code) => !reference.includes(`\`${code}\``))).toEqual([]);
  });
});

test('every command of the command line, and each of its flags, is in README.md or docs/', () => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { program } = require('../src/ops/cli/main') as typeof import('../src/ops/cli/main');
  const docs = markdownFiles()
    .map(read)
    .join('\n');
  type Cmd = { name(): string; commands: readonly Cmd[]; options: readonly { long?: string }[] };
  const missing: string[] = [];
  const walk = (cmd: Cmd, words: string[]) => {
    for (const sub of cmd.commands) {
      if (sub.name() === 'help') continue;
      const path = [...words, sub.name()];
      // `acta schedule pause|resume|remove <name>` names each of the three.
      const parent = path.slice(0, -1).map((w) => `${w} `).join('');
      if (!new RegExp(`acta ${parent}(?:[\\w-]+\\|)*${sub.name()}\\b`).test(docs)) missing.push(`acta ${path.join(' ')}`);
      for (const option of sub.options) {
        if (option.long && option.long !== '--help' && !docs.includes(option.long)) missing.push(`acta ${path.join(' ')} ${option.long}`);
      }
      walk(sub, path);
    }
  };
  const cli = program() as unknown as Cmd;
  expect(cli.commands.length).toBeGreaterThan(10);
  walk(cli, []);
  expect(missing).toEqual([]);
});

/** A logger call of src/: its level(s) and its message as written (a template's `${…}` kept). */
interface LogCall {
  levels: string[];
  message: string;
  file: string;
}

/**
 * Every `x.info(…)`, `.warn(…)`, `.error(…)`, `.debug(…)` and `x[level](…)` call of src/ (outside
 * acta/testing) with a literal message, bindings object or not. A computed level's candidates are
 * the level words quoted in its brackets, else in the 300 characters before the call.
 */
function logCalls(): LogCall[] {
  const out: LogCall[] = [];
  const call = /(?:\.(info|warn|error|debug)|\[([^\]\n]+)\])\(\s*(?:\{(?:[^{}]|\{[^{}]*\})*\}\s*,\s*)?(['`])((?:\\.|(?!\3)[^\\])*)\3\s*,?\s*\)/g;
  for (const file of sourceFiles()) {
    const src = read(file);
    for (const m of src.matchAll(call)) {
      if (src.slice(0, m.index).endsWith('console')) continue; // the CLI's own stderr, not a log line
      let levels = m[1] ? [m[1]] : [...m[2].matchAll(/'(info|warn|error|debug)'/g)].map((l) => l[1]);
      if (!m[1] && levels.length === 0) levels = [...src.slice(Math.max(0, m.index! - 300), m.index).matchAll(/'(info|warn|error|debug)'/g)].map((l) => l[1]);
      if (levels.length > 0) out.push({ levels, message: m[4], file });
    }
  }
  return out;
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Whether a documented message is that call's: `…` and `<what>` in the doc, `${…}` in the code, stand for any text. */
function sameMessage(documented: string, code: string): boolean {
  const docRe = new RegExp(`^${escapeRe(documented).replace(/…|<\w+>/g, '.*')}$`);
  const codeRe = new RegExp(`^${escapeRe(code).replace(/\\\$\\\{.*?\\\}/g, '.+')}$`);
  return docRe.test(code) || codeRe.test(documented);
}

describe("docs/operating.md's tables against src/", () => {
  const operating = read('docs/operating.md');

  test('the log lines: each message of the Logs table is a logger call of src/ at the level the table gives', () => {
    const calls = logCalls();
    expect(calls.length).toBeGreaterThan(50);
    const rows = [...section(operating, '## Logs').matchAll(/^\| ([a-z, ]+) \| (.+?) \| .* \|$/gm)].filter((r) => r[1] !== 'level');
    expect(rows.length).toBeGreaterThan(15);
    const wrong: string[] = [];
    for (const [, levelCell, messageCell] of rows) {
      const messages = [...messageCell.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
      // One level for all the row's messages, one per message, or several for one message ("warn,
      // then error": its level grows). Debug lines are not the table's concern.
      const levels = levelCell.split(/,\s*(?:then\s+)?/).filter((l) => l !== 'debug');
      messages.forEach((message, i) => {
        const found = calls.filter((c) => sameMessage(message, c.message));
        if (found.length === 0) return wrong.push(`no logger call says "${message}"`);
        const want = messages.length === 1 ? levels : levels.length === messages.length ? [levels[i]] : levels;
        const got = [...new Set(found.flatMap((c) => c.levels))].filter((l) => l !== 'debug');
        if (got.sort().join() !== [...want].sort().join()) wrong.push(`"${message}": documented ${want.join('/')}, logged ${got.join('/')}`);
      });
    }
    expect(wrong).toEqual([]);
  });

  test('the log lines: every warn and error line of src/ is in the Logs table (an operator meets it)', () => {
    const documented = [...section(operating, '## Logs').matchAll(/`([^`]+)`/g)].map((m) => m[1]);
    const missing = logCalls()
      .filter((c) => c.levels.some((l) => l === 'warn' || l === 'error'))
      .filter((c) => !documented.some((d) => sameMessage(d, c.message)))
      .map((c) => `${c.file}: ${c.message}`);
    expect(missing).toEqual([]);
  });

  test('the metrics: every metric src/ registers is a row of the Metrics table with its type and labels, and every row is registered', () => {
    const registered = new Map<string, string>();
    for (const file of sourceFiles()) {
      for (const m of read(file).matchAll(/new (Counter|Gauge|Histogram)\(\{\s*name: '(acta_\w+)',[^]*?(?:labelNames: \[([^\]]*)\]|registers)/g)) {
        const labels = m[3] ? m[3].replace(/['\s]/g, '') : '';
        registered.set(labels ? `${m[2]}{${labels}}` : m[2], m[1].toLowerCase());
      }
    }
    expect(registered.size).toBeGreaterThan(10);
    const documented = new Map<string, string>();
    for (const [, names, type] of section(operating, '## Metrics').matchAll(/^\| (`acta_[^|]+) \| (\w+) \|/gm)) {
      for (const [, name] of names.matchAll(/`([^`]+)`/g)) documented.set(name, type.replace(/s$/, ''));
    }
    expect(Object.fromEntries(documented)).toEqual(Object.fromEntries(registered));
  });
});

describe("the defaults the docs state are the code's", () => {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const config = require('../src/config') as typeof import('../src/config');
  const retention = require('../src/recurring/retention') as typeof import('../src/recurring/retention');
  const outbox = require('../src/recurring/outbox') as typeof import('../src/recurring/outbox');
  const alerts = require('../src/recurring/alerts') as typeof import('../src/recurring/alerts');
  const alertsNotes = require('../src/ops/alertsNotes') as typeof import('../src/ops/alertsNotes');
  /* eslint-enable @typescript-eslint/no-require-imports */
  /** 45000 as the docs write it: 45,000. */
  const n = (v: number) => v.toLocaleString('en-US');
  /** The row of a Markdown table whose first cell starts with `cell`. */
  const row = (md: string, cell: string) => {
    const found = md.split('\n').find((l) => l.startsWith(`| ${cell}`));
    if (!found) throw new Error(`no row ${cell}`);
    return found;
  };
  const readme = read('README.md');
  const worker = section(read('docs/reference.md'), '## Worker');

  test("createWorker's: README.md and reference.md", () => {
    expect([1, 4, 64].map((cores) => config.defaultExecutors(cores))).toEqual([8, 16, 64]); // 4 per core, 8..64
    expect(row(worker, '`executors`')).toContain('4 per core, clamped to 8..64');
    expect(row(readme, '`executors`')).toContain('4 per core, 8..64');
    const { min, max } = config.HEARTBEAT_INTERVAL_RANGE_MS;
    expect(row(worker, '`heartbeatIntervalMs`')).toContain(`| ${n(config.leaseClock().heartbeatIntervalMs)} | ${n(min)} .. ${n(max)}:`);
    expect(row(readme, '`heartbeatIntervalMs`')).toContain(`| ${n(config.DEFAULT_HEARTBEAT_INTERVAL_MS)} | H (${min} ms .. 1 h)`);
    expect(row(worker, '`safetyPollMs`')).toContain(`| ${n(config.DEFAULT_SAFETY_POLL_MS)} |`);
    expect(row(readme, '`safetyPollMs`')).toContain(`| ${n(config.DEFAULT_SAFETY_POLL_MS)} |`);
    expect(row(worker, '`shutdownTimeoutMs`')).toContain(`| ${n(config.DEFAULT_SHUTDOWN_TIMEOUT_MS)} |`);
    expect(row(worker, '`startTimeoutMs`')).toContain(`| ${n(config.DEFAULT_START_TIMEOUT_MS)} |`);
    expect(row(readme, '`shutdownTimeoutMs`, `startTimeoutMs`')).toContain(`| ${n(config.DEFAULT_SHUTDOWN_TIMEOUT_MS)}, ${n(config.DEFAULT_START_TIMEOUT_MS)} |`);
    expect(row(worker, '`executors`')).toContain(`1 .. ${n(config.MAX_EXECUTORS)}`);
  });

  test("the lease clock's table (DESIGN.md, how-it-works.md) is leaseClock()'s at the default H", () => {
    const clock = config.leaseClock();
    const s = (ms: number) => `${ms / 1_000} s`;
    for (const file of ['docs/DESIGN.md', 'docs/how-it-works.md']) {
      const md = read(file);
      expect(row(md, 'lease ')).toContain(`| ${s(clock.leaseMs)} |`);
      expect(row(md, 'attempt deadline')).toContain(`| ${s(clock.attemptDeadlineMs)} |`);
      expect(row(md, 'worker dead after')).toContain(`| ${s(clock.workerDeadAfterMs)} |`);
      expect(row(md, 'recovery interval')).toContain(`| ${s(clock.recoveryIntervalMs)} |`);
    }
  });

  test("the command line's help states the same defaults", () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { program } = require('../src/ops/cli/main') as typeof import('../src/ops/cli/main');
    const cmd = (program() as unknown as { commands: { name(): string; options: { long?: string; description: string }[] }[] }).commands.find((c) => c.name() === 'worker')!;
    const help = (flag: string) => cmd.options.find((o) => o.long === flag)!.description;
    expect(help('--executors')).toContain('default 4 per core, 8..64');
    expect(help('--heartbeat')).toContain(`default ${config.DEFAULT_HEARTBEAT_INTERVAL_MS})`);
    expect(help('--safety-poll')).toContain(`default ${config.DEFAULT_SAFETY_POLL_MS})`);
    expect(help('--shutdown-timeout')).toContain(`default ${config.DEFAULT_SHUTDOWN_TIMEOUT_MS})`);
    expect(help('--start-timeout')).toContain(`default ${config.DEFAULT_START_TIMEOUT_MS})`);
  });

  test('retention, alerts and outbox: their pages', () => {
    const day = 86_400_000;
    const ages = read('docs/retention.md');
    expect(row(ages, 'Succeeded')).toContain(`| ${retention.DEFAULT_SUCCEEDED_AGE_MS / day} day (`);
    expect(row(ages, 'Cancelled')).toContain(`| ${retention.DEFAULT_CANCELLED_AGE_MS / day} day (`);
    expect(row(ages, 'Failed')).toContain(`| ${retention.DEFAULT_FAILED_AGE_MS / day} days (`);
    expect(ages).toContain(`batches of \`batchSize\` rows (default\n${n(retention.DEFAULT_BATCH_SIZE)})`);
    expect(ages).toContain(`(default ${n(retention.DEFAULT_BATCH_TIMEOUT_MS)} ms)`);
    expect(ages).toContain(`(\`passBudgetMs\`, default ${retention.DEFAULT_PASS_BUDGET_MS / 1_000} s)`);
    const rules = read('docs/alerts.md');
    const min = (ms: number) => `${ms / 60_000} min`;
    expect(row(rules, '`worker_dead`')).toContain(`${min(alerts.DEFAULT_DEAD_WINDOW_MS)} (\`deadWindowMs\`)`);
    expect(row(rules, '`oldest_ready`')).toContain(`${min(alerts.DEFAULT_READY_AGE_MS)} (\`readyAgeMs\`)`);
    expect(row(rules, '`failure_rate`')).toContain(
      `window ${min(alerts.DEFAULT_FAILURE_WINDOW_MS)} (\`failureWindowMs\`), rate ${alerts.DEFAULT_FAILURE_RATE} (\`failureRate\`), minimum ${alerts.DEFAULT_FAILURE_MIN_JOBS} jobs (\`failureMinJobs\`)`,
    );
    expect(row(rules, '`schedule_late`')).toContain(`${min(alerts.DEFAULT_SCHEDULE_LATE_MS)} (\`scheduleLateMs\`)`);
    expect(rules).toContain(`\`keepResolvedMs\` (default ${alerts.DEFAULT_KEEP_RESOLVED_MS / day} day)`);
    expect(rules).toContain(`its armed fire still not claimed more than ${alertsNotes.ALERTS_FIRE_LATE_MS / 1_000} s (two of its cadences`);
    expect(read('docs/outbox.md')).toContain(
      `(default ${outbox.DEFAULT_BATCH_SIZE} events, each a transaction under a ${outbox.DEFAULT_BATCH_TIMEOUT_MS / 1_000} s\n  statement_timeout, halved after a timeout; at most ${outbox.DEFAULT_PASS_BUDGET_MS / 1_000} s per pass)`,
    );
  });
});
