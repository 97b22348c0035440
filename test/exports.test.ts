// The package as a user installs it: `npm pack` of this checkout (the built dist/: `npm test`
// builds first), unpacked into node_modules/acta of a scratch project whose other node_modules are
// links to acta's own dependencies (and @types/node, which a TypeScript user has). There,
// package.json's `exports` gives `acta`, `acta/operators` and `acta/testing` to require, to import
// and to TypeScript (node16, nodenext, bundler), and refuses a deep import of dist/; so it does in
// a project that installed acta as a link to this checkout, as the README's quick start does.
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..');
const TSC = path.join(ROOT, 'node_modules', '.bin', 'tsc');
let scratch: string;

/** Runs `file args` in the scratch project to its end (60 s at most). */
function run(file: string, args: string[], cwd = scratch): Promise<{ code: number | string; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd, timeout: 60_000, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
      const code = err ? ((err as { code?: number }).code ?? (err as { signal?: string }).signal ?? -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}
const node = (args: string[]) => run(process.execPath, args);

beforeAll(async () => {
  if (!fs.existsSync(path.join(ROOT, 'dist', 'src', 'testing', 'index.js'))) throw new Error('dist/ is missing: run `npm run build` (npm test does)');
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-exports-'));
  // --ignore-scripts: no `prepare` (a build) while other suites may be reading dist/.
  const packed = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', scratch], ROOT);
  expect(packed).toMatchObject({ code: 0 });
  const [{ filename }] = JSON.parse(packed.stdout) as { filename: string }[];
  const modules = path.join(scratch, 'node_modules');
  fs.mkdirSync(modules);
  expect(await run('tar', ['-xzf', path.join(scratch, filename), '-C', modules])).toMatchObject({ code: 0 });
  fs.renameSync(path.join(modules, 'package'), path.join(modules, 'acta'));
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
  for (const dep of [...Object.keys(pkg.dependencies), '@types/node']) {
    fs.mkdirSync(path.dirname(path.join(modules, dep)), { recursive: true });
    fs.symlinkSync(path.join(ROOT, 'node_modules', dep), path.join(modules, dep), 'dir');
  }
  fs.writeFileSync(path.join(scratch, 'package.json'), JSON.stringify({ name: 'scratch', version: '1.0.0', private: true }));
}, 120_000);

afterAll(() => {
  if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
});

test('require: acta, acta/operators, acta/testing and acta/package.json; runAttempt from the package runs a job', async () => {
  const script = `
    const acta = require('acta');
    const operators = require('acta/operators');
    const testing = require('acta/testing');
    const job = acta.defineJob({ name: 'greet', handler: (p) => ({ greeting: 'hello, ' + p.name }) });
    testing.runAttempt(job, { name: 'Ada' }).then((run) => console.log(JSON.stringify({
      acta: [typeof acta.createWorker, typeof acta.defineJob, typeof acta.isTransientDbError, acta.isTransientDbError({ code: 'ECONNREFUSED' })],
      operators: [typeof operators.retryBackoff, typeof operators.bufferBounded],
      testing: typeof testing.runAttempt,
      version: require('acta/package.json').version,
      run: [run.outcome, run.result],
    })));`;
  const out = await node(['-e', script]);
  expect(out).toMatchObject({ code: 0, stderr: '' });
  expect(JSON.parse(out.stdout)).toEqual({
    acta: ['function', 'function', 'function', true],
    operators: ['function', 'function'],
    testing: 'function',
    version: JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version,
    run: ['succeeded', { greeting: 'hello, Ada' }],
  });
});

test('import from an ES module: the same three, named exports included', async () => {
  const script = `
    import { createWorker, isTransientDbError } from 'acta';
    import { retryBackoff } from 'acta/operators';
    import { runAttempt } from 'acta/testing';
    console.log([createWorker, retryBackoff, runAttempt, isTransientDbError].map((f) => typeof f).join(' '));`;
  expect(await node(['--input-type=module', '-e', script])).toEqual({ code: 0, stdout: 'function function function function\n', stderr: '' });
});

test('a deep import of dist/ is refused (ERR_PACKAGE_PATH_NOT_EXPORTED), by require and by import', async () => {
  const required = await node(['-e', "try { require('acta/dist/src/worker'); } catch (err) { console.log(err.code); }"]);
  expect(required).toEqual({ code: 0, stdout: 'ERR_PACKAGE_PATH_NOT_EXPORTED\n', stderr: '' });
  const imported = await node(['--input-type=module', '-e', "import('acta/dist/src/testing/index.js').catch((err) => console.log(err.code));"]);
  expect(imported).toEqual({ code: 0, stdout: 'ERR_PACKAGE_PATH_NOT_EXPORTED\n', stderr: '' });
});

test("installed as a link to the checkout (the README's `npm install /path/to/acta`): the same three, and no deep import", async () => {
  const linked = path.join(scratch, 'linked');
  fs.mkdirSync(path.join(linked, 'node_modules'), { recursive: true });
  fs.symlinkSync(ROOT, path.join(linked, 'node_modules', 'acta'), 'dir');
  const script = `
    console.log([require('acta').createWorker, require('acta/operators').retryBackoff, require('acta/testing').runAttempt].map((f) => typeof f).join(' '));
    try { require('acta/dist/src/worker'); } catch (err) { console.log(err.code); }`;
  expect(await run(process.execPath, ['-e', script], linked)).toEqual({ code: 0, stdout: 'function function function\nERR_PACKAGE_PATH_NOT_EXPORTED\n', stderr: '' });
});

test("the installed command line runs (bin/acta.js reaches dist/ by its own relative path)", async () => {
  const help = await node([path.join(scratch, 'node_modules', 'acta', 'bin', 'acta.js'), '--help']);
  expect(help).toMatchObject({ code: 0, stderr: '' });
  expect(help.stdout).toContain('migrate');
});

test('nothing in src/ imports acta/testing: it is an entry of its own, over src/', () => {
  const offenders: string[] = [];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const file = path.join(dir, e.name);
      if (e.isDirectory()) {
        if (file !== path.join(ROOT, 'src', 'testing')) walk(file);
      } else if (/from '(\.\.?\/)+(src\/)?testing(\/[^']*)?'/.test(fs.readFileSync(file, 'utf8'))) {
        offenders.push(path.relative(ROOT, file));
      }
    }
  };
  walk(path.join(ROOT, 'src'));
  expect(offenders).toEqual([]);
});

