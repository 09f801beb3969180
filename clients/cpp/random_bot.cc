// mus-random-bot: a Mus Arena bot in C++ that plays with uniformly random legal actions: one seat, or with
// MUS_SEATS=stdin seat after seat from one process (a persistent bot: `mus bot add --persistent`).
//
// This is the template for bots in other languages than Python: everything a bot needs is here, over the bare
// wire (proto/mus/v1/play.proto, docs/protocol.md), with the synchronous grpc++ API and one thread:
//
//   1. Read MUS_REFEREE (host:port) and MUS_TOKEN (the seat token) from the environment. Where MUS_FRAMES is
//      set too (a unix socket of the seat's own, offered by a worker's referee), play there over frames instead
//      (step 5's FrameStream): the same messages without HTTP/2.
//   2. Open PlayService.Play and send Join (batch_events = true: a step's events and decision come in one
//      Update message).
//   3. Answer every DecisionRequest at once with Act, echoing its decision_id. Replace ChooseAction() with your
//      strategy: it gets the legal actions and the seat's whole view.
//   4. Exit 0 once the Outcome has arrived. If the stream drops (UNAVAILABLE, INTERNAL) before that, join again
//      with the same token and Join.next_seq = the seq of the next event we expect.
//
//   5. With MUS_SEATS=stdin instead of MUS_REFEREE and MUS_TOKEN (docs/pool.md): read one JSON line per seat
//      from standard input, {"referee": ADDRESS, "seat_token": TOKEN}, play it as above, then read the next;
//      exit 0 at the end of the input. A seat that fails is logged and the next line is read. A line that also
//      names "frames" (a unix socket) is played there: the same stream without HTTP/2 (FrameStream below,
//      docs/pool.md "Frames"), which costs the bot and the referee less CPU per decision.
//
// Any failure exits 1 with a one-line message on stderr (in the seat loop: ends that seat). Logs go to stderr
// (the league keeps them per seat, or per process for a persistent bot).
//
// Randomness: MUS_SEED (an unsigned integer) seeds the generator when set. Otherwise the seed is derived from
// the seat and the cards of its first decision, which the match seed fixes: replaying a match seed with the
// same bots plays exactly the same match, as bench/league_bot.py does.

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cctype>
#include <cstring>
#include <functional>
#include <sstream>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "mus/v1/play.grpc.pb.h"  // generated at build time from proto/mus/v1/play.proto (see the Makefile)

namespace {

namespace pb = ::mus::v1;

constexpr char kBotName[] = "cpp-random";
constexpr char kBotVersion[] = "1";
constexpr uint32_t kProtocolVersion = 1;  // the newest Join.protocol_version this bot speaks

// Rejoining after a dropped stream: the referee keeps a dropped seat for its grace period (5 s by default, and
// configurable), which the bot cannot know; it keeps trying, with a growing pause (0.1, 0.2, 0.4, 0.8 then every
// 1 s), for twice that default from its last successful join, as the Python SDK does (run_bot's grace_s).
constexpr std::chrono::seconds kRejoinPatience{10};
constexpr std::chrono::milliseconds kFirstPause{100};
constexpr std::chrono::milliseconds kMaxPause{1000};

void Log(const std::string& message) { std::cerr << kBotName << ": " << message << std::endl; }

// Why a seat could not be played: main() logs it and exits 1 (in the seat loop: it goes on to the next seat).
class Failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Ends the seat with a one-line message: the exit status a launcher (and `mus match play`) reports.
[[noreturn]] void Fail(const std::string& message) { throw Failure(message); }

const char* StatusName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN_STATUS";
  }
}

std::string Describe(const grpc::Status& status) {
  return std::string(StatusName(status.error_code())) + ": " + status.error_message();
}

// A seeded random generator. Bounded draws use rejection sampling (not std::uniform_int_distribution, whose
// algorithm differs between standard libraries), so a seed gives the same choices with every compiler.
class Random {
 public:
  explicit Random(std::seed_seq& seed) : engine_(seed) {}
  explicit Random(uint64_t seed) : engine_(seed) {}

