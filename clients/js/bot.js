#!/usr/bin/env node
'use strict';
// mus-js-bot: a Mus Arena bot in JavaScript (Node 20, @grpc/grpc-js, @grpc/proto-loader).
//
//   node bot.js                  play one seat: MUS_REFEREE (host:port or unix:/path), MUS_TOKEN (seat token);
//                                over frames at MUS_FRAMES when the worker offers them (docs/protocol.md)
//   node bot.js --remote [--max-matches N] [--matches N]
//                                wait in the lobby (MUS_TOKEN is then the bot's lobby token) and play every
//                                seat it is offered, each on its own Play stream, in this one process
//   --strategy FILE              choose with FILE's chooseAction(request, rules) instead of strategy.js's
//   MUS_SEATS=stdin node bot.js  play seat after seat in this one process (a persistent bot, docs/pool.md): one
//                                JSON line per seat on stdin, {"referee": ADDRESS, "seat_token": TOKEN}; exit 0
//                                at the end of the input. A line that names "frames" is played there, over
//                                frames (the same Play stream without HTTP/2, docs/pool.md "Frames")
//
// Everything a bot needs over the bare wire (proto/mus/v1/play.proto and lobby.proto, docs/protocol.md):
//   1. Open PlayService.Play and send Join (batch_events = true: a step's events and this seat's decision come
//      in one Update message).
//   2. Answer every DecisionRequest at once with Act, echoing its decision_id (a uint64: kept as the decimal
//      string proto-loader gives, see proto.js). The strategy is strategy.js's chooseAction().
//   3. ActionRejected with decision_open: answer again with the first legal action (the fallback that cannot
//      be wrong). Without decision_open (DECISION_CLOSED, NOT_ASKED, or an illegal action under
//      illegal_action_policy = default_action) there is nothing left to answer.
//   4. Exit 0 once the Outcome has arrived. If the stream drops (UNAVAILABLE, INTERNAL) before that, join again
//      with the same token and Join.next_seq = the seq of the next event we expect; the referee re-sends the
//      missed events and the open decision (same id), which gets the answer already chosen.
// Any failure exits 1 with a one-line message on stderr. Logs go to stderr (the league keeps them per seat).

const net = require('node:net');
const { EventEmitter } = require('node:events');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const { loadMus } = require('./proto');
const builtin = require('./strategy');
const { version: BOT_VERSION } = require('./package.json');

const BOT_NAME = 'js-bot';
const PROTOCOL_VERSION = 1; // the newest Join.protocol_version this bot speaks

// Rejoining after a dropped stream: the referee keeps a dropped seat for its grace period (5 s by default, and
// configurable), which the bot cannot know; it keeps trying, with a growing pause (0.1, 0.2, 0.4, 0.8 then every
// 1 s), for twice that default from its last successful join, as the Python SDK does (run_bot's grace_s).
const REJOIN_PATIENCE_MS = 10000;
const FIRST_PAUSE_MS = 100;
const MAX_PAUSE_MS = 1000;
// The lobby learns a remote bot's token only when a league that needs the bot registers it (RegisterRemoteBot):
// until then it answers UNAUTHENTICATED. A remote bot keeps asking: after 1 s, then 2, 4, 8 and every 10 s.
const UNKNOWN_TOKEN_FIRST_MS = 1000;
const UNKNOWN_TOKEN_MAX_MS = 10000;

// Reconnect quickly after a drop: grpc-js's default first reconnect backoff is 1 s, a fifth of the grace period.
const CHANNEL_OPTIONS = {
  'grpc.initial_reconnect_backoff_ms': FIRST_PAUSE_MS,
  'grpc.max_reconnect_backoff_ms': MAX_PAUSE_MS,
};

// Transient statuses: the connection dropped (or the referee is not up yet); worth joining again.
const TRANSIENT = new Set([grpc.status.UNAVAILABLE, grpc.status.INTERNAL]);

const STATUS_NAMES = Object.fromEntries(Object.entries(grpc.status).map(([name, code]) => [code, name]));

class Failure extends Error {}

let strategy = builtin; // --strategy FILE replaces it

function log(message) {
  process.stderr.write(`${BOT_NAME}: ${message}\n`);
}

