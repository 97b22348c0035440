/** Worker processes: spawn, wait for ready, go, stop, RSS. */
import { type ChildProcess, fork } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { ChildConfig, FromChild, ToChild } from './common';
import { median } from './stats';

export interface ChildHandle {
  readonly proc: ChildProcess;
  readonly config: ChildConfig;
  /** ms from `go` to the system's start call resolving (reported by the child). */
  startedMs?: number;
  /** Latency mode: called when a handler started job k. */
  onJob?: (k: number) => void;
  send(message: ToChild): void;
  /** Resolves when the child said `started`. */
  started: Promise<number>;
  /** Last lines of the child's output, for error reports. */
  tail(): string;
  exited: Promise<number | null>;
}

export interface SpawnOptions {
  /** Extra node flags for the child (e.g. --cpu-prof). */
  nodeArgs?: string[];
  readyTimeoutMs?: number;
}

const CHILD = path.join(__dirname, 'child.js');

/** Starts one worker process and waits until it is ready (loaded, connected where it prepares ahead). */
export async function spawnChild(config: ChildConfig, options: SpawnOptions = {}): Promise<ChildHandle> {
  const proc = fork(CHILD, [JSON.stringify(config)], {
    execPath: process.execPath,
    execArgv: ['--disable-warning=ExperimentalWarning', ...(options.nodeArgs ?? [])],
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const lines: string[] = [];
  const keep = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line) continue;
      lines.push(line.length > 500 ? `${line.slice(0, 500)}…` : line);
      if (lines.length > 40) lines.shift();
      if (process.env.BENCH_VERBOSE) process.stderr.write(`[${config.system}] ${line}\n`);
    }
  };
  proc.stdout?.on('data', keep);
  proc.stderr?.on('data', keep);
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  let resolveStarted!: (ms: number) => void;
  let rejectStarted!: (err: Error) => void;
  const started = new Promise<number>((resolve, reject) => {
    resolveStarted = resolve;
    rejectStarted = reject;
  });
  started.catch(() => undefined);
  const handle: ChildHandle = {
    proc,
    config,
    send: (message) => {
      if (proc.connected) proc.send(message);
    },
    started,
    tail: () => lines.join('\n'),
    exited,
  };
  const ready = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker process ${config.system} not ready after ${options.readyTimeoutMs ?? 60_000} ms\n${handle.tail()}`)), options.readyTimeoutMs ?? 60_000);
    proc.on('message', (message: FromChild) => {
      switch (message.type) {
        case 'ready':
          clearTimeout(timer);
          resolve();
          break;
        case 'started':
          handle.startedMs = message.ms;
          resolveStarted(message.ms);
          break;
        case 'job':
          handle.onJob?.(message.k);
          break;
        case 'error':
          clearTimeout(timer);
          reject(new Error(`worker process ${config.system}: ${message.message}`));
          rejectStarted(new Error(message.message));
          break;
        default:
          break;
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      const err = new Error(`worker process ${config.system} exited (${code})\n${handle.tail()}`);
      reject(err);
      rejectStarted(err);
    });
  });
  try {
    await ready;
  } catch (err) {
    proc.kill('SIGKILL');
    throw err;
  }
  return handle;
}

/** Starts `count` worker processes in parallel and waits until all are ready. */
export async function spawnMany(configs: ChildConfig[], options: SpawnOptions = {}): Promise<ChildHandle[]> {
  const results = await Promise.allSettled(configs.map((c) => spawnChild(c, options)));
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) {
    for (const r of results) if (r.status === 'fulfilled') r.value.proc.kill('SIGKILL');
    throw (failed as PromiseRejectedResult).reason;
  }
  return results.map((r) => (r as PromiseFulfilledResult<ChildHandle>).value);
}

/** Graceful stop of every child (SIGKILL after `timeoutMs`). */
export async function stopAll(children: ChildHandle[], timeoutMs = 20_000): Promise<void> {
  await Promise.all(
    children.map(async (child) => {
      if (child.proc.exitCode !== null || child.proc.signalCode !== null) return;
      child.send({ type: 'stop' });
      const timer = setTimeout(() => child.proc.kill('SIGKILL'), timeoutMs);
      await child.exited;
      clearTimeout(timer);
    }),
  );
}

export async function killAll(children: ChildHandle[]): Promise<void> {
  await Promise.all(
    children.map(async (child) => {
      if (child.proc.exitCode !== null || child.proc.signalCode !== null) return;
      child.proc.kill('SIGKILL');
      await child.exited;
    }),
  );
}

/** Resident set size of a process in MiB, from /proc (Linux); NaN elsewhere. */
export function rssMiB(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = /VmRSS:\s+(\d+)\s+kB/.exec(status);
    return kb ? Number(kb[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** Sends `message` and resolves with the child's answer of type `answer` that carries the same id. */
function ask<T extends FromChild['type']>(child: ChildHandle, message: Extract<ToChild, { id: number }>, answer: T): Promise<Extract<FromChild, { type: T }>> {
  return new Promise((resolve) => {
    const onMessage = (reply: FromChild) => {
      if (reply.type === answer && (reply as { id?: number }).id === message.id) {
        child.proc.off('message', onMessage);
        resolve(reply as Extract<FromChild, { type: T }>);
      }
    };
    child.proc.on('message', onMessage);
    child.send(message);
  });
}

/** Handlers the child has run so far (its answer to `count`). */
export async function handledBy(child: ChildHandle, id: number): Promise<number> {
  return (await ask(child, { type: 'count', id }, 'counted')).handled;
}

/** Has the child note when its next handler starts (see `firstHandlerAfterArm`). */
export async function arm(child: ChildHandle, id: number): Promise<void> {
  await ask(child, { type: 'arm', id }, 'armed');
}

/** When the child's first handler after `arm` started, `monotonicMs` (undefined: none yet). */
export async function firstHandlerAfterArm(child: ChildHandle, id: number): Promise<number | undefined> {
  return (await ask(child, { type: 'count', id }, 'counted')).firstAfterArmMs;
}

/** Median IPC round trip to a child, ms (its half is the one-way share of a latency sample). */
export async function ipcRoundTripMs(child: ChildHandle, samples = 30): Promise<number> {
  const rtts: number[] = [];
  for (let id = 0; id < samples; id++) {
    const t0 = performance.now();
    await ask(child, { type: 'ping', id }, 'pong');
    rtts.push(performance.now() - t0);
  }
  return median(rtts);
}

/** Clock ticks per second of /proc's CPU times (USER_HZ: 100 on Linux for x86 and arm). */
const USER_HZ = 100;

/** Fields of /proc/<pid>/stat after the command name: [state, ppid, …]; null when unreadable. */
function statFields(pid: number | string): string[] | null {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** CPU time (user + system) a process has used so far, ms (10 ms resolution); NaN when unreadable. */
export function cpuMs(pid: number | undefined): number {
  const f = pid === undefined ? null : statFields(pid);
  return f ? ((Number(f[11]) + Number(f[12])) * 1000) / USER_HZ : NaN;
}

/**
 * CPU time used so far by each process named `command` on this machine (e.g. `postgres`: the
 * postmaster and all its backends), ms by pid, including what its exited children used (counted
 * in their parent's cutime/cstime once reaped, so a backend that exits keeps counting). Empty when
 * none is visible (a remote server). commandCpuMsSince takes the difference.
 */
export function commandCpuByPid(command: string): Map<number, number> {
  const byPid = new Map<number, number>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let comm: string;
    try {
      comm = fs.readFileSync(`/proc/${entry}/comm`, 'utf8').trim();
    } catch {
      continue;
    }
    if (comm !== command) continue;
    const f = statFields(entry);
    if (!f) continue;
    // utime, stime, cutime, cstime: a process's own time and its reaped children's.
    byPid.set(Number(entry), ((Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 1000) / USER_HZ);
  }
  return byPid;
}

/**
 * What the processes named `command` spent since `before` (commandCpuByPid), ms; NaN when none is
 * visible. Summed per process alive at the end (all of a new one's time): a server of another
 * program that stops meanwhile (a test's own) takes nothing away, where a difference of two
 * machine-wide sums went negative (test/bench.test.ts, under the suites' parallel servers).
 */
export function commandCpuMsSince(command: string, before: Map<number, number>): number {
  const now = commandCpuByPid(command);
  if (now.size === 0) return NaN;
  let total = 0;
  for (const [pid, ms] of now) total += Math.max(0, ms - (before.get(pid) ?? 0));
  return total;
}