  // Uniform in [0, n); n > 0.
  uint64_t Below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;  // the largest multiple of n: no modulo bias below it
    uint64_t draw;
    do {
      draw = engine_();
    } while (draw >= limit);
    return draw % n;
  }

  // Uniform in [low, high]; low <= high.
  uint32_t Between(uint32_t low, uint32_t high) { return low + static_cast<uint32_t>(Below(uint64_t{high} - low + 1)); }

 private:
  std::mt19937_64 engine_;
};

// The generator of a seat that has no MUS_SEED: seeded from the seat and the cards of its first decision.
Random SeatRandom(uint32_t seat, const pb::SeatView& view) {
  std::string text = std::string("mus/") + kBotName + "/" + std::to_string(seat) + "/";
  for (const pb::Card& card : view.cards()) {
    text += std::to_string(card.rank()) + "/" + std::to_string(static_cast<int>(card.suit())) + " ";
  }
  std::vector<uint32_t> words(text.begin(), text.end());  // std::seed_seq is fully specified by the standard
  std::seed_seq seed(words.begin(), words.end());
  return Random(seed);
}

// THE STRATEGY. A random legal action, like bench/league_bot.py's wire_action: a legal kind uniformly, then
// an amount, cards or declaration within that entry's bounds. `legal` has one entry per legal kind:
//   ENVIDO, MAS   min_amount..max_amount (max_amount 0: no cap); we bet at most min_amount + 6
//   DISCARD       any min_cards..max_cards distinct cards of view.cards()
//   DECLARE       the one true answer, legal.has_jugada()
//   MUS, NO_MUS, SENAS   may carry up to max_senas of legal.senas() (signals to the partner); we send none
//   PASO, QUIERO, NO_QUIERO, ORDAGO   nothing more
// `view` is everything the seat may know: its cards, the scores, every event of the hand, the betting totals.
pb::Action ChooseAction(Random& rng, const google::protobuf::RepeatedPtrField<pb::LegalAction>& legal,
                        const pb::SeatView& view) {
  const pb::LegalAction& choice = legal.Get(static_cast<int>(rng.Below(static_cast<uint64_t>(legal.size()))));
  pb::Action action;
  action.set_kind(choice.kind());
  switch (choice.kind()) {
    case pb::ACTION_KIND_ENVIDO:
    case pb::ACTION_KIND_MAS: {
      const uint32_t low = choice.min_amount();
      const uint32_t cap = choice.max_amount() != 0 ? choice.max_amount() : low + 6;
      action.set_amount(rng.Between(low, std::max(low, std::min(cap, low + 6))));
      break;
    }
    case pb::ACTION_KIND_DISCARD: {
      // A uniform sample of `count` distinct cards: a partial Fisher-Yates shuffle of the hand.
      std::vector<pb::Card> cards(view.cards().begin(), view.cards().end());
      const uint32_t most = std::min<uint32_t>(choice.max_cards(), static_cast<uint32_t>(cards.size()));
      const uint32_t count = rng.Between(std::min(choice.min_cards(), most), most);
      for (uint32_t i = 0; i < count; ++i) {
        std::swap(cards[i], cards[i + rng.Below(cards.size() - i)]);
        *action.add_cards() = cards[i];
      }
      break;
    }
    case pb::ACTION_KIND_DECLARE:
      action.set_has_jugada(choice.has_jugada());
      break;
    default:
      break;
  }
  return action;
}

// One Play stream, over gRPC or over frames: what Player needs of it.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual void Write(const pb::PlayRequest& request) = 0;  // a failed write shows up as the final status
  virtual bool Read(pb::PlayResponse* response) = 0;       // false once the referee has ended the stream
  virtual grpc::Status Finish() = 0;                       // the stream's status, once Read returned false
  virtual void Cancel() = 0;                               // leave the stream before its end
};

