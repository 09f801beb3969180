'use strict';
// Loading the Mus Arena contract (proto/mus/v1/*.proto) at run time with @grpc/proto-loader.
//
// The include root is the folder that holds `mus/v1/`: the .proto files import each other as
// "mus/v1/types.proto", so the root is `proto/`, not `proto/mus/v1/`.
//
// Where the bot finds it, first match wins:
//   1. MUS_PROTO_DIR, when set (an include root: a folder with mus/v1/play.proto inside);
//   2. ./proto next to this file: the copy that `npm ci` / `npm install` (the "prepare" script) or
//      `make js-bot` makes, so that the bot's folder alone is enough to run it (in a sandbox that binds only
//      clients/js, for example);
//   3. ../../proto: the repository's own copy, when the bot runs from a checkout.

const fs = require('node:fs');
const path = require('node:path');
const protoLoader = require('@grpc/proto-loader');
const grpc = require('@grpc/grpc-js');

const PROTO_FILES = ['mus/v1/play.proto', 'mus/v1/lobby.proto'];

// How messages look in JavaScript:
// - keepCase: field names as in the .proto files (decision_id, legal_actions), not camelCase;
// - longs: String: every uint64 (decision ids, event seqs, ping nonces) is a decimal string, because a JS
//   number loses precision past 2^53; compare them as BigInt, echo them back as the string received;
// - enums: String: enum values are their names ("ACTION_KIND_PASO"); names are accepted when sending too;
// - defaults: true: absent scalars read as 0 / "" / false, absent repeated fields as [], absent messages as null;
// - oneofs: true: each oneof also sets a field naming the member that is set (response.message === 'update').
const LOADER_OPTIONS = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };

function protoRoot() {
  const override = process.env.MUS_PROTO_DIR;
  if (override) {
    const dir = path.resolve(override);
    if (!fs.existsSync(path.join(dir, 'mus', 'v1', 'play.proto'))) {
      throw new Error(`MUS_PROTO_DIR=${override} has no mus/v1/play.proto: give the include root, the folder that holds mus/`);
    }
    return dir;
  }
  const candidates = [path.join(__dirname, 'proto'), path.resolve(__dirname, '..', '..', 'proto')];
  for (const dir of candidates) {
    if (fs.existsSync(path.join(dir, 'mus', 'v1', 'play.proto'))) return dir;
  }
  throw new Error(`no mus/v1/play.proto in ${candidates.join(' or ')}: run \`npm ci\` in the bot folder or set MUS_PROTO_DIR`);
}

// The mus.v1 package: service constructors (PlayService, LobbyService) for grpc-js.
function loadMus() {
  const root = protoRoot();
  const definition = protoLoader.loadSync(PROTO_FILES, { ...LOADER_OPTIONS, includeDirs: [root] });
  return grpc.loadPackageDefinition(definition).mus.v1;
}

module.exports = { loadMus, protoRoot, PROTO_FILES };
