#!/usr/bin/env node
// Writes sql/functions.lock: the revision of the SQL function files and the checksums it stands for.
// Run it (`npm run sql:lock`) after changing a file in sql/functions/; it bumps the revision when any
// checksum changed, and test/db/migrator.test.ts fails until it has been run. The migrator records the
// revision, and an older acta refuses a database at a higher one (src/db/migrator.ts, SchemaNewerError).
'use strict';
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const sql = path.join(__dirname, '..', 'sql');
const lockPath = path.join(sql, 'functions.lock');
const checksums = {};
for (const f of fs.readdirSync(path.join(sql, 'functions')).filter((f) => f.endsWith('.sql')).sort()) {
  checksums[`functions/${f}`] = createHash('sha256').update(fs.readFileSync(path.join(sql, 'functions', f), 'utf8')).digest('hex');
}
const old = fs.existsSync(lockPath) ? JSON.parse(fs.readFileSync(lockPath, 'utf8')) : { revision: 0, checksums: {} };
const same = JSON.stringify(old.checksums) === JSON.stringify(checksums);
const lock = { revision: same ? old.revision : old.revision + 1, checksums };
fs.writeFileSync(lockPath, `${JSON.stringify(lock, null, 2)}\n`);
console.log(same ? `sql/functions.lock: revision ${lock.revision}, unchanged` : `sql/functions.lock: revision ${old.revision} -> ${lock.revision}`);