class GrpcStream : public Stream {
 public:
  explicit GrpcStream(pb::PlayService::Stub& stub) : call_(stub.Play(&context_)) {}
  void Write(const pb::PlayRequest& request) override { call_->Write(request); }
  bool Read(pb::PlayResponse* response) override { return call_->Read(response); }
  grpc::Status Finish() override {
    call_->WritesDone();
    return call_->Finish();
  }
  void Cancel() override {
    context_.TryCancel();
    call_->Finish();
  }

 private:
  grpc::ClientContext context_;  // one per call: a rejoin needs a fresh one
  std::unique_ptr<grpc::ClientReaderWriter<pb::PlayRequest, pb::PlayResponse>> call_;
};

// The Play stream over frames (docs/pool.md, "Frames"): one connection to a unix socket is one stream; each
// message is a frame (a flags byte, a 4-byte big-endian length, the serialized message); the referee's last frame
// (flags 0x80) is the status, "grpc-status: N\r\ngrpc-message: TEXT\r\n", TEXT percent-encoded.
class FrameStream : public Stream {
 public:
  explicit FrameStream(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (fd_ < 0 || path.size() >= sizeof(address.sun_path)) {
      status_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "cannot open a socket to " + path);
      return;
    }
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    if (connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
      status_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "cannot connect to " + path + ": " + std::strerror(errno));
    }
  }
  ~FrameStream() override {
    if (fd_ >= 0) close(fd_);
  }

  void Write(const pb::PlayRequest& request) override {
    if (!status_.ok()) return;
    const std::string body = request.SerializeAsString();
    std::string frame(5, '\0');
    for (int i = 0; i < 4; ++i) frame[1 + i] = static_cast<char>((body.size() >> (24 - 8 * i)) & 0xff);
    frame += body;
    for (size_t sent = 0; sent < frame.size();) {
      const ssize_t n = send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;  // the referee closed the stream: reading says how
      sent += static_cast<size_t>(n);
    }
  }

  bool Read(pb::PlayResponse* response) override {
    if (ended_ || !status_.ok()) return false;
    unsigned char header[5];
    if (!ReadExactly(header, sizeof(header))) {
      return End(grpc::StatusCode::UNAVAILABLE, "the connection ended without a status");
    }
    const size_t length =
        (size_t{header[1]} << 24) | (size_t{header[2]} << 16) | (size_t{header[3]} << 8) | size_t{header[4]};
    std::string body(length, '\0');
    if (!ReadExactly(body.data(), length)) {
      return End(grpc::StatusCode::UNAVAILABLE, "the connection ended inside a frame");
    }
    if (header[0] & 0x80) return Trailer(body);
    if (!response->ParseFromString(body)) return End(grpc::StatusCode::INTERNAL, "an unreadable PlayResponse");
    return true;
  }

  grpc::Status Finish() override { return status_; }
  void Cancel() override {
    if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
  }

 private:
  bool ReadExactly(void* into, size_t size) {
    char* at = static_cast<char*>(into);
    while (size > 0) {
      const ssize_t n = read(fd_, at, size);
      if (n <= 0) return false;
      at += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  }

  bool End(grpc::StatusCode code, const std::string& message) {
    ended_ = true;
    status_ = grpc::Status(code, message);
    return false;
  }

  bool Trailer(const std::string& text) {
    int code = static_cast<int>(grpc::StatusCode::UNKNOWN);
    std::string message;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      const std::string name = line.substr(0, colon);
      const size_t start = std::min(line.find_first_not_of(' ', colon + 1), line.size());
      const std::string value = line.substr(start);
      if (name == "grpc-status") code = std::atoi(value.c_str());
      if (name == "grpc-message") message = PercentDecoded(value);
    }
    return End(static_cast<grpc::StatusCode>(code), message);
  }

  static std::string PercentDecoded(const std::string& text) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '%' && i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
          std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
        out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        out += text[i];
      }
    }
    return out;
  }

  int fd_ = -1;
  bool ended_ = false;
  grpc::Status status_;
};