function describe(status) {
  return `${STATUS_NAMES[status.code] || status.code}: ${status.details}`;
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// ------------------------------------------------------------------------------------------------ one seat

// One seat of one match, across every stream it takes to finish it (a dropped stream is joined again).
class Seat {
  constructor(token, label = '') {
    this.token = token;
    this.label = label; // a prefix for the logs of a remote bot, which plays many seats at once
    this.nextSeq = 0n; // the seq of the next event we expect (uint64: a BigInt here, a string on the wire)
    this.joins = 0;
    this.seat = null;
    this.rules = {};
    this.open = null; // the last DecisionRequest
    this.answer = null; // {decisionId, action}: its answer
    this.outcome = null;
    this.stream = null;
    this.error = null; // a Failure raised while reading the stream
  }

  log(message) {
    log(`${this.label}${this.seat === null ? '' : `seat ${this.seat}: `}${message}`);
  }

  // Joins (or rejoins from nextSeq) and plays until the referee closes the stream; resolves to its status.
  playStream(client) {
    return new Promise((resolve) => {
      const call = client.Play();
      this.stream = call;
      call.on('data', (response) => {
        try {
          this.handle(response);
        } catch (error) {
          this.error = error;
          call.cancel();
        }
      });
      call.on('error', () => {}); // the same news as the 'status' event, which says it all
      call.on('end', () => call.end()); // the referee is done sending: half-close our side too
      call.on('status', (status) => {
        this.stream = null;
        resolve(status);
      });
      call.write({
        join: {
          seat_token: this.token,
          bot_name: BOT_NAME,
          bot_version: BOT_VERSION,
          protocol_version: PROTOCOL_VERSION,
          next_seq: this.nextSeq.toString(), // 0 on the first join: every event from the start
          batch_events: true,
        },
      });
    });
  }

  handle(response) {
    switch (response.message) {
      case 'joined':
        this.onJoined(response.joined);
        break;
      case 'update': // with batch_events: the step's events, then this seat's decision if any
        for (const event of response.update.events) this.onEvent(event);
        if (response.update.decision_request) this.onDecision(response.update.decision_request);
        break;
      case 'event': // the same content without batching: handled too
        this.onEvent(response.event);
        break;
      case 'decision_request':
        this.onDecision(response.decision_request);
        break;
      case 'action_rejected':
        this.onRejected(response.action_rejected);
        break;
      case 'outcome':
        this.outcome = response.outcome;
        this.log(`outcome: ${this.outcome.winner_team} wins (${this.outcome.termination})`);
        break;
      default: // pong, or a message of a newer protocol: nothing to do
        break;
    }
  }

  onJoined(joined) {
    if (joined.protocol_version > PROTOCOL_VERSION) {
      throw new Failure(`the referee speaks protocol version ${joined.protocol_version}; this bot speaks ${PROTOCOL_VERSION}`);
    }
    this.joins += 1;
    this.seat = joined.seat;
    this.rules = joined.rules; // docs/rules.md section 14, values as text: {target_score: "40", ...}
    this.log(`table ${joined.table_id}: ${joined.resumed ? `joined again from event ${this.nextSeq}` : 'joined'}`);
  }

  onEvent(event) {
    const seq = BigInt(event.seq);
    if (seq < this.nextSeq) return; // already seen before a rejoin
    this.nextSeq = seq + 1n;
    // A bot that tracks the match reads event.payload here ('bet_made', 'hands_shown', ...). This one needs
    // nothing: every DecisionRequest carries the seat's whole view.
  }

  onDecision(request) {
    this.open = request;
    // After a rejoin the referee sends the open decision again (same id): keep the answer already chosen.
    if (!this.answer || this.answer.decisionId !== request.decision_id) this.choose(request.legal_actions, false);
    this.send();
  }

  onRejected(rejected) {
    this.log(`decision ${rejected.decision_id}: action rejected (${rejected.code}): ${rejected.reason}`);
    const open = this.open;
    if (!rejected.decision_open || !open || open.decision_id !== rejected.decision_id) return;
    // Still open (illegal_action_policy = retry): answer with the first legal action it lists.
    this.choose(rejected.legal_actions.length ? rejected.legal_actions : open.legal_actions, true);
    this.send();
  }

  choose(legal, fallback) {
    const request = this.open;
    if (!legal.length) { // never sent by the referee; answering nothing lets the decision time out
      this.log(`decision ${request.decision_id} has no legal actions`);
      this.answer = null;
      return;
    }
    let action;
    if (fallback) {
      action = builtin.safeAction(request, legal);
    } else {
      try {
        action = strategy.chooseAction({ ...request, legal_actions: legal }, this.rules);
        if (!action || typeof action !== 'object') throw new Error(`chooseAction returned ${action}`);
      } catch (error) {
        this.log(`the strategy failed (${error.message}); answering with the first legal action`);
        action = builtin.safeAction(request, legal);
      }
    }
    this.answer = { decisionId: request.decision_id, action };
  }

  send() {
    if (!this.answer || !this.stream) return;
    this.stream.write({ act: { decision_id: this.answer.decisionId, action: this.answer.action } });
  }
}

// Plays one seat to its outcome; throws a Failure saying why it could not.
async function playSeat(client, referee, token, label = '') {
  const seat = new Seat(token, label);
  let lostSince = Date.now(); // the patience runs from the last successful join
  let pause = FIRST_PAUSE_MS;
  for (;;) {
    const joins = seat.joins;
    const status = await seat.playStream(client);
    if (seat.error) throw seat.error instanceof Failure ? seat.error : new Failure(`internal error: ${seat.error.stack}`);
    if (seat.outcome) return seat.outcome; // the match is over for this seat
    if (status.code === grpc.status.OK) throw new Failure('the referee closed the stream before sending the outcome');
    // A rejoin may race the referee noticing that the old stream ended: ALREADY_EXISTS. A join refused
    // RESOURCE_EXHAUSTED (a referee full of streams waiting to join closes the oldest to make room) is tried
    // again too. Anything else is a refusal (UNAUTHENTICATED token, FAILED_PRECONDITION table finished or seat
    // dropped, ABORTED, ...).
    const rejoining = seat.joins > 0;
    const refused = seat.joins === joins && status.code === grpc.status.RESOURCE_EXHAUSTED;
    if (!TRANSIENT.has(status.code) && !refused && !(rejoining && status.code === grpc.status.ALREADY_EXISTS)) {
      throw new Failure(`the referee at ${referee} ended the stream: ${describe(status)}`);
    }
    const now = Date.now();
    if (seat.joins > joins) { // this stream had joined: start counting again
      lostSince = now;
      pause = FIRST_PAUSE_MS;
    }
    if (now - lostSince > REJOIN_PATIENCE_MS) {
      throw new Failure(`lost the referee at ${referee} (${describe(status)}) and could not join again within ${REJOIN_PATIENCE_MS / 1000} s`);
    }
    seat.log(`stream ended (${describe(status)}); joining again in ${pause} ms`);
    await sleep(pause);
    pause = Math.min(pause * 2, MAX_PAUSE_MS);
  }
}

// ------------------------------------------------------------------------------------------------ frames

// The Play stream over frames (docs/pool.md, "Frames"): one connection to a unix socket is one stream, each
// message a frame (a flags byte, a 4-byte big-endian length, the message), the referee's status last (flags
// 0x80, "grpc-status: N\r\ngrpc-message: TEXT\r\n"). FrameCall looks like grpc-js's duplex call to Seat:
// 'data', 'end' and 'status' events, write(), end() and cancel(); the messages are coded by proto-loader's own
// serializers of PlayService.Play, so they read exactly as over gRPC.
class FrameCall extends EventEmitter {
  constructor(socketPath, method) {
    super();
    this.method = method;
    this.pending = Buffer.alloc(0);
    this.done = false;
    this.socket = net.createConnection(socketPath);
    this.socket.on('data', (chunk) => this.receive(chunk));
    this.socket.on('error', (error) => this.finish({ code: grpc.status.UNAVAILABLE, details: error.message }));
    this.socket.on('close', () => this.finish({ code: grpc.status.UNAVAILABLE, details: "the referee's connection ended without a status" }));
  }

  receive(chunk) {
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    while (!this.done && this.pending.length >= 5) {
      const length = this.pending.readUInt32BE(1);
      if (this.pending.length < 5 + length) return;
      const flags = this.pending[0];
      const body = this.pending.subarray(5, 5 + length);
      this.pending = this.pending.subarray(5 + length);
      if (flags & 0x80) {
        this.emit('end');
        this.finish(trailerStatus(body));
        return;
      }
      this.emit('data', this.method.responseDeserialize(body));
    }
  }

  write(message) {
    if (this.done) return;
    const body = this.method.requestSerialize(message);
    const header = Buffer.alloc(5);
    header.writeUInt32BE(body.length, 1);
    this.socket.write(Buffer.concat([header, body]));
  }

  end() {} // the connection's end would leave the stream: it is closed once the status has come

  cancel() {
    this.finish({ code: grpc.status.CANCELLED, details: 'cancelled by the bot' });
  }

  finish(status) {
    if (this.done) return;
    this.done = true;
    this.socket.destroy();
    this.emit('status', status);
  }
}

// A trailer frame's status: {code, details} as grpc-js gives it.
function trailerStatus(body) {
  const fields = {};
  for (const line of body.toString('latin1').split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) fields[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const code = /^\d+$/.test(fields['grpc-status'] || '') ? Number(fields['grpc-status']) : grpc.status.UNKNOWN;
  let details = fields['grpc-message'] || '';
  try {
    details = decodeURIComponent(details);
  } catch (error) {
    // not percent-encoded as it should be: shown as it came
  }
  return { code, details };
}

// A client whose Play() is a FrameCall on the socket of `address` (unix:PATH).
function framesClient(mus, address) {
  if (!address.startsWith('unix:')) throw new Failure(`frames are spoken on a unix socket, not ${address}`);
  const socketPath = address.slice('unix:'.length);
  const method = mus.PlayService.service.Play;
  return { Play: () => new FrameCall(socketPath, method), close() {} };
}

function playClient(mus, address, cache) {
  if (cache && cache.has(address)) return cache.get(address);
  const client = new mus.PlayService(address, grpc.credentials.createInsecure(), CHANNEL_OPTIONS);
  if (cache) cache.set(address, client);
  return client;
}

// ------------------------------------------------------------------------------------------------ remote

// Holds a lobby stream and plays every confirmed assignment on its own Play stream, concurrently. Returns when
// `matches` tables have been played (0: never), or when stop() is called, once the seats in play are over.
async function runRemote(mus, referee, token, { maxMatches, matches }) {
  const lobby = new mus.LobbyService(referee, grpc.credentials.createInsecure(), CHANNEL_OPTIONS);
  const clients = new Map();
  const offers = new Map(); // assignment_id -> {offer, playing: Promise | null, done}: this table's seats
  let played = 0; // tables whose seats are all over
  const failures = [];
  let stopping = false;
  let call = null;

  const liveTables = () => new Set([...offers.values()].filter((held) => !held.done).map((held) => held.offer.table_id));

  const stop = () => {
    stopping = true;
    if (call) call.cancel();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  const play = (held) => {
    const { offer } = held;
    const address = offer.referee_address || referee;
    const label = `table ${offer.table_id} `;
    held.playing = playSeat(playClient(mus, address, clients), address, offer.seat_token, label)
      .catch((error) => {
        failures.push(error);
        log(`${label}seat ${offer.seat}: ${error.message}`);
      })
      .finally(() => {
        held.done = true;
        const table = offer.table_id;
        const seats = [...offers].filter(([, other]) => other.offer.table_id === table);
        if (seats.every(([, other]) => other.done)) {
          for (const [id] of seats) offers.delete(id);
          played += 1;
          log(`table ${table}: over (${played} played)`);
          if (matches && played >= matches) stop();
        }
      });
  };

  const onMessage = (response) => {
    switch (response.message) {
      case 'welcome':
        log(`lobby: welcome as ${response.welcome.bot_name}`);
        break;
      case 'assignment': {
        // Two offers per match, one per seat of the bot's team: a match is a table, and both seats of one
        // table count once against max_concurrent_matches (as the lobby counts).
        const offer = response.assignment;
        const live = liveTables();
        if (stopping || (!live.has(offer.table_id) && live.size >= maxMatches)) {
          call.write({ decline: { assignment_id: offer.assignment_id, reason: stopping ? 'stopping' : 'at capacity' } });
          break;
        }
        offers.set(offer.assignment_id, { offer, playing: null, done: false });
        call.write({ accept: { assignment_id: offer.assignment_id } });
        log(`lobby: accepted seat ${offer.seat} of table ${offer.table_id} (with ${offer.partner_name}, against ${offer.opponent_names.join(' and ')})`);
        break;
      }
      case 'confirmed': {
        const held = offers.get(response.confirmed.assignment_id);
        if (held && !held.playing) play(held);
        break;
      }
      case 'withdrawn': {
        const held = offers.get(response.withdrawn.assignment_id);
        if (held && !held.playing) offers.delete(response.withdrawn.assignment_id);
        log(`lobby: offer ${response.withdrawn.assignment_id} withdrawn: ${response.withdrawn.reason}`);
        break;
      }
      default:
        break;
    }
  };

  let pause = FIRST_PAUSE_MS;
  let unknownPause = UNKNOWN_TOKEN_FIRST_MS;
  while (!stopping) {
    const status = await new Promise((resolve) => {
      call = lobby.Connect();
      call.on('data', (response) => {
        pause = FIRST_PAUSE_MS;
        unknownPause = UNKNOWN_TOKEN_FIRST_MS;
        onMessage(response);
      });
      call.on('error', () => {});
      call.on('end', () => call.end());
      call.on('status', resolve);
      call.write({ hello: { bot_token: token, max_concurrent_matches: maxMatches, protocol_version: PROTOCOL_VERSION } });
    });
    call = null;
    // The lobby withdrew every offer that was still open with the stream; confirmed seats stay ours to play.
    for (const [id, held] of offers) if (!held.playing) offers.delete(id);
    if (stopping || status.code === grpc.status.OK) break; // stopped, or the referee ended the lobby stream
    if (status.code === grpc.status.UNAUTHENTICATED) {
      // Not a reason to exit: a league registers the token when it needs the bot (see the README).
      log(`lobby: the referee does not know this bot token yet (${describe(status)}); asking again in ${unknownPause / 1000} s`);
      await sleepUnless(unknownPause, () => stopping);
      unknownPause = Math.min(unknownPause * 2, UNKNOWN_TOKEN_MAX_MS);
      continue;
    }
    if (!TRANSIENT.has(status.code)) {
      stopping = true;
      await Promise.all([...offers.values()].map((held) => held.playing));
      throw new Failure(`the lobby at ${referee} ended the stream: ${describe(status)}`);
    }
    log(`lobby: stream ended (${describe(status)}); connecting again in ${pause} ms`);
    await sleep(pause);
    pause = Math.min(pause * 2, 5000);
  }
  await Promise.all([...offers.values()].map((held) => held.playing));
  process.removeListener('SIGTERM', stop);
  process.removeListener('SIGINT', stop);
  lobby.close();
  for (const client of clients.values()) client.close();
  if (failures.length) throw new Failure(`${failures.length} seat(s) could not be played; the first: ${failures[0].message}`);
  return played;
}

async function sleepUnless(ms, stopped) {
  const until = Date.now() + ms;
  while (Date.now() < until && !stopped()) await sleep(Math.min(100, until - Date.now()));
}

// ------------------------------------------------------------------------------------------------ seats on stdin

// A seat line of MUS_SEATS=stdin: {referee, seatToken, frames}; throws a Failure if it is not one.
function seatLine(line) {
  let data;
  try {
    data = JSON.parse(line);
  } catch (error) {
    throw new Failure(`not a JSON line (${error.message}): ${line.slice(0, 200)}`);
  }
  if (!data || typeof data.referee !== 'string' || typeof data.seat_token !== 'string') {
    throw new Failure(`not a seat line (it needs the strings referee and seat_token): ${line.slice(0, 200)}`);
  }
  const frames = typeof data.frames === 'string' && data.frames ? data.frames : null;
  return { referee: data.referee, seatToken: data.seat_token, frames };
}

// Plays every seat given on standard input, one after another, until the input ends. A seat that cannot be
// played is logged, and the next line is read. Returns how many seats were played to their outcome.
async function runSeats(mus) {
  const readline = require('node:readline');
  let played = 0;
  for await (const line of readline.createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    if (!line.trim()) continue;
    try {
      const { referee, seatToken, frames } = seatLine(line);
      const client = frames ? framesClient(mus, frames) : playClient(mus, referee, null);
      try {
        await playSeat(client, frames || referee, seatToken, frames ? 'over frames: ' : '');
        played += 1;
      } finally {
        client.close();
      }
    } catch (error) {
      if (!(error instanceof Failure)) throw error;
      log(`seat not played: ${error.message.split('\n')[0]}`);
    }
  }
  return played;
}

// ------------------------------------------------------------------------------------------------ main

const USAGE =
  'usage: node bot.js [--strategy FILE] [--remote [--max-matches N] [--matches N]] (MUS_REFEREE, MUS_TOKEN from the environment)';

function parseArguments(argv) {
  const options = { remote: false, maxMatches: 1, matches: 0, strategy: null };
  const count = (name, value, least) => {
    if (value === undefined || !/^\d+$/.test(value) || Number(value) < least) {
      throw new Failure(`${name} takes an integer >= ${least}, not ${value === undefined ? 'nothing' : JSON.stringify(value)}`);
    }
    return Number(value);
  };
  for (let i = 0; i < argv.length; i += 1) {
    const word = argv[i];
    if (word === '--remote') options.remote = true;
    else if (word === '--max-matches') options.maxMatches = count(word, argv[(i += 1)], 1);
    else if (word === '--matches') options.matches = count(word, argv[(i += 1)], 0);
    else if (word === '--strategy') {
      options.strategy = argv[(i += 1)];
      if (!options.strategy) throw new Failure('--strategy takes a file: a module that exports chooseAction(request, rules)');
    }
    else if (word === '--help' || word === '-h') {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    } else {
      throw new Failure(`unknown argument ${JSON.stringify(word)} (${USAGE}; options of \`mus match play\` go before its \`--\`)`);
    }
  }
  if (!options.remote && (argv.includes('--max-matches') || argv.includes('--matches'))) {
    throw new Failure('--max-matches and --matches go with --remote');
  }
  return options;
}

function setting(name, what) {
  const value = process.env[name];
  if (!value) throw new Failure(`${name} is not set (${what})`);
  return value;
}

function loadStrategy(file) {
  let loaded;
  try {
    loaded = require(path.resolve(file));
  } catch (error) {
    const from = path.isAbsolute(file) ? '' : ` (a path from the folder the bot runs in, ${process.cwd()})`;
    throw new Failure(`cannot load the strategy ${file}${from}: ${String(error.message).split('\n')[0]}`);
  }
  if (!loaded || typeof loaded.chooseAction !== 'function') {
    throw new Failure(`the strategy ${file} does not export chooseAction(request, rules)`);
  }
  return loaded;
}

async function main() {
  const options = parseArguments(process.argv.slice(2));
  if (options.strategy) strategy = loadStrategy(options.strategy);
  if (process.env.MUS_SEATS === 'stdin' && !options.remote) {
    let mus;
    try {
      mus = loadMus();
    } catch (error) {
      throw new Failure(error.message);
    }
    const played = await runSeats(mus);
    log(`end of input after ${played} seat(s)`);
    return;
  }
  const referee = setting('MUS_REFEREE', 'the referee address: host:port or unix:/path/to/socket');
  const token = setting('MUS_TOKEN', options.remote ? "the bot's lobby token" : 'the seat token');
  let mus;
  try {
    mus = loadMus();
  } catch (error) {
    throw new Failure(error.message);
  }
  if (options.remote) {
    const played = await runRemote(mus, referee, token, options);
    log(`lobby: done, ${played} match(es) played`);
    return;
  }
  // MUS_FRAMES: the worker's referee offers this seat the same stream without HTTP/2 on a socket of its own.
  const frames = process.env.MUS_FRAMES || null;
  const client = frames ? framesClient(mus, frames) : playClient(mus, referee, null);
  await playSeat(client, frames || referee, token, frames ? 'over frames: ' : '');
  client.close();
}

main().then(
  () => process.exit(0),
  (error) => {
    log(error instanceof Failure ? error.message.split('\n')[0] : `internal error: ${String(error.stack || error).split('\n')[0]}`);
    process.exit(1);
  },
);
