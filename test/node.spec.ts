// Each run of the suites is on the Node it claims. package.json's scripts set ACTA_TEST_NODE: a
// major (22, 24) for the runs on bench/'s Node binaries, `machine` for the run on the machine's own
// Node, the first `node` on PATH outside any node_modules/.bin (npm puts those first on a script's
// PATH, so a `node` installed there would stand in for the machine's under npm: docs/development.md).
import * as fs from 'node:fs';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..');
const claim = process.env.ACTA_TEST_NODE;
const major = Number(process.versions.node.split('.')[0]);

/** The machine's Node: the first executable `node` on PATH, skipping every node_modules/.bin. */
function machineNode(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir === '' || path.normalize(dir).split(path.sep).slice(-2).join('/') === 'node_modules/.bin') continue;
    const file = path.join(dir, 'node');
    try {
      fs.accessSync(file, fs.constants.X_OK);
      if (fs.statSync(file).isFile()) return fs.realpathSync(file);
    } catch {
      // not here
    }
  }
  return undefined;
}

test('the suites run on the Node this run claims (ACTA_TEST_NODE)', () => {
  console.log(`acta tests: Node ${process.version} at ${process.execPath} (ACTA_TEST_NODE=${claim ?? 'unset'})`);
  expect(major).toBeGreaterThanOrEqual(20); // package.json's engines
  if (claim === undefined) return; // jest started by hand: whatever Node started it
  if (claim === 'machine') {
    expect(fs.realpathSync(process.execPath)).toBe(machineNode());
  } else {
    expect(claim).toMatch(/^\d+$/);
    expect(process.version).toMatch(new RegExp(`^v${claim}\\.`));
  }
});

test('no `node` in the package\'s node_modules/.bin, where it would shadow the machine\'s under npm', () => {
  expect(fs.existsSync(path.join(ROOT, 'node_modules', '.bin', 'node'))).toBe(false);
});
