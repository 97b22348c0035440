/**
 * `npm start [directory]`: the walking skeleton on real input. Enqueues one `hash-file` job per
 * file under the directory (default: this project's node_modules), runs them through an
 * in-process worker on the embedded default (PGlite in ./.acta/data, or DATABASE_URL), shows a
 * live progress bar on a terminal (a plain line every 2 s when stdout is not one: see
 * progressIntervalMs), and prints the count, the throughput and where the results are stored.
 * Running it again resumes: a file already hashed (same path and mtime: the idempotency key) is
 * not hashed again.
 */
import { existsSync, promises as fs } from 'node:fs';
import * as path from 'node:path';
import { SingleBar } from 'cli-progress';
import { ConfigError, connect, createClient, createLogger, createWorker, describeTarget, isTransientDbError, migrate } from '../src';
import { hashFile } from './hashFile';

/** Every regular file under `root` (symbolic links are not followed). */
export async function listFiles(root: string): Promise<{ path: string; mtimeMs: number }[]> {
  const out: { path: string; mtimeMs: number }[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const dirent of await fs.readdir(dir, { withFileTypes: true })) {
      const full = path.join(dir, dirent.name);
      if (dirent.isDirectory()) await walk(full);
      else if (dirent.isFile()) out.push({ path: full, mtimeMs: (await fs.stat(full)).mtimeMs });
    }
  };
  await walk(root);
  return out;
}

export interface DemoSummary {
  files: number;
  enqueued: number;
  alreadyKnown: number;
  succeeded: number;
  failed: number;
  seconds: number;
  jobsPerSecond: number;
  target: string;
  /** Stopped by Ctrl-C before every file was hashed. */
  interrupted: boolean;
}

/** `s` quoted for a POSIX shell: in single quotes, where nothing is expanded. */
const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * What the printed `acta sql` command needs in front to open the database the demo used (connect's
 * order: the dataDir given, then DATABASE_URL, then ACTA_DATA_DIR): the server's URL when it holds
 * no password (with one, a placeholder: the hint is printed, the password must not be; once, a
 * DATABASE_URL set for `npm start` alone sent the hint to ./.acta/data: test/demo.test.ts, "the
 * printed `acta sql` command opens the database the demo used"); or the data folder when not the
 * default one, e.g. after `ACTA_DATA_DIR=/tmp/x npm start`, with DATABASE_URL emptied when the demo
 * was given a folder although it was set (it would win).
 */
export function sqlCommandPrefix(dataDir: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (dataDir === undefined && env.DATABASE_URL) {
    let secret = true;
    try {
      const url = new URL(env.DATABASE_URL);
      secret = url.password !== '' || [...url.searchParams.keys()].some((key) => /pass/i.test(key)); // password, sslpassword
    } catch {
      /* not a URL (a libpq key=value string?): keep it out of the output */
    }
    return secret ? 'DATABASE_URL=<your server URL> ' : `DATABASE_URL=${shellQuote(env.DATABASE_URL)} `;
  }
  const dir = dataDir ?? env.ACTA_DATA_DIR;
  if (!dir) return '';
  return `${env.DATABASE_URL ? 'DATABASE_URL= ' : ''}ACTA_DATA_DIR=${shellQuote(dir)} `;
}

/** A path.relative answer that stays in its folder (no `..` up, not on another drive). */
const within = (relative: string) => relative !== '..' && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative);

/** The folder of the acta package this demo belongs to (bin/acta.js beside it): the clone, or node_modules/acta. */
export function packageRoot(from: string = __dirname): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'bin', 'acta.js')) && existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) return path.resolve(from, '..', '..'); // not found: dist/examples/ is two below it
  }
}

/**
 * The acta command as the user can type it in `cwd`, for the printed hint: `npx acta` where it
 * finds this package (acta installed in a project holding `cwd`: npx elsewhere would fetch npm's
 * unrelated `acta`, docs/operating.md), else the path of its bin/acta.js, relative to `cwd`
 * (`./bin/acta.js` in the clone) or absolute when that is shorter (test/demo.test.ts, "the printed
 * acta command").
 */
