import { connect, createClient, createWorker, defineJob } from 'acta';

const greet = defineJob({
  name: 'greet',
  /** @param {{ name: string }} payload */
  handler: async ({ name }) => ({ greeting: `hello, ${name}` }), // what it returns is the job's result
});

const db = await connect(); // DATABASE_URL if set, else the embedded PGlite database in ./.acta/data
const worker = createWorker({ db, definitions: [greet] });
await worker.start();
const client = createClient({ db });
const { id } = await client.enqueue(greet, { name: 'Ada' });
const result = await client.result(id, { timeoutMs: 10_000 }); // follows the job to its end
console.log('succeeded', result);
await worker.stop(); // waits for running handlers
await db.close(); // last: an open pool or PGlite keeps the process alive