describe('TypeScript finds the types of the three, and refuses a deep import', () => {
  // Types are checked, not only found: a wrong payload must be an error where the comment says.
  const user = `
    import { defineJob, isTransientDbError, type Client, type JobContext } from 'acta';
    import { retryBackoff } from 'acta/operators';
    import { runAttempt, type AttemptRun } from 'acta/testing';
    const greet = defineJob({ name: 'greet', handler: async (p: { name: string }, ctx: JobContext) => ({ greeting: 'hello, ' + p.name, attempt: ctx.attempt }) });
    export async function check(): Promise<string | undefined> {
      const run: AttemptRun<{ greeting: string; attempt: number }> = await runAttempt(greet, { name: 'Ada' });
      // @ts-expect-error the payload is checked against the handler's
      await runAttempt(greet, { nom: 'Ada' });
      void retryBackoff;
      return run.result?.greeting;
    }
    // The id enqueue answers carries the result type to result(), in its JSON form (a Date as a string).
    export async function typed(client: Client): Promise<string> {
      const stamped = defineJob({ name: 'stamped', handler: async (p: { name: string }) => ({ greeting: p.name, at: new Date() }) });
      const { id } = await client.enqueue(stamped, { name: 'Ada' });
      const result = await client.result(id);
      // @ts-expect-error at comes back as its ISO string
      result.at.getTime();
      return result.greeting + result.at.toUpperCase() + id.padStart(20, '0');
    }
    // A database's error is the driver's: the predicate takes whatever was thrown.
    export const transient: boolean = isTransientDbError(new Error('Connection terminated unexpectedly'));
    // @ts-expect-error one argument: a second (an index, as map passes) is refused
    isTransientDbError(new Error('x'), 5);
  `;
  const deep = `import { createWorker } from 'acta/dist/src/worker';\nvoid createWorker;\n`;
  const configs: Record<string, { module: string; moduleResolution: string; files: string[] }> = {
    node16: { module: 'node16', moduleResolution: 'node16', files: ['user.ts', 'user.mts'] },
    nodenext: { module: 'nodenext', moduleResolution: 'nodenext', files: ['user.ts', 'user.mts'] },
    bundler: { module: 'esnext', moduleResolution: 'bundler', files: ['user.ts'] },
  };
  const compile = async (name: string, files: string[]) => {
    const { module, moduleResolution } = configs[name];
    const compilerOptions = { module, moduleResolution, target: 'es2022', strict: true, noEmit: true, types: ['node'], skipLibCheck: false };
    fs.writeFileSync(path.join(scratch, `tsconfig.${name}.json`), JSON.stringify({ compilerOptions, files }));
    return run(TSC, ['-p', `tsconfig.${name}.json`, '--pretty', 'false']);
  };
  beforeAll(() => {
    for (const f of ['user.ts', 'user.mts']) fs.writeFileSync(path.join(scratch, f), user);
    fs.writeFileSync(path.join(scratch, 'deep.ts'), deep);
  });

  test.each(Object.keys(configs))('moduleResolution %s', async (name) => {
    expect(await compile(name, configs[name].files)).toEqual({ code: 0, stdout: '', stderr: '' });
    const refused = await compile(name, ['deep.ts']);
    expect(refused.code).not.toBe(0);
    expect(refused.stdout).toMatch(/^deep\.ts\(1,30\): error TS2307: Cannot find module 'acta\/dist\/src\/worker'/);
  });
});