export function actaCommand(cwd: string = process.cwd(), root: string = packageRoot()): string {
  const modules = path.dirname(root);
  if (path.basename(modules) === 'node_modules' && existsSync(path.join(modules, '.bin', 'acta'))) {
    if (within(path.relative(path.dirname(modules), cwd))) return 'npx acta';
  }
  const bin = path.join(root, 'bin', 'acta.js');
  let relative = path.relative(cwd, bin);
  if (within(relative)) relative = `./${relative}`;
  const shown = relative.length <= bin.length ? relative : bin;
  return /^[\w@%+=:,./-]+$/.test(shown) ? shown : shellQuote(shown);
}

/**
 * How often the plain progress line is printed when stdout is not a terminal (piped, a CI log),
 * where the bar would show nothing until the end: ACTA_DEMO_PROGRESS_MS, default 2000 (a
 * positive integer, ms; test/demo.test.ts shortens it).
 */
export function progressIntervalMs(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.ACTA_DEMO_PROGRESS_MS;
  if (raw === undefined || raw === '') return 2_000;
  const ms = Number(raw);
  if (!Number.isInteger(ms) || ms < 1) throw new ConfigError(`ACTA_DEMO_PROGRESS_MS must be a positive integer (ms), got ${JSON.stringify(raw)}`);
  return ms;
}

/** "demo: 1,234 / 10,000 jobs done (12%), 1,000 jobs/s": the plain progress line. */
export function progressLine(done: number, total: number, jobsPerSecond: number): string {
  const n = (x: number) => x.toLocaleString('en-US');
  const percent = total === 0 ? 100 : Math.floor((done * 100) / total); // 100% only when all are done
  return `demo: ${n(done)} / ${n(total)} jobs done (${percent}%), ${n(Math.round(jobsPerSecond))} jobs/s`;
}

/**
 * Runs the demo on `root`; `quiet` drops the progress output (tests). Progress: a live bar when
 * stdout is a terminal, else a plain line every progressIntervalMs and one at the end.
 */
