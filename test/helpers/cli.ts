import { type ChildProcess, execFile, spawn } from 'node:child_process';
import * as path from 'node:path';

export const ROOT = path.resolve(__dirname, '../..');
export const BIN = path.join(ROOT, 'bin', 'acta.js');

/** Runs the built `acta <args>` to completion with `env` (exit code -1: killed by the guard, 30 s unless given). */
export function runActa(args: string[], env: NodeJS.ProcessEnv, timeoutMs = 30_000): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { cwd: ROOT, env, timeout: timeoutMs }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

/** Each line of `--json` output, parsed. */
export const jsonLines = (stdout: string): Record<string, unknown>[] =>
  stdout.trim().split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>);

/** A running `acta <args>` (e.g. `worker`), kept in `children` for the file's afterAll to kill; its output is stdout and stderr together. */
export function spawnActa(args: string[], env: NodeJS.ProcessEnv, children: ChildProcess[]): { child: ChildProcess; exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>; output: () => string } {
  const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return { child, exited, output: () => output };
}
