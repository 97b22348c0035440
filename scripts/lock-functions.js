#!/usr/bin/env node
// Writes sql/functions.lock: the revision of the SQL function files and the checksums it stands for.
// Run it (`npm run sql:lock`) after changing a file in sql/functions/; it bumps the revision when any
// checksum changed, and test/db/migrator.test.ts fails until it has been run. The migrator records the
// revision, and an older acta refuses a database at a higher one (src/db/migrator.ts, SchemaNewerError).
// The migrator keys a function file by its name, so a renamed file counts as changed: the revision
// goes up, and a database migrated under the old name gets the file applied under the new one.
// Each file defines one function or procedure and is named after it (`claim_jobs.sql` holds
// acta.claim_jobs); the lock is not written otherwise.
'use strict';
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const sql = path.join(__dirname, '..', 'sql');
const lockPath = path.join(sql, 'functions.lock');
const checksums = {};
const misnamed = [];
for (const f of fs.readdirSync(path.join(sql, 'functions')).filter((f) => f.endsWith('.sql')).sort()) {
  const text = fs.readFileSync(path.join(sql, 'functions', f), 'utf8');
  const defined = [...text.matchAll(/^create\s+(?:or\s+replace\s+)?(?:function|procedure)\s+acta\.(\w+)\s*\(/gim)].map((m) => m[1]);
  if (defined.length !== 1 || `${defined[0]}.sql` !== f) misnamed.push(`${f} defines ${defined.map((d) => `acta.${d}`).join(', ') || 'no function'}`);
  checksums[`functions/${f}`] = createHash('sha256').update(text).digest('hex');
}
if (misnamed.length > 0) {
  console.error(`sql/functions/: one function per file, named after it:\n  ${misnamed.join('\n  ')}`);
  process.exit(1);
}
const old = fs.existsSync(lockPath) ? JSON.parse(fs.readFileSync(lockPath, 'utf8')) : { revision: 0, checksums: {} };
const same = JSON.stringify(old.checksums) === JSON.stringify(checksums);
const lock = { revision: same ? old.revision : old.revision + 1, checksums };
fs.writeFileSync(lockPath, `${JSON.stringify(lock, null, 2)}\n`);
console.log(same ? `sql/functions.lock: revision ${lock.revision}, unchanged` : `sql/functions.lock: revision ${old.revision} -> ${lock.revision} (then \`npm run sql:schema\` for sql/schema.sql)`);