export async function runDemo(root: string, options: { quiet?: boolean; dataDir?: string } = {}): Promise<DemoSummary> {
  const started = Date.now();
  const plainEveryMs = !options.quiet && !process.stdout.isTTY ? progressIntervalMs() : undefined;
  const db = await connect({ dataDir: options.dataDir });
  const target = describeTarget({ dataDir: options.dataDir });
  const say = (line: string) => {
    if (!options.quiet) console.log(line);
  };
  try {
    await migrate(db);
    const files = await listFiles(root);
    say(`acta demo: ${files.length} files under ${root}, into ${target}`);
    const client = createClient({ db });
    let enqueued = 0;
    const ours: string[] = [];
    for (let i = 0; i < files.length; i += 5_000) {
      const chunk = files.slice(i, i + 5_000);
      const results = await client.enqueueMany(
        chunk.map((f) => ({ definition: hashFile, payload: { path: f.path }, idempotencyKey: `${f.path}@${f.mtimeMs}` })),
      );
      for (const r of results) {
        if (r.created) enqueued++;
        ours.push(r.id);
      }
    }
    say(`enqueued ${enqueued} new job${enqueued === 1 ? '' : 's'} (${files.length - enqueued} already known from an earlier run)`);

    const worker = createWorker({
      db,
      definitions: [hashFile],
      heartbeatIntervalMs: 2_000, // short lease (8 s): an interrupted run's rows come back quickly
      logger: createLogger({ level: process.env.ACTA_LOG_LEVEL ?? 'warn', pretty: !options.quiet && process.stdout.isTTY }),
    });
    // Ctrl-C: stop gracefully (running files finish or go back uncharged), leave the progress
    // loop, and say how to resume; a second Ctrl-C exits at once (the lock is taken over next run).
    let interrupted = false;
    const stopOnSignal = () => {
      interrupted = true;
      process.once('SIGINT', () => process.exit(130));
      void worker.stop();
    };
    process.once('SIGINT', stopOnSignal);
    await worker.start();

    // A transient failure is counted again 250 ms on, as the worker beside it rides it out: the
    // process holding the embedded folder killed (EmbeddedShareClosedError; this one takes the
    // folder at its next call), an outage (docs/operating.md, "Which database"; test/demo.test.ts,
    // "rides out a kill -9 of that holder").
    const count = async (): Promise<{ succeeded: number; failed: number; open: number }> => {
      for (;;) {
        try {
          const { rows } = await db.query<{ status: string; n: string }>(
            `select status, count(*) as n from acta.jobs where id = any($1::bigint[]) group by status`,
            [ours],
          );
          const by = Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
          return { succeeded: by.succeeded ?? 0, failed: by.failed ?? 0, open: (by.ready ?? 0) + (by.executing ?? 0) };
        } catch (err) {
          if (!isTransientDbError(err)) throw err;
          await new Promise((r) => setTimeout(r, 250));
        }
      }
    };
    const bar = options.quiet || plainEveryMs !== undefined
      ? undefined
      : new SingleBar({ format: 'hashing {bar} {value}/{total} files | {rate} jobs/s | {duration_formatted}', hideCursor: true });
    let counts = await count();
    const doneBefore = counts.succeeded + counts.failed;
    bar?.start(files.length, doneBefore, { rate: 0 });
    const runStarted = Date.now();
    let lastLineAt = runStarted;
    let lastLineDone: number | undefined;
    const plainLine = () => {
      lastLineAt = Date.now();
      lastLineDone = counts.succeeded + counts.failed;
      console.log(progressLine(lastLineDone, files.length, rateNow()));
    };
    const rateNow = () => (counts.succeeded + counts.failed - doneBefore) / Math.max(0.001, (Date.now() - runStarted) / 1000);
    while (counts.open > 0 && !interrupted) {
      await new Promise((r) => setTimeout(r, 250));
      counts = await count();
      bar?.update(counts.succeeded + counts.failed, { rate: Math.round(rateNow()) });
      if (plainEveryMs !== undefined && Date.now() - lastLineAt >= plainEveryMs) plainLine();
    }
    bar?.stop();
    // A last one unless the loop just printed the same count: a run shorter than the interval shows its progress too.
    if (plainEveryMs !== undefined && lastLineDone !== counts.succeeded + counts.failed) plainLine();
    process.removeListener('SIGINT', stopOnSignal);
    await worker.stop();
    const seconds = (Date.now() - runStarted) / 1000;
    const ran = counts.succeeded + counts.failed - doneBefore;
    if (interrupted) {
      counts = await count();
      say(`interrupted: ${counts.succeeded + counts.failed} of ${files.length} files done; run the same command again to resume`);
    }
    const summary: DemoSummary = {
      files: files.length,
      enqueued,
      alreadyKnown: files.length - enqueued,
      succeeded: counts.succeeded,
      failed: counts.failed,
      seconds: (Date.now() - started) / 1000,
      jobsPerSecond: seconds > 0 ? ran / seconds : 0,
      target,
      interrupted,
    };
    if (!interrupted) say(
      [
        `done: ${summary.succeeded} files hashed, ${summary.failed} failed; this run worked ${ran} jobs in ${seconds.toFixed(2)} s (${Math.round(summary.jobsPerSecond)} jobs/s)`,
        `results are stored in ${target}, view acta.all_jobs (acta.jobs and acta.succeeded_jobs), column result ({ sha256, bytes }); e.g.`,
        `  ${sqlCommandPrefix(options.dataDir)}${actaCommand()} sql "select payload->>'path' as path, result->>'sha256' as sha256 from acta.all_jobs where definition = 'hash-file' limit 5"`,
      ].join('\n'),
    );
    return summary;
  } finally {
    await db.close();
  }
}

if (require.main === module) {
  const root = path.resolve(process.argv[2] ?? path.join(__dirname, '..', '..', 'node_modules'));
  runDemo(root).then(
    (s) => process.exit(s.interrupted ? 130 : s.failed > 0 ? 2 : 0),
    (err) => {
      console.error(err instanceof Error ? `acta demo: ${err.message}` : err);
      process.exit(1);
    },
  );
}
