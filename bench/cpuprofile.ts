/**
 * Summarises V8 .cpuprofile files (from `npm run bench -- --cpu-prof <dir>`, which runs the acta
 * worker processes with --cpu-prof): where the worker's CPU time goes, by package / acta source
 * file (self time) and by function (self and inclusive time).
 *
 *   node dist/bench/cpuprofile.js <file.cpuprofile | dir> [--top 25] [--window src/worker/executor.js]
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** Where a frame belongs: a package, an acta file, Node internals, or V8's pseudo-frames. */
export function bucketOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (!url) return `(${functionName || 'anonymous'})`.replace(/^\(\((.*)\)\)$/, '($1)');
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[0]}`;
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  const dist = /\/dist\/(src|operators|bench)\/(.*)$/.exec(url);
  if (dist) return `acta:${dist[1]}/${dist[2]}`;
  return url;
}

export interface Summary {
  file: string;
  totalMs: number;
  byBucket: [string, number][];
  bySelf: [string, number][];
  byInclusive: [string, number][];
}

/**
 * `windowUrl`: count only the samples between the first and the last one whose stack has a frame
 * from a script whose URL contains it (e.g. `src/worker/executor.js`: the span in which jobs ran, without
 * the process's start-up and shutdown).
 */
export function summarise(file: string, top = 25, windowUrl?: string): Summary & { windowMs?: number } {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  let first = 0;
  let last = profile.samples.length - 1;
  if (windowUrl) {
    const inWindow = (id: number) => {
      for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) if (byId.get(cur)!.callFrame.url.includes(windowUrl)) return true;
      return false;
    };
    first = profile.samples.findIndex(inWindow);
    for (last = profile.samples.length - 1; last > first && !inWindow(profile.samples[last]); last--);
    if (first < 0) throw new Error(`${file}: no sample under ${windowUrl}`);
  }
  const self = new Map<number, number>();
  let windowMs = 0;
  for (let i = first; i <= last; i++) {
    const dt = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    windowMs += dt;
    self.set(profile.samples[i], (self.get(profile.samples[i]) ?? 0) + dt);
  }
  const fnKey = (f: CallFrame) => `${f.functionName || '(anonymous)'} ${f.url ? `${path.basename(f.url)}:${f.lineNumber + 1}` : ''} [${bucketOf(f)}]`;
  const bucket = new Map<string, number>();
  const selfFn = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let total = 0;
  for (const [id, ms] of self) {
    const node = byId.get(id)!;
    total += ms;
    bucket.set(bucketOf(node.callFrame), (bucket.get(bucketOf(node.callFrame)) ?? 0) + ms);
    selfFn.set(fnKey(node.callFrame), (selfFn.get(fnKey(node.callFrame)) ?? 0) + ms);
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const key = fnKey(byId.get(cur)!.callFrame);
      if (seen.has(key)) continue;
      seen.add(key);
      inclusive.set(key, (inclusive.get(key) ?? 0) + ms);
    }
  }
  const sortTop = (m: Map<string, number>) => [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, top);
  return { file, totalMs: total, windowMs: windowUrl ? windowMs : undefined, byBucket: sortTop(bucket), bySelf: sortTop(selfFn), byInclusive: sortTop(inclusive) };
}

function print(s: Summary & { windowMs?: number }): void {
  const pct = (ms: number) => `${((100 * ms) / s.totalMs).toFixed(1).padStart(5)} %`;
  const line = ([k, ms]: [string, number]) => `  ${pct(ms)} ${ms.toFixed(0).padStart(7)} ms  ${k}`;
  console.log(`\n${s.file}: ${s.totalMs.toFixed(0)} ms sampled${s.windowMs !== undefined ? ' (between the first and last sample under the --window script)' : ''}`);
  console.log(' self time by package / acta file:');
  s.byBucket.forEach((e) => console.log(line(e)));
  console.log(' self time by function:');
  s.bySelf.forEach((e) => console.log(line(e)));
  console.log(' inclusive time by function:');
  s.byInclusive.forEach((e) => console.log(line(e)));
}

if (require.main === module) {
  const args = process.argv.slice(2);
  const topAt = args.indexOf('--top');
  const top = topAt >= 0 ? Number(args[topAt + 1]) : 25;
  const windowAt = args.indexOf('--window');
  const windowUrl = windowAt >= 0 ? args[windowAt + 1] : undefined;
  // An option's value is not the target (an absent option's index is -1: it excludes nothing).
  const optionValues = new Set([topAt, windowAt].filter((at) => at >= 0).map((at) => at + 1));
  const target = args.find((a, i) => !a.startsWith('--') && !optionValues.has(i));
  if (!target) {
    console.error('usage: node dist/bench/cpuprofile.js <file.cpuprofile | dir> [--top 25] [--window src/worker/executor.js]');
    process.exit(2);
  }
  const files = fs.statSync(target).isDirectory()
    ? fs.readdirSync(target).filter((f) => f.endsWith('.cpuprofile')).map((f) => path.join(target, f))
    : [target];
  for (const f of files) print(summarise(f, top, windowUrl));
}
