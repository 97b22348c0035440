/* `acta publish`: an event from the command line (client.publish; docs/outbox.md). */
import type { Command } from 'commander';
import { MAX_NAME_BYTES } from '../../config';
import { name } from './args';
import { jsonArgument } from './jsonArgument';
import type { WithClient } from './signal';

/** Registers `acta publish <topic> <message>` on `cli`. */
export function registerPublishCommand(cli: Command, withClient: WithClient): void {
  cli
    .command('publish <topic> <message>')
    .description('publish an event with a JSON message on <topic> (client.publish): sys.outbox makes it one job per subscribed definition; prints {"id":…}')
    .option('--namespace <name>', 'queue namespace', name(MAX_NAME_BYTES), 'default')
    .option('--key <key>', 'events of one key reach each subscriber in publish order')
    .action(async (topic: string, message: string, o: { namespace: string; key?: string }) => {
      const value = jsonArgument('message', message);
      const answer = await withClient(o.namespace, (client) => client.publish(topic, value, o.key === undefined ? {} : { key: o.key }));
      console.log(JSON.stringify(answer));
    });
}