// One seat of one match, across every stream it takes to finish it (a dropped stream is joined again).
class Player {
 public:
  Player(std::string token, std::optional<uint64_t> seed) : token_(std::move(token)) {
    if (seed) rng_.emplace(*seed);
  }

  bool finished() const { return outcome_.has_value(); }
  int joins() const { return joins_; }

  // Joins (or rejoins from next_seq_) on a new stream and plays until the referee ends it; returns its status.
  grpc::Status PlayStream(std::unique_ptr<Stream> stream) {
    stream_ = std::move(stream);

    pb::PlayRequest request;
    pb::Join* join = request.mutable_join();
    join->set_seat_token(token_);
    join->set_bot_name(kBotName);
    join->set_bot_version(kBotVersion);
    join->set_protocol_version(kProtocolVersion);
    join->set_next_seq(next_seq_);  // 0 on the first join: every event from the start
    join->set_batch_events(true);
    stream_->Write(request);  // a failed write shows up as the status below

    // Read until the referee closes the stream: after the Outcome it closes with OK.
    pb::PlayResponse response;
    try {
      while (stream_->Read(&response)) Handle(response);
    } catch (const Failure&) {  // end the call before its context goes
      stream_->Cancel();
      stream_.reset();
      throw;
    }
    grpc::Status status = stream_->Finish();
    stream_.reset();
    return status;
  }

 private:
  void Handle(const pb::PlayResponse& response) {
    switch (response.message_case()) {
      case pb::PlayResponse::kJoined:
        OnJoined(response.joined());
        break;
      case pb::PlayResponse::kUpdate:  // with batch_events: the step's events, then this seat's decision if any
        for (const pb::Event& event : response.update().events()) OnEvent(event);
        if (response.update().has_decision_request()) OnDecision(response.update().decision_request());
        break;
      case pb::PlayResponse::kEvent:  // the same content without batching: handled too
        OnEvent(response.event());
        break;
      case pb::PlayResponse::kDecisionRequest:
        OnDecision(response.decision_request());
        break;
      case pb::PlayResponse::kActionRejected:
        OnRejected(response.action_rejected());
        break;
      case pb::PlayResponse::kOutcome:
        outcome_ = response.outcome();
        Log("seat " + std::to_string(seat_) + ": outcome " + pb::Team_Name(outcome_->winner_team()) + " wins (" +
            pb::MatchTermination_Name(outcome_->termination()) + ")");
        break;
      default:  // Pong, or a message of a newer protocol: nothing to do
        break;
    }
  }

  void OnJoined(const pb::Joined& joined) {
    if (joined.protocol_version() > kProtocolVersion) {
      Fail("the referee speaks protocol version " + std::to_string(joined.protocol_version()) + "; this bot speaks " +
           std::to_string(kProtocolVersion));
    }
    ++joins_;
    seat_ = static_cast<int>(joined.seat());
    Log("seat " + std::to_string(seat_) + " of table " + joined.table_id() +
        (joined.resumed() ? ": joined again from event " + std::to_string(next_seq_) : ": joined"));
  }

  void OnEvent(const pb::Event& event) {
    if (event.seq() < next_seq_) return;  // already seen before a rejoin
    next_seq_ = event.seq() + 1;
    // A bot that tracks the match (cards seen, bets, scores) reads event.payload_case() here. This one needs
    // nothing: every DecisionRequest carries the seat's whole view.
  }

  void OnDecision(const pb::DecisionRequest& request) {
    open_ = request;
    if (!rng_) rng_.emplace(SeatRandom(static_cast<uint32_t>(seat_), request.view()));
    // After a rejoin the referee sends the open decision again (same id): keep the answer already chosen.
    if (!answer_ || answer_->first != request.decision_id()) Choose(request.legal_actions());
    Send();
  }

