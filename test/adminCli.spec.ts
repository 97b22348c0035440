// acta jobs retry|cancel|delete with ids (src/ops/cli/admin.ts; docs/operating.md, "Admin commands"):
// ids the action did not change are named on stderr with the rule, and the exit code is 1, as
// `acta cancel` does for one job, each with why: its status and the rule, or no such job; a filter
// that matches nothing is not an error. The client and the database are stubs answering as the
// database would (`statuses`: the jobs the namespace has): these are the CLI's rules, not the database's.
import { Command } from 'commander';
import { registerAdminCommands } from '../src/ops/cli/admin';

async function run(args: string[], answers: { retryJobs?: string[]; cancelJobs?: { cancelled: string[]; requested: string[] }; deleteJobs?: string[]; statuses?: Record<string, string> }) {
  const out: string[] = [];
  const err: string[] = [];
  const log = jest.spyOn(console, 'log').mockImplementation((line: string) => void out.push(line));
  const error = jest.spyOn(console, 'error').mockImplementation((line: string) => void err.push(line));
  process.exitCode = undefined;
  try {
    const cli = new Command().exitOverride();
    const client = { retryJobs: async () => answers.retryJobs, cancelJobs: async () => answers.cancelJobs, deleteJobs: async () => answers.deleteJobs };
    const db = {
      query: async (_text: string, [, ids]: [string, string[]]) => ({ rows: ids.filter((id) => answers.statuses?.[id] !== undefined).map((id) => ({ id, status: answers.statuses?.[id] })) }),
    };
    registerAdminCommands(cli, ((_ns: string, fn: (c: unknown, d: unknown) => Promise<unknown>) => fn(client, db)) as never);
    await cli.parseAsync(['node', 'acta', ...args]);
    return { out, err, exitCode: process.exitCode };
  } finally {
    log.mockRestore();
    error.mockRestore();
    process.exitCode = undefined;
  }
}

test('ids not changed are named with why: the job\'s status and the rule, or no such job; exit 1; the ones changed are printed', async () => {
  expect(await run(['jobs', 'cancel', '7', '99999', '8'], { cancelJobs: { cancelled: ['7'], requested: [] }, statuses: { 7: 'cancelled', 8: 'succeeded' } })).toEqual({
    out: ['cancelled: 1 (7)', 'requested: 0'],
    err: ['acta: jobs cancel: no job 99999 in namespace "default"', 'acta: jobs cancel: job 8 is succeeded: only Ready, Waiting or Executing jobs are cancelled'],
    exitCode: 1,
  });
  // The trial's case: a Succeeded job is not retried, and the line says it is Succeeded.
  expect(await run(['jobs', 'retry', '12', '3'], { retryJobs: [], statuses: { 12: 'succeeded' } })).toEqual({
    out: ['retried: 0'],
    err: ['acta: jobs retry: job 12 is succeeded: only Failed or Cancelled jobs are retried', 'acta: jobs retry: no job 3 in namespace "default"'],
    exitCode: 1,
  });
  // As typed (leading zeros), read as the database's id; beyond bigint is no job's.
  expect((await run(['jobs', 'delete', '009', '99999999999999999999', '--namespace', 'ops'], { deleteJobs: [], statuses: { 9: 'ready' } })).err).toEqual([
    'acta: jobs delete: job 009 is ready: only finished jobs (Succeeded, Failed, Cancelled) are deleted: cancel it first',
    'acta: jobs delete: no job 99999999999999999999 in namespace "ops"',
  ]);
  // A job that reached a status the action takes after it ran: not blamed on the rule.
  expect((await run(['jobs', 'retry', '5'], { retryJobs: [], statuses: { 5: 'failed' } })).err).toEqual(['acta: jobs retry: job 5 is failed now, and was not when the retry ran: run it again']);
  // The first 20 are named, the rest counted.
  const many = Array.from({ length: 23 }, (_, i) => String(100 + i));
  const { err } = await run(['jobs', 'retry', ...many], { retryJobs: [] });
  expect(err).toHaveLength(21);
  expect(err[20]).toBe('acta: jobs retry: and 3 more not retried');
});

test('every id changed, or a filter: exit 0, nothing on stderr, even when the filter matched nothing', async () => {
  expect(await run(['jobs', 'delete', '4', '5'], { deleteJobs: ['4', '5'] })).toEqual({ out: ['deleted: 2 (4, 5)'], err: [], exitCode: undefined });
  expect(await run(['jobs', 'retry', '--status', 'failed'], { retryJobs: [] })).toEqual({ out: ['retried: 0'], err: [], exitCode: undefined });
});

test('--json carries each unchanged id with the same why as the text lines (reasons: id, status, message), every one of them, not only the first 20', async () => {
  // Before, --json printed the ids alone: {"retried":[],"unchanged":["12","3"]}.
  const text = await run(['jobs', 'retry', '12', '3', '007'], { retryJobs: [], statuses: { 12: 'succeeded', 7: 'failed' } });
  const json = await run(['jobs', 'retry', '12', '3', '007', '--json'], { retryJobs: [], statuses: { 12: 'succeeded', 7: 'failed' } });
  expect(json.exitCode).toBe(1);
  expect(json.out).toHaveLength(1);
  const answer = JSON.parse(json.out[0]);
  expect(answer).toEqual({
    retried: [],
    unchanged: ['12', '3', '007'],
    reasons: [
      { id: '12', status: 'succeeded', message: 'job 12 is succeeded: only Failed or Cancelled jobs are retried' },
      { id: '3', status: null, message: 'no job 3 in namespace "default"' },
      { id: '007', status: 'failed', message: 'job 007 is failed now, and was not when the retry ran: run it again' },
    ],
  });
  expect(text.err).toEqual(answer.reasons.map((r: { message: string }) => `acta: jobs retry: ${r.message}`));
  expect(json.err).toEqual(text.err);
  const many = Array.from({ length: 23 }, (_, i) => String(100 + i));
  const all = JSON.parse((await run(['jobs', 'cancel', ...many, '--json'], { cancelJobs: { cancelled: [], requested: [] } })).out[0]);
  expect(all.reasons.map((r: { id: string }) => r.id)).toEqual(many);
});
