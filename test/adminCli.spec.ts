// acta jobs retry|cancel|delete with ids (src/ops/cli/admin.ts; docs/operating.md, "Admin commands"):
// ids the action did not change are named on stderr with the rule, and the exit code is 1, as
// `acta cancel` does for one job; a filter that matches nothing is not an error. The client is a
// stub answering as the database would: these are the CLI's rules, not the database's.
import { Command } from 'commander';
import { registerAdminCommands } from '../src/ops/cli/admin';

async function run(args: string[], answers: { retryJobs?: string[]; cancelJobs?: { cancelled: string[]; requested: string[] }; deleteJobs?: string[] }) {
  const out: string[] = [];
  const err: string[] = [];
  const log = jest.spyOn(console, 'log').mockImplementation((line: string) => void out.push(line));
  const error = jest.spyOn(console, 'error').mockImplementation((line: string) => void err.push(line));
  process.exitCode = undefined;
  try {
    const cli = new Command().exitOverride();
    const client = { retryJobs: async () => answers.retryJobs, cancelJobs: async () => answers.cancelJobs, deleteJobs: async () => answers.deleteJobs };
    registerAdminCommands(cli, ((_ns: string, fn: (c: unknown) => Promise<unknown>) => fn(client)) as never);
    await cli.parseAsync(['node', 'acta', ...args]);
    return { out, err, exitCode: process.exitCode };
  } finally {
    log.mockRestore();
    error.mockRestore();
    process.exitCode = undefined;
  }
}

test('ids not changed are named with the rule, exit 1; the ones changed are printed', async () => {
  expect(await run(['jobs', 'cancel', '7', '99999'], { cancelJobs: { cancelled: ['7'], requested: [] } })).toEqual({
    out: ['cancelled: 1 (7)', 'requested: 0'],
    err: ['acta: jobs cancel: job 99999 not cancelled (finished, or no such job in namespace "default")'],
    exitCode: 1,
  });
  expect(await run(['jobs', 'retry', '2', '3', '--json'], { retryJobs: [] })).toEqual({
    out: ['{"retried":[],"unchanged":["2","3"]}'],
    err: ['acta: jobs retry: jobs 2, 3 not retried (not Failed or Cancelled, or no such job in namespace "default")'],
    exitCode: 1,
  });
  expect((await run(['jobs', 'delete', '9', '--namespace', 'ops'], { deleteJobs: [] })).err).toEqual(['acta: jobs delete: job 9 not deleted (not finished: cancel it first; or no such job in namespace "ops")']);
});

test('every id changed, or a filter: exit 0, nothing on stderr, even when the filter matched nothing', async () => {
  expect(await run(['jobs', 'delete', '4', '5'], { deleteJobs: ['4', '5'] })).toEqual({ out: ['deleted: 2 (4, 5)'], err: [], exitCode: undefined });
  expect(await run(['jobs', 'retry', '--status', 'failed'], { retryJobs: [] })).toEqual({ out: ['retried: 0'], err: [], exitCode: undefined });
});