  void OnRejected(const pb::ActionRejected& rejected) {
    Log("decision " + std::to_string(rejected.decision_id()) + ": action rejected (" +
        pb::RejectionCode_Name(rejected.code()) + "): " + rejected.reason());
    if (!rejected.decision_open() || !open_ || open_->decision_id() != rejected.decision_id()) return;
    // Still open (illegal_action_policy = retry): choose again among the legal actions it lists.
    Choose(rejected.legal_actions().empty() ? open_->legal_actions() : rejected.legal_actions());
    Send();
  }

  void Choose(const google::protobuf::RepeatedPtrField<pb::LegalAction>& legal) {
    if (legal.empty()) {  // never sent by the referee; answering nothing lets the decision time out
      Log("decision " + std::to_string(open_->decision_id()) + " has no legal actions");
      answer_.reset();
      return;
    }
    answer_.emplace(open_->decision_id(), ChooseAction(*rng_, legal, open_->view()));
  }

  void Send() {
    if (!answer_) return;
    pb::PlayRequest request;
    request.mutable_act()->set_decision_id(answer_->first);  // echo the decision id
    *request.mutable_act()->mutable_action() = answer_->second;
    stream_->Write(request);
  }

  std::string token_;
  std::unique_ptr<Stream> stream_;
  std::optional<Random> rng_;
  int seat_ = -1;
  int joins_ = 0;
  uint64_t next_seq_ = 0;                                // the seq of the next event we expect
  std::optional<pb::DecisionRequest> open_;              // the last decision asked
  std::optional<std::pair<uint64_t, pb::Action>> answer_;  // its answer
  std::optional<pb::Outcome> outcome_;
};

std::string Setting(const char* name, const char* what) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') Fail(std::string(name) + " is not set (" + what + ")");
  return value;
}

std::optional<uint64_t> SeedSetting() {
  const char* value = std::getenv("MUS_SEED");
  if (value == nullptr || *value == '\0') return std::nullopt;
  const std::string text = value;
  errno = 0;
  const unsigned long long seed = std::strtoull(text.c_str(), nullptr, 10);
  if (text.find_first_not_of("0123456789") != std::string::npos || errno == ERANGE) {
    Fail("MUS_SEED must be an unsigned 64-bit integer, not " + text);
  }
  return seed;
}

