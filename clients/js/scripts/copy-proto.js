#!/usr/bin/env node
'use strict';
// Copies the contract (../../proto/mus/v1/*.proto, or the include root given as an argument) into
// ./proto/mus/v1/, so that the bot's folder alone is enough to run it (a sandbox may bind only this folder).
// Run by `npm ci` / `npm install` (the "prepare" script) and by `make js-bot`. A file already up to date is left
// alone, and a changed one is replaced by a rename, so a bot running meanwhile never reads half a file. Outside a
// checkout (no ../../proto) an existing copy is kept.
const fs = require('node:fs');
const path = require('node:path');

const here = path.resolve(__dirname, '..');
const source = process.argv[2] ? path.resolve(process.argv[2]) : path.resolve(here, '..', '..', 'proto');
const from = path.join(source, 'mus', 'v1');
const to = path.join(here, 'proto', 'mus', 'v1');

if (!fs.existsSync(path.join(from, 'play.proto'))) {
  if (fs.existsSync(path.join(to, 'play.proto'))) process.exit(0);
  console.error(`copy-proto: no ${path.join(from, 'play.proto')}; give the include root (the folder that holds mus/) as an argument`);
  process.exit(1);
}
fs.mkdirSync(to, { recursive: true });
const names = fs.readdirSync(from).filter((name) => name.endsWith('.proto')).sort();
let changed = 0;
for (const name of names) {
  const text = fs.readFileSync(path.join(from, name));
  const target = path.join(to, name);
  if (fs.existsSync(target) && fs.readFileSync(target).equals(text)) continue;
  const temporary = `${target}.${process.pid}.tmp`;
  fs.writeFileSync(temporary, text);
  fs.renameSync(temporary, target);
  changed += 1;
}
for (const name of fs.readdirSync(to)) {
  if (name.endsWith('.proto') && !names.includes(name)) fs.rmSync(path.join(to, name));
}
if (changed) console.error(`copy-proto: ${changed} of ${names.length} files copied from ${from} to ${to}`);
