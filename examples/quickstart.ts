// README's quick start in TypeScript. In your project the import is from 'acta'; here, inside its
// repository, from the source.
import { connect, createClient, createWorker, defineJob } from '../src';

const greet = defineJob<{ name: string }, { greeting: string }>({
  name: 'greet',
  handler: async ({ name }) => ({ greeting: `hello, ${name}` }), // what it returns is the job's result
});

async function main(): Promise<void> {
  const db = await connect(); // DATABASE_URL if set, else the embedded PGlite database in ./.acta/data
  const worker = createWorker({ db, definitions: [greet] });
  await worker.start();
  const client = createClient({ db });
  const { id } = await client.enqueue(greet, { name: 'Ada' });
  const result = await client.result(id, { timeoutMs: 10_000 }); // follows the job to its end; typed { greeting: string } by greet's id
  console.log('succeeded', result);
  await worker.stop(); // waits for running handlers
  await db.close(); // last: an open pool or PGlite keeps the process alive
}

void main();