// One seat of one match, to its outcome (dropped streams joined again); throws Failure when it cannot be played.
// With `frames` (a seat line's unix:PATH) the seat is played there instead of over gRPC at `referee`.
void PlaySeat(const std::string& referee, const std::string& token, std::optional<uint64_t> seed,
              const std::string& frames = "") {
  Player player(token, seed);
  std::function<std::unique_ptr<Stream>()> open;
  std::unique_ptr<pb::PlayService::Stub> stub;
  if (!frames.empty()) {
    if (frames.rfind("unix:", 0) != 0) Fail("frames are spoken on a unix socket, not " + frames);
    Log("playing the seat over frames at " + frames);
    open = [path = frames.substr(5)] { return std::make_unique<FrameStream>(path); };
  } else {
    // Reconnect quickly after a drop: gRPC's default first reconnect backoff is 1 s, a fifth of the grace period.
    grpc::ChannelArguments arguments;
    arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, static_cast<int>(kFirstPause.count()));
    arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, static_cast<int>(kFirstPause.count()));
    arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(kMaxPause.count()));
    stub = pb::PlayService::NewStub(grpc::CreateCustomChannel(referee, grpc::InsecureChannelCredentials(), arguments));
    open = [&stub] { return std::make_unique<GrpcStream>(*stub); };
  }
  const std::string where = frames.empty() ? referee : frames;

  auto lost_since = std::chrono::steady_clock::now();  // the patience runs from the last successful join
  std::chrono::milliseconds pause = kFirstPause;
  while (true) {
    const int joins = player.joins();
    const grpc::Status status = player.PlayStream(open());
    if (player.finished()) return;  // the outcome arrived: the match is over for this seat
    if (status.ok()) Fail("the referee closed the stream before sending the outcome");

    // UNAVAILABLE: the connection dropped (or the referee is not up yet); INTERNAL: a broken HTTP/2 stream, as
    // some transports report a drop; both are worth joining again. A rejoin may also race the referee noticing
    // that the old stream ended: ALREADY_EXISTS. A join refused RESOURCE_EXHAUSTED (a referee full of streams
    // waiting to join closes the oldest to make room) is tried again too. Anything else is a refusal
    // (UNAUTHENTICATED token, FAILED_PRECONDITION table finished or seat dropped, ABORTED table cancelled, ...).
    const grpc::StatusCode code = status.error_code();
    const bool transient = code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::INTERNAL;
    const bool rejoining = player.joins() > 0;
    const bool refused = player.joins() == joins && code == grpc::StatusCode::RESOURCE_EXHAUSTED;
    if (!transient && !refused && !(rejoining && code == grpc::StatusCode::ALREADY_EXISTS)) {
      Fail("the referee at " + where + " ended the stream: " + Describe(status));
    }
    const auto now = std::chrono::steady_clock::now();
    if (player.joins() > joins) {  // this stream had joined: start counting again
      lost_since = now;
      pause = kFirstPause;
    }
    if (now - lost_since > kRejoinPatience) {
      Fail("lost the referee at " + where + " (" + Describe(status) + ") and could not join again within " +
           std::to_string(kRejoinPatience.count()) + " s");
    }
    Log("stream ended (" + Describe(status) + "); joining again in " + std::to_string(pause.count()) + " ms");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kMaxPause);
  }
}

// A seat line of MUS_SEATS=stdin, {"referee": ADDRESS, "seat_token": TOKEN, "frames": ADDRESS}.
struct Seat {
  std::string referee, token, frames;  // frames: "" when the line names none
};

// The seat a line names; throws Failure if it is not a seat line.
Seat SeatLine(const std::string& line) {
  google::protobuf::Struct object;
  if (!google::protobuf::util::JsonStringToMessage(line, &object).ok()) {
    Fail("not a JSON object: " + line.substr(0, 200));
  }
  const auto& fields = object.fields();
  const auto referee = fields.find("referee");
  const auto token = fields.find("seat_token");
  if (referee == fields.end() || !referee->second.has_string_value() || token == fields.end() ||
      !token->second.has_string_value()) {
    Fail("not a seat line (it needs the strings referee and seat_token): " + line.substr(0, 200));
  }
  const auto frames = fields.find("frames");
  const bool framed = frames != fields.end() && frames->second.has_string_value();
  return {referee->second.string_value(), token->second.string_value(), framed ? frames->second.string_value() : ""};
}

// MUS_SEATS=stdin: every seat given on standard input, one after another, until the input ends.
int PlaySeats(std::optional<uint64_t> seed) {
  std::string line;
  int played = 0;
  while (std::getline(std::cin, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      const Seat seat = SeatLine(line);
      PlaySeat(seat.referee, seat.token, seed, seat.frames);
      ++played;
    } catch (const Failure& failure) {
      Log(std::string("seat not played: ") + failure.what());
    }
  }
  Log("end of input after " + std::to_string(played) + " seat(s)");
  return 0;
}

}  // namespace

int main() {
  try {
    const char* seats = std::getenv("MUS_SEATS");
    if (seats != nullptr && std::string(seats) == "stdin") return PlaySeats(SeedSetting());
    const std::string referee = Setting("MUS_REFEREE", "the referee's host:port");
    const char* frames = std::getenv("MUS_FRAMES");  // offered by a worker's own referee: frames of this seat's own
    PlaySeat(referee, Setting("MUS_TOKEN", "the seat token"), SeedSetting(), frames != nullptr ? frames : "");
    return 0;
  } catch (const Failure& failure) {
    Log(failure.what());
    return 1;
  }
}
