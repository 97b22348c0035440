/* `acta signal`: a signal to a job from the command line (client.signal; docs/workflows.md). */
import type { Command } from 'commander';
import { MAX_NAME_BYTES } from '../../config';
import { name } from './args';
import type { Client } from '../../client/client';
import { ActaError } from '../../errors';
import { jsonArgument } from './jsonArgument';

export type WithClient = <T>(namespace: string, fn: (client: Client) => Promise<T>) => Promise<T>;

/** Registers `acta signal <job> <name> [payload]` on `cli`. */
export function registerSignalCommand(cli: Command, withClient: WithClient): void {
  cli
    .command('signal <job> <name> [payload]')
    .description(
      'send signal <name> with a JSON payload (default null) to a job, by id or with --key by its idempotency key (client.signal): prints {"delivered":true,"consumed":…} (consumed: a wait took it now; else kept until one does); exits 1 saying why when not delivered (the job has ended, no such job, or --idempotency-key sent before)',
    )
    .option('--namespace <name>', 'queue namespace', name(MAX_NAME_BYTES), 'default')
    .option('--key', '<job> is the idempotency key the job was enqueued with')
    .option('--idempotency-key <key>', 'deliver this signal once, however often it is sent')
    .action(async (job: string, name: string, payload: string | undefined, o: { namespace: string; key?: boolean; idempotencyKey?: string }) => {
      const value = payload === undefined ? null : jsonArgument('payload', payload);
      const answer = await withClient(o.namespace, (client) => client.signal(o.key ? { idempotencyKey: job } : job, name, value, { idempotencyKey: o.idempotencyKey }));
      const to = o.key ? `the job of idempotency key ${JSON.stringify(job)}` : `job ${job}`;
      if (!answer.delivered) {
        // Why, in words as `acta why` and `acta jobs` say it ("no job 12 in namespace …"), the client's reason after it (test/cliJson.test.ts).
        const why = {
          not_found: `no ${o.key ? `job of idempotency key ${JSON.stringify(job)}` : `job ${job}`} in namespace "${o.namespace}"`,
          ended: `${to} has ended: a signal reaches a job until it ends`,
          duplicate: `a signal "${name}" of idempotency key ${JSON.stringify(o.idempotencyKey)} was delivered to ${to} before`,
        }[answer.reason];
        throw new ActaError('ACTA_SIGNAL_NOT_DELIVERED', `signal "${name}" not delivered to ${to}: ${why} (${answer.reason})`);
      }
      console.log(JSON.stringify(answer));
    });
}
