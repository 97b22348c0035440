#!/usr/bin/env node
'use strict';
// The acta command line; the compiled sources live in dist/ (built by `npm install` / `npm run build`).
require('../dist/src/ops/cli/main.js').main();
