#!/usr/bin/env node
// Installs bench/'s own package (bench/package.json: the peer queues graphile-worker, pg-boss and
// BullMQ, and the Node 22 and 24 binaries) when bench/node_modules does not match
// bench/package-lock.json. acta does not need them at run time, so a user's install never brings
// them, and no `node` lands in the root node_modules/.bin, where npm scripts would run it in place of
// the machine's Node (test/node.spec.ts). `npm test`, `npm run typecheck` and `npm run bench` call
// this first; it needs the registry the first time.
'use strict';
const { spawnSync } = require('node:child_process');
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const bench = path.join(__dirname, '..', 'bench');
const lock = path.join(bench, 'package-lock.json');
// Written after a successful install: the lock's checksum that node_modules was installed from.
const marker = path.join(bench, 'node_modules', '.acta-installed-from');
const binaries = ['node-22', 'node-24'].map((name) => path.join(bench, 'node_modules', name, 'bin', 'node'));

const wanted = createHash('sha256').update(fs.readFileSync(lock)).digest('hex');
const installed = fs.existsSync(marker) ? fs.readFileSync(marker, 'utf8').trim() : '';
if (installed === wanted && binaries.every((file) => fs.existsSync(file))) process.exit(0);

console.error('acta: installing bench/ (the peer queues and the Node 22 and 24 binaries: bench/package.json)');
const npm = process.env.npm_execpath
  ? spawnSync(process.execPath, [process.env.npm_execpath, 'ci', '--no-audit', '--no-fund'], { cwd: bench, stdio: 'inherit' })
  : spawnSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: bench, stdio: 'inherit' });
if (npm.status !== 0) {
  console.error(
    `acta: \`npm ci\` in bench/ failed (${npm.error ? npm.error.message : `exit ${npm.status}`}). The Node 22/24 test runs and ` +
      '`npm run bench` need it: make the npm registry reachable and run `node scripts/bench-deps.js` again.',
  );
  process.exit(1);
}
fs.writeFileSync(marker, `${wanted}\n`);
