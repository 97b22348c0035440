/**
 * The certification's report (certify/run.ts): its figures, as JSON and as Markdown.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Verdict } from './checker';
import type { certifyMix } from './jobs';
import type { CertifyOptions } from './run';
import type { SignalAnswers } from './signals';

export interface CertifyReport {
  parameters: Omit<CertifyOptions, 'databaseUrl' | 'out' | 'quiet'> & {
    server: string;
    node: string;
    cores: number;
    /** The job mix (certify/jobs.ts): shares of keyed and laned jobs, their floors, the keys' limits. */
    keyedShare: number;
    keyedPerSlotMin: number;
    lanedShare: number;
    laneLength: number;
    keyLimits: number[];
    keysPerLimit: number;
    /** Signalled jobs and parents (certify/jobs.ts), and when the signals go (certify/signals.ts). */
    signalledShare: number;
    signalledMin: number;
    signalTimeoutMs: number;
    signalSpread: number;
    parentShare: number;
    parentsMin: number;
    childrenPerParent: number;
  };
  /** The run's jobs by kind (certifyMix; children included). */
  mix: ReturnType<typeof certifyMix>;
  /** How the run's signal sends were answered. */
  signals: SignalAnswers;
  startedAt: string;
  durationSec: number;
  jobsPerSec: number;
  kills: number;
  dbRestarts: number;
  verdict: Verdict;
}

const sec = (ms: number) => `${(ms / 1_000).toFixed(1)} s`;

export function renderMarkdown(r: CertifyReport): string {
  const p = r.parameters;
  const c = r.verdict.counts;
  const w = r.verdict.workflows;
  const a = r.signals;
  const lines = [
    `# acta certification: ${r.verdict.ok ? 'PASSED' : 'FAILED'}`,
    '',
    `Started ${r.startedAt}; Node ${p.node}; ${p.cores} cores; server: ${p.server}.`,
    '',
    '| parameter | value |',
    '|---|---|',
    `| workers × executors | ${p.workers} × ${p.executors} |`,
    `| jobs (2–3 recorded steps each) | ${p.jobs} |`,
    `| of which keyed | ${p.keyedShare * 100} % (at least ${p.keyedPerSlotMin} per slot), enqueued first, over ${p.keysPerLimit} keys of each limit ${p.keyLimits.join(', ')}, in proportion to the limit |`,
    `| of which laned | ${p.lanedShare * 100} % (at least one lane), enqueued next, in lanes of about ${p.laneLength} |`,
    `| of which signalled | ${p.signalledShare * 100} % (at least ${p.signalledMin}), spread among the plain ones: ${r.mix.signalled}, a third with a timeout of up to ${p.signalTimeoutMs} ms; each sent one signal once a plain job up to ${p.signalSpread * 100} % of the jobs before or after it was claimed, about a third sent twice |`,
    `| of which parents and their children | ${p.parentShare * 100} % parents (at least ${p.parentsMin}), spread among the plain ones, of ${p.childrenPerParent} children each: ${r.mix.parents} + ${r.mix.children} |`,
    `| kill -9 a random worker every | ${p.killEverySec} s |`,
    `| restart the database every | ${p.restartDbEverySec ? `${p.restartDbEverySec} s` : 'never'} |`,
    `| heartbeat H (lease 4 H) | ${p.heartbeatMs} ms |`,
    '',
    '| result | value |',
    '|---|---|',
    `| duration | ${r.durationSec.toFixed(1)} s |`,
    `| throughput | ${r.jobsPerSec.toFixed(0)} jobs/s |`,
    `| workers killed | ${r.kills} |`,
    `| database restarts | ${r.dbRestarts} |`,
    `| jobs succeeded | ${c.succeeded} / ${c.jobs} |`,
    `| attempts (charged / uncharged) | ${c.attempts} (${c.charged} / ${c.uncharged}) |`,
    `| attempts recovered after their worker was lost | ${c.recovered} |`,
    `| steps recorded | ${c.stepsRecorded} |`,
    `| step runs (of which before a record committed: at-least-once) | ${c.stepRuns} (${c.stepRunsUnrecorded}) |`,
    `| keyed jobs (attempts) over keys | ${c.keyedJobs} (${c.keyedAttempts}) over ${r.verdict.keys.length} |`,
    `| laned jobs over lanes | ${c.lanedJobs} over ${c.lanes} |`,
    `| first claim to last end: all jobs / the longest key / the longest lane | ${sec(c.spanMs)} / ${sec(Math.max(0, ...r.verdict.keys.map((k) => k.spanMs)))} / ${sec(c.laneSpanMs)} |`,
    `| signals sent (answers: consumed at once / kept / duplicate / ended; errors retried) | ${w.signals} (${a.consumed} / ${a.queued} / ${a.duplicate} / ${a.ended}; ${a.errors}) |`,
    `| signals consumed, sent before the job's claim / before its wait parked / while parked; after a timeout | ${c.signalsConsumed}: ${w.sentBeforeClaim} / ${w.sentBeforePark} / ${w.sentWhileParked}; ${w.consumedAfterTimeout} |`,
    `| signal waits (timed out) | ${w.signalWaits} (${w.timeouts}) |`,
    `| parents, children, children waits | ${c.parents}, ${w.children}, ${w.childrenWaits} |`,
    ...r.verdict.fires.map((f) => `| schedule ${f.schedule}: fires (ran / skipped by its catch-up policy), longest gap | ${f.fires} (${f.ran} / ${f.skipped}), ${sec(f.longestGapMs)} |`),
    `| violations | ${r.verdict.violations.length} |`,
    '',
    'The verdict is a pure function of the database ledgers (acta.all_jobs, acta.all_executions, acta.steps, acta.signals, certify.effects, acta.definitions\' limits): every job Succeeded; no step recorded twice; no recorded step ran again; attempt numbers unique and complete per job; no two attempts of a job overlapped; every accepted write carried its row\'s current execution; charged attempts add up; no more attempts of a concurrency key held it at once than its limit; each lane ran its jobs one at a time in commit order (acta.jobs.lane_seq); each schedule fired once per instant, with no gap beyond its catch-up policy (certify/fires.ts); every signal consumed, once, by a wait the job recorded, no wait answered without a signal or before its timeout, no parked job run again before its wait was answered; no child spawned twice or lost, no parent resumed before all its children ended (certify/workflowChecks.ts).',
  ];
  if (r.verdict.keys.length > 0) {
    lines.push('', '| concurrency key | limit | jobs | attempts | most held at once | first claim to last end |', '|---|---:|---:|---:|---:|---:|');
    for (const k of r.verdict.keys) lines.push(`| ${k.key} | ${k.limit} | ${k.jobs} | ${k.attempts} | ${k.maxHeld} | ${sec(k.spanMs)} |`);
  }
  if (r.verdict.violations.length > 0) {
    lines.push('', '## Violations (first 50)', '', '| kind | job | detail |', '|---|---|---|');
    for (const v of r.verdict.violations.slice(0, 50)) lines.push(`| ${v.kind} | ${v.jobId} | ${v.detail} |`);
  }
  return lines.join('\n') + '\n';
}

export function writeReport(report: CertifyReport, out: string): void {
  fs.mkdirSync(out, { recursive: true });
  const name = `certify-${report.startedAt.replace(/[:.]/g, '-')}`;
  fs.writeFileSync(path.join(out, `${name}.json`), JSON.stringify(report, null, 2) + '\n');
  fs.writeFileSync(path.join(out, `${name}.md`), renderMarkdown(report));
}

