#!/usr/bin/env node
'use strict';
// Copies the contract (../../proto/mus/v1/*.proto) into ./proto/mus/v1/, so the bot's folder alone is enough
// to run it. Run by `npm ci` / `npm install` (the "prepare" script) and by `make js-bot`. Outside a checkout
// (no ../../proto) it leaves an existing copy alone.
const fs = require('node:fs');
const path = require('node:path');

const here = path.resolve(__dirname, '..');
const source = process.argv[2] ? path.resolve(process.argv[2]) : path.resolve(here, '..', '..', 'proto');
const from = path.join(source, 'mus', 'v1');
const to = path.join(here, 'proto', 'mus', 'v1');

if (!fs.existsSync(path.join(from, 'play.proto'))) {
  if (fs.existsSync(path.join(to, 'play.proto'))) process.exit(0);
  console.error(`copy-proto: no ${path.join(from, 'play.proto')}; give the include root as an argument`);
  process.exit(1);
}
fs.rmSync(to, { recursive: true, force: true });
fs.mkdirSync(to, { recursive: true });
const names = fs.readdirSync(from).filter((name) => name.endsWith('.proto')).sort();
for (const name of names) fs.copyFileSync(path.join(from, name), path.join(to, name));
console.error(`copy-proto: ${names.length} files from ${from} to ${to}`);
