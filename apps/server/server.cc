// The HTTP side of `lfmvox serve`: Boost.Beast over Asio with C++20 coroutines (one coroutine per
// connection, on its own strand), the OpenAI request shapes, and the streaming of what the scheduler's
// jobs produce. Every client mistake is a 4xx with the OpenAI error object; nothing here exits,
// prints or lets an exception out of a connection.
#include "server.h"

// clang-format off
#include <utility>  // before Asio: its awaitable.hpp (Boost 1.74) uses std::exchange without including it
// clang-format on

#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <vector>

#include "codec_util.h"
#include "lfmvox/audio_io.h"
#include "metrics.h"
#include "realtime.h"
#include "request_parse.h"
#include "scheduler.h"
#include "tempo.h"
#include "web_assets.h"
#include "wire.h"

namespace lfmvox::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using json = nlohmann::json;
using Request = http::request<http::string_body>;

// The public API has no status macros; this file's own.
// GCC 12 destroys some temporaries of a co_await expression twice (a braced ApiError{...} among
// them), so errors are built in a named variable first.
#define SEND_ERROR(ex, ...)                         \
  do {                                              \
    const ApiError send_error_ = __VA_ARGS__;       \
    co_return co_await (ex).SendError(send_error_); \
  } while (0)

#define RETURN_IF_ERROR(expr)                       \
  do {                                              \
    if (Status st_ = (expr); !st_.ok()) return st_; \
  } while (0)

namespace {

int64_t UnixNow() { return static_cast<int64_t>(std::time(nullptr)); }

std::string NewId(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s%llx%06llx", prefix, static_cast<unsigned long long>(UnixNow()),
                static_cast<unsigned long long>(counter.fetch_add(1)));
  return buf;
}

// How an engine-side error reads to a client.
ApiError FromStatus(const Status& s, const std::string& param = "") {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kDataLoss:
    case StatusCode::kUnimplemented:
      return BadRequest(s.message(), param);
    case StatusCode::kOutOfRange:
      return BadRequest(s.message(), param, "limit_exceeded");
    case StatusCode::kCancelled:
      return {503, s.message(), "", "", "unavailable_error"};
    default:
      return {500, s.message(), "", "", "server_error"};
  }
}

// An endpoint (or a part of a request) the model's files do not allow: the request is fine, the
// deployment lacks a file, so a 400 that names it.
ApiError NotServed(const std::string& what, const Status& why) {
  return {400, what + " is not available with this server's model files: " + why.message(), "",
          "model_not_capable", "invalid_request_error"};
}

std::string ErrorBody(const ApiError& e) {
  json err = {{"message", e.message},
              {"type", e.type},
              {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", e.code.empty() ? json(nullptr) : json(e.code)}};
  return Dump(json{{"error", err}});
}

// ---- Audio formats ----

enum class OutFormat { kPcm, kWav, kFlac, kOpus, kMp3, kAac };

bool Streams(OutFormat f) { return f == OutFormat::kPcm || f == OutFormat::kWav; }

AudioFileFormat FileFormat(OutFormat f) {
  switch (f) {
    case OutFormat::kFlac:
      return AudioFileFormat::kFlac;
    case OutFormat::kOpus:
      return AudioFileFormat::kOpus;
    case OutFormat::kMp3:
      return AudioFileFormat::kMp3;
    case OutFormat::kAac:
      return AudioFileFormat::kAac;
    default:
      return AudioFileFormat::kWav;
  }
}

const char* MimeType(OutFormat f) {
  switch (f) {
    case OutFormat::kPcm:
      return "audio/pcm";
    case OutFormat::kWav:
      return "audio/wav";
    case OutFormat::kFlac:
      return "audio/flac";
    case OutFormat::kOpus:
      return "audio/ogg";
    case OutFormat::kMp3:
      return "audio/mpeg";
    case OutFormat::kAac:
      return "audio/aac";
  }
  return "application/octet-stream";
}

// `name` as a response_format (chat's audio.format says "pcm16" for pcm).
std::optional<ApiError> ParseOutFormat(const std::string& name, int sample_rate, const char* param,
                                       OutFormat* out) {
  if (name == "pcm" || name == "pcm16") {
    *out = OutFormat::kPcm;
  } else if (name == "wav") {
    *out = OutFormat::kWav;
  } else if (name == "flac") {
    *out = OutFormat::kFlac;
  } else if (name == "opus") {
    *out = OutFormat::kOpus;
  } else if (name == "mp3") {
    *out = OutFormat::kMp3;
  } else if (name == "aac") {
    *out = OutFormat::kAac;
  } else {
    return BadRequest("unknown audio format '" + name + "'; use mp3, opus, aac, flac, wav or pcm", param);
  }
  if (!Streams(*out) && !CanEncodeAudio(FileFormat(*out), sample_rate)) {
    return BadRequest(
        "this server cannot write " + name + " at " + std::to_string(sample_rate) + " Hz; use wav or pcm",
        param, "unsupported_format");
  }
  return std::nullopt;
}

// A WAV header for a stream of unknown length (the sizes say 0xFFFFFFFF, as streamed WAVs do).
std::string StreamingWavHeader(int sample_rate) {
  std::string h;
  auto u32 = [&h](uint32_t v) {
    for (int i = 0; i < 4; ++i) h.push_back(static_cast<char>(v >> (8 * i)));
  };
  auto u16 = [&h](uint16_t v) {
    h.push_back(static_cast<char>(v & 0xff));
    h.push_back(static_cast<char>(v >> 8));
  };
  h += "RIFF";
  u32(0xFFFFFFFFu);
  h += "WAVEfmt ";
  u32(16);
  u16(1);  // PCM
  u16(1);  // mono
  u32(static_cast<uint32_t>(sample_rate));
  u32(static_cast<uint32_t>(sample_rate) * 2);
  u16(2);
  u16(16);
  h += "data";
  u32(0xFFFFFFFFu);
  return h;
}

// The model's voice for an OpenAI voice name, or `name` itself when the model has it.
std::optional<std::string> MapVoice(const AudioModel& model, const std::string& name) {
  for (const std::string& v : model.voices())
    if (v == name) return v;
  std::string lower;
  for (char c : name) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  struct Alias {
    const char* name;
    bool female;
    bool british;
  };
  static constexpr Alias kAliases[] = {
      {"alloy", true, false},  {"nova", true, false},  {"shimmer", true, false}, {"coral", true, false},
      {"echo", false, false},  {"onyx", false, false}, {"ash", false, false},    {"ballad", false, false},
      {"verse", false, false}, {"fable", false, true}, {"sage", true, true},     {"marin", true, false},
      {"cedar", false, false},
  };
  for (const Alias& a : kAliases) {
    if (lower != a.name) continue;
    // The first of the model's voices with the alias's gender and accent, from the voice names themselves.
    for (const std::string& v : model.voices()) {
      std::string lv;
      for (char c : v) lv.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
      const bool female = lv.find("female") != std::string::npos;
      const bool male = !female && lv.find("male") != std::string::npos;
      const bool british = lv.find("uk") != std::string::npos || lv.find("british") != std::string::npos;
      const bool american = lv.find("us") != std::string::npos || lv.find("american") != std::string::npos;
      if ((a.female ? female : male) && (a.british ? british : american)) return v;
    }
    return model.default_voice();
  }
  // A model without preset voices (LFM2-Audio) takes a description of the voice in words.
  if (model.voices().empty()) return name;
  return std::nullopt;
}

std::string Timestamp(double seconds, char sep) {
  const long long ms = std::llround(std::max(0.0, seconds) * 1000);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%02lld:%02lld:%02lld%c%03lld", ms / 3600000, ms / 60000 % 60,
                ms / 1000 % 60, sep, ms % 1000);
  return buf;
}

std::string_view SV(beast::string_view s) { return {s.data(), s.size()}; }

std::string_view PathOf(beast::string_view target) { return SV(target).substr(0, SV(target).find('?')); }

// The endpoint label for metrics: known paths only, so clients cannot grow the label set.
std::string EndpointLabel(std::string_view path) {
  static const char* kKnown[] = {"/v1/models",
                                 "/livez",
                                 "/readyz",
                                 "/health",
                                 "/metrics",
                                 "/v1/audio/speech",
                                 "/v1/audio/transcriptions",
                                 "/v1/chat/completions",
                                 "/v1/realtime"};
  for (const char* k : kKnown)
    if (path == k) return k;
  if (WebAsset(path)) return "web";
  return "other";
}

// Browsers cannot set headers on a WebSocket: the page passes the key as the subprotocol
// `openai-insecure-api-key.KEY`, next to `realtime`, as OpenAI's Realtime API takes it.
std::string_view SubprotocolKey(const Request& req) {
  const auto it = req.find(http::field::sec_websocket_protocol);
  if (it == req.end()) return {};
  return HeaderToken(SV(it->value()), "openai-insecure-api-key.").value_or(std::string_view{});
}

// Whether a WebSocket upgrade may go ahead: browsers send Origin, and a page from another site must not
// drive a server on this machine's loopback (clients other than browsers send no Origin).
bool SameOrigin(const Request& req) {
  const auto origin = req.find(http::field::origin);
  if (origin == req.end()) return true;
  const auto host = req.find(http::field::host);
  const std::string_view o = SV(origin->value());
  const size_t scheme = o.find("://");
  return host != req.end() && scheme != std::string_view::npos && o.substr(scheme + 3) == SV(host->value());
}

}  // namespace

// ---------------------------------------------------------------------------

// The assistant turns of audio chat completions, by their `message.audio.id`, for an hour (the
// `expires_at` the reply states): a later request's assistant message `{"audio": {"id"}}` replays the
// turn into its conversation, so a multi-turn spoken chat keeps the exact history (the model's own
// codes, not a re-encoding of its speech). Bounded: the oldest go first past kMaxEntries or kMaxBytes.
class AudioStore {
 public:
  static constexpr size_t kMaxEntries = 1024, kMaxBytes = size_t{64} << 20;
  static constexpr std::chrono::seconds kKeep{3600};

  void Put(const std::string& id, std::shared_ptr<const RecordedTurn> turn) {
    std::lock_guard lock(mu_);
    Expire();
    bytes_ += turn->bytes();
    order_.push_back({id, std::chrono::steady_clock::now() + kKeep});
    map_[id] = std::move(turn);
    while (!order_.empty() && (map_.size() > kMaxEntries || bytes_ > kMaxBytes)) Drop();
  }
  std::shared_ptr<const RecordedTurn> Get(const std::string& id) {
    std::lock_guard lock(mu_);
    Expire();
    auto it = map_.find(id);
    return it == map_.end() ? nullptr : it->second;
  }

 private:
  void Drop() {
    auto it = map_.find(order_.front().first);
    if (it != map_.end()) {
      bytes_ -= it->second->bytes();
      map_.erase(it);
    }
    order_.pop_front();
  }
  void Expire() {
    const auto now = std::chrono::steady_clock::now();
    while (!order_.empty() && order_.front().second <= now) Drop();
  }
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const RecordedTurn>> map_;
  std::deque<std::pair<std::string, std::chrono::steady_clock::time_point>> order_;
  size_t bytes_ = 0;
};

struct Server::Impl {
  // The io_context goes first in ~Impl (so the coroutine frames it still holds are destroyed while
  // every member they touch is alive), after the acceptor bound to it.
  ~Impl() {
    acceptor.reset();
    ioc.reset();
  }
  ServerOptions opt;
  std::unique_ptr<net::io_context> ioc = std::make_unique<net::io_context>();
  std::unique_ptr<tcp::acceptor> acceptor = std::make_unique<tcp::acceptor>(*ioc);
  uint16_t port = 0;
  std::vector<std::thread> io_threads;
  std::thread loader;
  Metrics metrics;
  std::atomic<size_t> connections{0};
  std::atomic<size_t> realtime_sessions{0};
  std::string model_id;
  AudioStore audio_store;

  std::mutex mu;
  std::condition_variable cv;
  bool load_done = false;
  Status load_status;
  std::atomic<bool> ready{false};
  std::shared_ptr<const AudioModel> model;  // set once, before `ready`
  std::unique_ptr<Scheduler> scheduler;     // set once, before `ready`
  bool stopped = false;

  struct Exchange;

  void Load();
  net::awaitable<void> Accept();
  net::awaitable<void> Serve(tcp::socket socket);
  net::awaitable<bool> Handle(Exchange& ex);
  bool Authorized(const Request& req) const {
    if (opt.api_key.empty()) return true;
    const auto it = req.find(http::field::authorization);
    const std::string_view auth = it == req.end() ? std::string_view{} : SV(it->value());
    const std::string_view prefix = "Bearer ";
    if (auth.size() > prefix.size() && auth.substr(0, prefix.size()) == prefix)
      return ConstantTimeEquals(auth.substr(prefix.size()), opt.api_key);
    const std::string_view key = SubprotocolKey(req);
    return !key.empty() && beast::websocket::is_upgrade(req) && ConstantTimeEquals(key, opt.api_key);
  }
  net::awaitable<bool> Speech(Exchange& ex);
  net::awaitable<bool> Transcription(Exchange& ex);
  net::awaitable<bool> Chat(Exchange& ex);
};

// One request and its reply on a connection.
struct Server::Impl::Exchange {
  Impl& server;
  beast::tcp_stream& stream;
  Request req;
  int status = 0;
  bool chunked = false;  // the reply's header went out as chunked
  bool counted = false;  // the reply is in the request counter

  // Counts the reply once, as `status` says, before its first byte is written: a client that has the
  // reply then finds it in /metrics. (A request that could not be read has no target: "other".)
  void Count() {
    if (counted) return;
    counted = true;
    server.metrics.CountRequest(EndpointLabel(PathOf(req.target())), status);
  }

  std::chrono::steady_clock::duration WriteTimeout() const {
    return std::chrono::milliseconds(static_cast<int64_t>(server.opt.write_timeout_seconds * 1000));
  }

  net::awaitable<bool> Send(int code, std::string_view content_type, std::string body,
                            std::vector<std::pair<std::string, std::string>> headers = {}) {
    http::response<http::string_body> res{static_cast<http::status>(code), req.version()};
    res.set(http::field::server, "lfmvox");
    res.set(http::field::content_type, beast::string_view(content_type.data(), content_type.size()));
    for (auto& [k, v] : headers) res.set(k, v);
    res.keep_alive(req.keep_alive());
    res.body() = std::move(body);
    res.prepare_payload();
    status = code;
    Count();
    stream.expires_after(WriteTimeout());
    beast::error_code ec;
    co_await http::async_write(stream, res, net::redirect_error(kAwait, ec));
    co_return !ec && req.keep_alive();
  }

  net::awaitable<bool> SendJson(int code, const json& j) {
    std::string body = Dump(j);
    co_return co_await Send(code, "application/json", std::move(body));
  }

  net::awaitable<bool> SendError(const ApiError& e) {
    std::vector<std::pair<std::string, std::string>> headers;
    if (e.status == 503) headers.emplace_back("Retry-After", "1");
    if (e.status == 401) headers.emplace_back("WWW-Authenticate", "Bearer");
    std::string body = ErrorBody(e);
    co_return co_await Send(e.status, "application/json", std::move(body), std::move(headers));
  }

  // Starts a chunked 200 reply; the body follows in SendChunk calls.
  net::awaitable<bool> BeginChunked(std::string_view content_type) {
    http::response<http::empty_body> res{http::status::ok, req.version()};
    res.set(http::field::server, "lfmvox");
    res.set(http::field::content_type, beast::string_view(content_type.data(), content_type.size()));
    res.set(http::field::cache_control, "no-cache");
    res.keep_alive(req.keep_alive());
    res.chunked(true);
    status = 200;
    chunked = true;
    Count();
    http::response_serializer<http::empty_body> sr{res};
    stream.expires_after(WriteTimeout());
    beast::error_code ec;
    co_await http::async_write_header(stream, sr, net::redirect_error(kAwait, ec));
    co_return !ec;
  }

  net::awaitable<bool> SendChunk(std::string_view data) {
    if (data.empty()) co_return true;
    stream.expires_after(WriteTimeout());
    beast::error_code ec;
    co_await net::async_write(stream, http::make_chunk(net::const_buffer(data.data(), data.size())),
                              net::redirect_error(kAwait, ec));
    co_return !ec;
  }

  net::awaitable<bool> EndChunked() {
    stream.expires_after(WriteTimeout());
    beast::error_code ec;
    co_await net::async_write(stream, http::make_chunk_last(), net::redirect_error(kAwait, ec));
    co_return !ec && req.keep_alive();
  }

  net::awaitable<bool> SendEvent(const json& j) {
    const std::string line = "data: " + Dump(j) + "\n\n";
    co_return co_await SendChunk(line);
  }
};

namespace {

// Takes a job's events on the connection's strand: the scheduler's notification cancels the timer.
class JobReader {
 public:
  // Watches `socket` too: a client that hangs up while the job runs (a non-stream reply writes nothing
  // until the end) cancels the job at once.
  JobReader(std::shared_ptr<Job> job, tcp::socket& socket)
      : job_(std::move(job)),
        socket_(socket),
        timer_(std::make_shared<net::steady_timer>(socket.get_executor())) {
    const net::any_io_executor ex = socket.get_executor();
    job_->SetNotify([timer = timer_, ex] { net::post(ex, [timer] { timer->cancel(); }); });
    socket.async_wait(tcp::socket::wait_read,
                      [job = job_, timer = timer_, alive = alive_, &socket](beast::error_code ec) {
                        // The wait may have completed just before the reader was done and run after it, when
                        // the reply is sent, the next request's read has taken the bytes that woke it, or the
                        // connection (and `socket`) is gone: then it does nothing (it runs on the same strand
                        // as the destructor).
                        if (ec == net::error::operation_aborted || !*alive) return;
                        // Readable: the end of the stream (or an error) means the client left; bytes (a
                        // pipelined request) are left for the next read. The peek never blocks.
                        char c;
                        ssize_t n = 0;
                        if (!ec) {
                          do {
                            n = ::recv(socket.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
                          } while (n < 0 && errno == EINTR);
                          if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
                        }
                        if (ec || n <= 0) {
                          job->Cancel();
                          timer->cancel();
                        }
                      });
  }
  ~JobReader() {
    *alive_ = false;
    beast::error_code ec;
    socket_.cancel(ec);  // the wait above (no other operation is pending while a handler runs)
    job_->SetNotify(nullptr);
    job_->Cancel();  // a no-op once finished; otherwise the client is gone or the reply failed
  }
  JobReader(const JobReader&) = delete;
  JobReader& operator=(const JobReader&) = delete;

  bool finished() const { return finished_; }

  // The next events (empty only when finished).
  net::awaitable<std::vector<Event>> Next() {
    for (;;) {
      std::vector<Event> ev = job_->Take(&finished_);
      if (!ev.empty() || finished_) co_return ev;
      timer_->expires_after(std::chrono::seconds(1));
      beast::error_code ec;
      co_await timer_->async_wait(net::redirect_error(kAwait, ec));
    }
  }

 private:
  std::shared_ptr<Job> job_;
  tcp::socket& socket_;
  std::shared_ptr<net::steady_timer> timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // false once the reader is done
  bool finished_ = false;
};

}  // namespace

void Server::Impl::Load() {
  std::shared_ptr<const AudioModel> m = opt.model;
  Status st;
  if (!m) {
    auto r = AudioModel::Load(opt.model_dir, opt.model_options);
    if (r.ok()) {
      m = *r;
    } else {
      st = r.status();
    }
  }
  std::unique_ptr<Scheduler> sched;
  if (st.ok()) {
    auto s = Scheduler::Create(m,
                               {.threads = opt.threads,
                                .max_sessions = opt.max_sessions,
                                .max_queued = opt.max_queued,
                                .context = opt.context,
                                .max_clip_seconds = opt.max_audio_seconds},
                               &metrics);
    if (s.ok()) {
      sched = std::move(s).value();
    } else {
      st = s.status();
    }
  }
  std::lock_guard lock(mu);
  if (st.ok() && !stopped) {
    model = std::move(m);
    scheduler = std::move(sched);
    ready.store(true);
  }
  load_status = st;
  load_done = true;
  cv.notify_all();
}

net::awaitable<void> Server::Impl::Accept() {
  for (;;) {
    beast::error_code ec;
    tcp::socket socket =
        co_await acceptor->async_accept(net::make_strand(*ioc), net::redirect_error(kAwait, ec));
    if (ec == net::error::operation_aborted || !acceptor->is_open()) co_return;
    if (ec) continue;  // a connection that failed before it was ours (EMFILE, reset): keep accepting
    net::co_spawn(socket.get_executor(), Serve(std::move(socket)), net::detached);
  }
}

net::awaitable<void> Server::Impl::Serve(tcp::socket socket) {
  struct Count {
    std::atomic<size_t>& n;
    size_t now;
    explicit Count(std::atomic<size_t>& c) : n(c), now(c.fetch_add(1) + 1) {}
    ~Count() {
#if defined(__GLIBC__)
      // The last connection gone: hand the pages its requests' buffers freed back to the system. glibc
      // keeps freed memory in per-thread arenas; after 100 abusive clients for 60 s that was ~85 MB of
      // resident set the idle server no longer used.
      if (n.fetch_sub(1) == 1) malloc_trim(0);
#else
      n.fetch_sub(1);
#endif
    }
  } count(connections);
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  const auto read_timeout = std::chrono::milliseconds(static_cast<int64_t>(opt.read_timeout_seconds * 1000));
  try {
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.header_limit(16 * 1024);
      parser.body_limit(opt.max_body_bytes);
      stream.expires_after(read_timeout);
      beast::error_code ec;
      co_await http::async_read(stream, buffer, parser, net::redirect_error(kAwait, ec));
      Exchange ex{*this, stream, {}};
      if (ec == http::error::body_limit || ec == http::error::header_limit) {
        ex.req.version(11);
        ex.req.keep_alive(false);
        const bool body = ec == http::error::body_limit;
        const ApiError too_large = {
            body ? 413 : 431,
            body ? "the request body is over the limit of " + std::to_string(opt.max_body_bytes) + " bytes"
                 : std::string("the request headers are over 16 KiB"),
            "", body ? "request_too_large" : "headers_too_large"};
        co_await ex.SendError(too_large);
        // Read (and drop) what the client is still sending for a moment, so it gets the reply rather
        // than a reset.
        stream.socket().shutdown(tcp::socket::shutdown_send, ec);
        stream.expires_after(std::chrono::seconds(2));
        std::vector<char> sink(64 * 1024);
        for (size_t drained = 0; drained < 4 * opt.max_body_bytes + (1u << 20);) {
          const size_t n =
              co_await stream.async_read_some(net::buffer(sink), net::redirect_error(kAwait, ec));
          if (ec) break;
          drained += n;
        }
        break;
      }
      if (ec) {
        const bool quiet = ec == http::error::end_of_stream || ec == beast::error::timeout ||
                           ec == net::error::eof || ec == net::error::connection_reset ||
                           ec == net::error::operation_aborted || ec == http::error::partial_message;
        if (!quiet) {
          ex.req.version(11);
          ex.req.keep_alive(false);
          const ApiError malformed = BadRequest("malformed HTTP request: " + ec.message());
          co_await ex.SendError(malformed);
        }
        break;
      }
      ex.req = parser.release();
      if (count.now > opt.max_connections) {
        ex.req.keep_alive(false);
        const ApiError full = {503, "too many open connections", "", "", "unavailable_error"};
        co_await ex.SendError(full);
        break;
      }
      if (PathOf(ex.req.target()) == "/v1/realtime" && beast::websocket::is_upgrade(ex.req) && ready.load() &&
          Authorized(ex.req) && SameOrigin(ex.req)) {
        metrics.CountRequest("/v1/realtime", 101);
        co_await ServeRealtime(stream, std::move(ex.req),
                               {scheduler.get(), &opt, &realtime_sessions, &metrics});
        break;
      }
      bool keep = false;
      std::string failure;
      try {
        keep = co_await Handle(ex);
      } catch (const std::exception& e) {
        failure = std::string("internal error: ") + e.what();
      }
      if (!failure.empty()) {
        // A bug or out of memory in this request (co_await is not allowed inside the catch).
        const ApiError internal = {500, failure, "", "", "server_error"};
        if (!ex.chunked) co_await ex.SendError(internal);
        keep = false;
      }
      ex.Count();  // a reply that never started (Send and BeginChunked count their own)
      if (!keep) break;
    }
  } catch (const std::exception&) {
    // The connection ends; the server goes on.
  }
  beast::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream.socket().close(ec);
}

net::awaitable<bool> Server::Impl::Handle(Exchange& ex) {
  const std::string path(PathOf(ex.req.target()));
  const http::verb method = ex.req.method();
  auto only = [&](http::verb v) { return method == v; };
  const json ok = {{"status", "ok"}};  // (built outside co_await: GCC 12 mishandles literals there)
  if (path == "/livez") co_return co_await ex.SendJson(200, ok);
  if (path == "/readyz" || path == "/health") {
    if (ready.load()) co_return co_await ex.SendJson(200, ok);
    std::string why = "the model is loading";
    {
      std::lock_guard lock(mu);
      if (load_done && !load_status.ok()) why = "the model failed to load: " + load_status.message();
    }
    SEND_ERROR(ex, {503, why, "", "", "unavailable_error"});
  }
  if (const WebFile* f = WebAsset(path)) {  // the page holds no secret: no key needed to load it
    if (!only(http::verb::get))
      SEND_ERROR(ex, {405, path + " takes GET", "", "method_not_allowed", "invalid_request_error"});
    std::vector<std::pair<std::string, std::string>> headers = {
        {"Content-Security-Policy", std::string(kWebCsp)},
        {"X-Content-Type-Options", "nosniff"},
        {"Referrer-Policy", "no-referrer"},
        {"Cross-Origin-Opener-Policy", "same-origin"},
        {"Cache-Control", "no-cache"}};
    co_return co_await ex.Send(200, f->content_type, std::string(f->body), std::move(headers));
  }
  if (!Authorized(ex.req)) {
    SEND_ERROR(ex, {401, "a valid API key is required: send 'Authorization: Bearer KEY'", "",
                    "invalid_api_key", "authentication_error"});
  }
  const bool known = EndpointLabel(path) != "other";
  if (!known) SEND_ERROR(ex, {404, "no endpoint " + path, "", "unknown_url", "not_found_error"});
  if (path == "/v1/realtime") {
    if (!SameOrigin(ex.req)) {
      SEND_ERROR(
          ex, {403, "a WebSocket from another site's page is refused: open the page this server serves", "",
               "cross_origin", "permission_error"});
    }
    if (!ready.load()) SEND_ERROR(ex, {503, "the model is loading", "", "", "unavailable_error"});
    SEND_ERROR(ex, BadRequest("/v1/realtime is a WebSocket: send GET with 'Upgrade: websocket'"));
  }
  const bool is_get = path == "/metrics" || path == "/v1/models";
  if (!only(is_get ? http::verb::get : http::verb::post)) {
    SEND_ERROR(ex, {405, path + " takes " + (is_get ? "GET" : "POST"), "", "method_not_allowed",
                    "invalid_request_error"});
  }
  if (path == "/metrics") {
    const size_t active = ready.load() ? scheduler->active() : 0;
    const size_t queued = ready.load() ? scheduler->queued() : 0;
    std::string text = metrics.Render(active, queued, connections.load());
    co_return co_await ex.Send(200, "text/plain; version=0.0.4", std::move(text));
  }
  if (!ready.load()) SEND_ERROR(ex, {503, "the model is loading", "", "", "unavailable_error"});
  if (path == "/v1/models") {
    json m = {{"id", model_id},
              {"object", "model"},
              {"created", 0},
              {"owned_by", "lfmvox"},
              {"family", std::string(model->family())},
              {"voices", model->voices()}};
    const json list = {{"object", "list"}, {"data", json::array({m})}};
    co_return co_await ex.SendJson(200, list);
  }
  // A partial GGUF set serves what its files allow (Server::Endpoints lists it at start).
  if (path == "/v1/audio/speech") {
    if (Status st = model->CanSpeak(); !st.ok()) SEND_ERROR(ex, NotServed(path, st));
    co_return co_await Speech(ex);
  }
  if (path == "/v1/audio/transcriptions") {
    if (Status st = model->CanListen(); !st.ok()) SEND_ERROR(ex, NotServed(path, st));
    co_return co_await Transcription(ex);
  }
  co_return co_await Chat(ex);
}

// ---- POST /v1/audio/speech ----

net::awaitable<bool> Server::Impl::Speech(Exchange& ex) {
  SpeechRequest r;
  if (auto e = ParseSpeechRequest(ex.req.body(), opt.max_text_chars, &r)) SEND_ERROR(ex, *e);
  const std::string &input = r.input, &voice_name = r.voice, &stream_format = r.stream_format;
  OutFormat format;
  if (auto fe = ParseOutFormat(r.response_format, model->sample_rate(), "response_format", &format)) {
    SEND_ERROR(ex, *fe);
  }
  std::string voice = model->default_voice();
  if (!voice_name.empty()) {
    std::optional<std::string> v = MapVoice(*model, voice_name);
    if (!v) {
      std::string list;
      for (const std::string& x : model->voices()) list += (list.empty() ? "" : ", ") + x;
      SEND_ERROR(ex, BadRequest("unknown voice '" + voice_name + "'; this model has " + list +
                                    " (and the OpenAI names mapped onto them)",
                                "voice"));
    }
    voice = *v;
  }

  // `speed` ≠ 1: the decoded speech goes through the time-scale modifier (same pitch) as it streams.
  std::unique_ptr<TempoStretcher> tempo;
  if (r.speed && std::abs(*r.speed - 1.0) > 1e-9) {
    auto t = TempoStretcher::Create(model->sample_rate(), *r.speed);
    if (!t.ok()) SEND_ERROR(ex, FromStatus(t.status(), "speed"));
    tempo = std::move(t).value();
  }

  JobSpec spec;
  spec.prompt = [voice, input](Conversation& c) { return c.StartSpeech(voice, input); };
  spec.options = GenerateOptions::ForTts(*model);
  if (r.temperature) spec.options.audio.temperature = static_cast<float>(*r.temperature);
  if (opt.max_new_tokens > 0)
    spec.options.max_new_tokens = std::min(spec.options.max_new_tokens, opt.max_new_tokens);
  spec.seed = r.seed;
  auto job = scheduler->Submit(std::move(spec));
  if (!job.ok()) SEND_ERROR(ex, {503, job.status().message(), "", "", "unavailable_error"});

  const bool sse = stream_format == "sse";
  const int rate = model->sample_rate();
  bool started = false;
  auto emit = [&](std::string_view bytes) -> net::awaitable<bool> {
    if (sse) {
      const json delta = {{"type", "speech.audio.delta"}, {"audio", Base64Encode(bytes)}};
      co_return co_await ex.SendEvent(delta);
    }
    co_return co_await ex.SendChunk(bytes);
  };
  std::vector<float> stretched;
  JobReader reader(*job, ex.stream.socket());
  std::vector<float> all;  // the whole speech, for the formats encoded at the end
  // Sends (streamed formats) or keeps (the others) a piece of the speech.
  auto deliver = [&](std::span<const float> pcm) -> net::awaitable<bool> {
    if (pcm.empty()) co_return true;
    if (!Streams(format)) {
      all.insert(all.end(), pcm.begin(), pcm.end());
      co_return true;
    }
    std::string bytes;
    AppendPcmBytes(pcm, PcmFormat::kS16, &bytes);
    co_return co_await emit(bytes);
  };
  while (!reader.finished()) {
    std::vector<Event> events = co_await reader.Next();
    for (Event& ev : events) {
      if (ev.kind == Event::kError) {
        if (!started) SEND_ERROR(ex, FromStatus(ev.error, "input"));
        if (sse) {
          const json err = {{"type", "error"},
                            {"error", json::parse(ErrorBody(FromStatus(ev.error)))["error"]}};
          co_await ex.SendEvent(err);
          co_return co_await ex.EndChunked();
        }
        co_return false;  // a cut audio stream: close without the last chunk, so the client sees the failure
      }
      if (!started) {
        if (!co_await ex.BeginChunked(sse ? "text/event-stream" : MimeType(format))) co_return false;
        started = true;
        const std::string header = format == OutFormat::kWav ? StreamingWavHeader(rate) : std::string();
        if (!header.empty() && !co_await emit(header)) co_return false;
      }
      if (ev.kind == Event::kPcm) {
        std::span<const float> pcm = ev.pcm;
        if (tempo) {
          stretched.clear();
          if (!tempo->Push(ev.pcm, &stretched).ok()) co_return false;  // a cut stream: the client sees it
          pcm = stretched;
        }
        if (!co_await deliver(pcm)) co_return false;
      } else if (ev.kind == Event::kDone) {
        if (tempo) {
          stretched.clear();
          if (!tempo->Finish(&stretched).ok()) co_return false;
          const std::span<const float> tail = stretched;
          if (!co_await deliver(tail)) co_return false;
        }
        if (!Streams(format) && !all.empty()) {
          auto encoded = EncodeAudio(all, rate, FileFormat(format));
          if (!encoded.ok()) co_return false;
          if (!co_await emit(*encoded)) co_return false;
        }
        if (sse) {
          const int out_tokens = ev.summary.audio_frames + ev.summary.text_tokens;
          const int in_tokens = static_cast<int>(Utf8Chars(input));
          const json done = {{"type", "speech.audio.done"},
                             {"usage",
                              {{"input_tokens", in_tokens},
                               {"output_tokens", out_tokens},
                               {"total_tokens", in_tokens + out_tokens}}}};
          if (!co_await ex.SendEvent(done)) co_return false;
        }
        co_return co_await ex.EndChunked();
      }
    }
  }
  co_return false;
}

// ---- POST /v1/audio/transcriptions ----

net::awaitable<bool> Server::Impl::Transcription(Exchange& ex) {
  const auto ct = ex.req.find(http::field::content_type);
  TranscriptionForm form;
  if (auto e = ParseTranscriptionForm(ct == ex.req.end() ? std::string_view{} : SV(ct->value()),
                                      ex.req.body(), &form)) {
    SEND_ERROR(ex, *e);
  }
  const std::string &response_format = form.response_format, &language = form.language;
  auto audio = DecodeAudio(form.parts[form.file].body, opt.max_audio_seconds);
  if (!audio.ok()) SEND_ERROR(ex, FromStatus(audio.status(), "file"));
  const double duration = audio->seconds();
  metrics.AddAudioIn(duration);
  auto clip = std::make_shared<DecodedAudio>(std::move(audio).value());
  JobSpec spec;
  spec.prompt = [clip](Conversation& c) {
    RETURN_IF_ERROR(c.StartAsr());
    RETURN_IF_ERROR(c.AddAudio(clip->samples, clip->sample_rate, clip->channels));
    RETURN_IF_ERROR(c.EndTurn());
    return c.StartTurn("assistant");
  };
  spec.options = GenerateOptions::ForAsr(*model);
  if (opt.max_new_tokens > 0)
    spec.options.max_new_tokens = std::min(spec.options.max_new_tokens, opt.max_new_tokens);
  spec.options.word_timestamps = form.words;
  spec.options.text.temperature = form.temperature;
  spec.want_pcm = false;
  auto job = scheduler->Submit(std::move(spec));
  if (!job.ok()) SEND_ERROR(ex, {503, job.status().message(), "", "", "unavailable_error"});
  JobReader reader(*job, ex.stream.socket());
  const bool sse = form.stream;
  std::string text;
  bool started = false;
  while (!reader.finished()) {
    std::vector<Event> events = co_await reader.Next();
    for (Event& ev : events) {
      if (ev.kind == Event::kError) {
        if (!started) SEND_ERROR(ex, FromStatus(ev.error, "file"));
        const json err = {{"type", "error"},
                          {"error", {{"message", ev.error.message()}, {"type", "server_error"}}}};
        co_await ex.SendEvent(err);
        co_return co_await ex.EndChunked();
      }
      if (sse && !started) {
        if (!co_await ex.BeginChunked("text/event-stream")) co_return false;
        started = true;
      }
      if (ev.kind == Event::kText) {
        text += ev.text;
        const json delta = {{"type", "transcript.text.delta"}, {"delta", ev.text}};
        if (sse && !co_await ex.SendEvent(delta)) co_return false;
      } else if (ev.kind == Event::kDone) {
        const json usage = {{"type", "duration"}, {"seconds", duration}};
        if (sse) {
          const json done = {{"type", "transcript.text.done"}, {"text", text}, {"usage", usage}};
          if (!co_await ex.SendEvent(done)) co_return false;
          co_return co_await ex.EndChunked();
        }
        const json plain = {{"text", text}, {"usage", usage}};
        if (response_format == "json") co_return co_await ex.SendJson(200, plain);
        // (Bodies are built before co_await: GCC 12 mishandles some temporaries inside it.)
        std::string out_body;
        std::string_view out_type = "text/plain; charset=utf-8";
        if (response_format == "text") {
          out_body = text + "\n";
        } else if (response_format == "srt") {
          out_body = "1\n" + Timestamp(0, ',') + " --> " + Timestamp(duration, ',') + "\n" + text + "\n\n";
        } else if (response_format == "vtt") {
          out_type = "text/vtt; charset=utf-8";
          out_body =
              "WEBVTT\n\n" + Timestamp(0, '.') + " --> " + Timestamp(duration, '.') + "\n" + text + "\n\n";
        }
        if (!out_body.empty()) co_return co_await ex.Send(200, out_type, std::move(out_body));
        json segment = {{"id", 0},
                        {"seek", 0},
                        {"start", 0.0},
                        {"end", duration},
                        {"text", text},
                        {"tokens", json::array()},
                        {"temperature", 0.0},
                        {"avg_logprob", 0.0},
                        {"compression_ratio", 0.0},
                        {"no_speech_prob", 0.0}};
        json verbose = {{"task", "transcribe"},
                        {"language", language.empty() ? "english" : language},
                        {"duration", duration},
                        {"text", text},
                        {"segments", json::array({segment})},
                        {"usage", usage}};
        if (form.words) {
          json words = json::array();
          for (const WordTiming& w : ev.summary.words) {
            words.push_back({{"word", w.text},
                             {"start", std::min(w.start, duration)},
                             {"end", std::min(w.end, duration)}});
          }
          verbose["words"] = std::move(words);
        }
        co_return co_await ex.SendJson(200, verbose);
      }
    }
  }
  co_return false;
}

// ---- POST /v1/chat/completions ----

namespace {

// One message of the request, validated: its role and its pieces (text, or decoded audio).
struct ChatPiece {
  std::string text;
  std::shared_ptr<DecodedAudio> audio;
};
// An assistant message is either pieces or a turn replayed by its audio id.

struct ChatMessage {
  std::string role;
  std::vector<ChatPiece> pieces;
  std::shared_ptr<const RecordedTurn> turn;  // assistant `audio: {id}` of an earlier answer
};

}  // namespace

net::awaitable<bool> Server::Impl::Chat(Exchange& ex) {
  json body;
  if (auto e = ParseObject(ex.req.body(), &body)) SEND_ERROR(ex, *e);
  std::optional<ApiError> e;
  std::string model_name;
  bool stream = false, include_usage = false;
  std::optional<double> temperature, max_tokens, max_completion_tokens;
  uint64_t seed = 0;
  if (!e) e = GetString(body, "model", &model_name, false);
  if (!e) e = GetBool(body, "stream", &stream);
  if (!e) e = GetNumber(body, "temperature", 0, 2, &temperature);
  if (!e) e = GetNumber(body, "max_tokens", 1, 1 << 20, &max_tokens);
  if (!e) e = GetNumber(body, "max_completion_tokens", 1, 1 << 20, &max_completion_tokens);
  if (!e) e = GetSeed(body, &seed);
  if (!e) {
    if (const json* so = Field(body, "stream_options"); so != nullptr) {
      if (!so->is_object())
        e = BadRequest("'stream_options' must be an object", "stream_options");
      else
        e = GetBool(*so, "include_usage", &include_usage);
    }
  }
  if (e) SEND_ERROR(ex, *e);
  // modalities: ["text"] (default) or ["text", "audio"].
  bool audio_out = false;
  if (const json* m = Field(body, "modalities"); m != nullptr) {
    if (!m->is_array() || m->empty()) {
      SEND_ERROR(ex, BadRequest("'modalities' must be a list of \"text\" and \"audio\"", "modalities"));
    }
    for (const json& x : *m) {
      if (!x.is_string() || (x != "text" && x != "audio")) {
        SEND_ERROR(ex, BadRequest("'modalities' takes \"text\" and \"audio\"", "modalities"));
      }
      if (x == "audio") audio_out = true;
    }
  }
  OutFormat format = OutFormat::kPcm;
  if (audio_out) {
    if (Status st = model->CanSpeak(); !st.ok()) SEND_ERROR(ex, NotServed("modalities [\"audio\"]", st));
    const json* a = Field(body, "audio");
    if (a == nullptr || !a->is_object()) {
      SEND_ERROR(
          ex,
          BadRequest("'audio' ({\"voice\", \"format\"}) is required with modalities [\"text\", \"audio\"]",
                     "audio"));
    }
    std::string voice, fmt;
    if (auto ae = GetString(*a, "voice", &voice, false)) SEND_ERROR(ex, *ae);
    if (auto ae = GetString(*a, "format", &fmt, true)) SEND_ERROR(ex, *ae);
    if (auto ae = ParseOutFormat(fmt, model->sample_rate(), "audio.format", &format)) SEND_ERROR(ex, *ae);
    if (stream && format != OutFormat::kPcm) {
      SEND_ERROR(ex, BadRequest("streamed audio must be pcm16", "audio.format"));
    }
  }
  // messages
  const json* msgs = Field(body, "messages");
  if (msgs == nullptr || !msgs->is_array() || msgs->empty()) {
    SEND_ERROR(ex, BadRequest("'messages' must be a non-empty list", "messages"));
  }
  if (msgs->size() > 256) SEND_ERROR(ex, BadRequest("more than 256 messages", "messages"));
  std::vector<ChatMessage> messages;
  bool has_system = false;
  double audio_seconds = 0;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) SEND_ERROR(ex, BadRequest(where + " must be an object", where));
    ChatMessage msg;
    if (auto me = GetString(m, "role", &msg.role, true)) SEND_ERROR(ex, *me);
    if (msg.role == "developer") msg.role = "system";
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant") {
      SEND_ERROR(ex, BadRequest(where + ".role must be system, user or assistant", where + ".role"));
    }
    has_system |= msg.role == "system";
    const json* content = Field(m, "content");
    if (const json* au = Field(m, "audio"); au != nullptr && !au->is_null()) {
      std::string audio_ref;
      if (msg.role != "assistant" || !au->is_object()) {
        SEND_ERROR(ex, BadRequest(where + ".audio ({\"id\"}) is for assistant messages", where + ".audio"));
      }
      if (auto ae = GetString(*au, "id", &audio_ref, true)) SEND_ERROR(ex, *ae);
      msg.turn = audio_store.Get(audio_ref);
      if (!msg.turn) {
        SEND_ERROR(ex, BadRequest(where + ".audio.id '" + audio_ref.substr(0, 64) +
                                      "' is unknown or expired (answers are kept for an hour)",
                                  where + ".audio.id"));
      }
      messages.push_back(std::move(msg));  // its content, if any, is the transcript: the turn replaces it
      continue;
    }
    auto add_text = [&](const std::string& t) -> std::optional<ApiError> {
      if (Utf8Chars(t) > opt.max_text_chars) {
        return BadRequest(where + " has a text over " + std::to_string(opt.max_text_chars) + " characters",
                          where + ".content", "string_above_max_length");
      }
      msg.pieces.push_back({t, nullptr});
      return std::nullopt;
    };
    if (content == nullptr) {
      SEND_ERROR(ex, BadRequest(where + ".content is required", where + ".content"));
    } else if (content->is_string()) {
      if (auto te = add_text(content->get<std::string>())) SEND_ERROR(ex, *te);
    } else if (content->is_array()) {
      for (size_t k = 0; k < content->size(); ++k) {
        const json& part = (*content)[k];
        const std::string pw = where + ".content[" + std::to_string(k) + "]";
        std::string type;
        if (!part.is_object()) SEND_ERROR(ex, BadRequest(pw + " must be an object", pw));
        if (auto pe = GetString(part, "type", &type, true)) SEND_ERROR(ex, *pe);
        if (type == "text" || type == "input_text") {
          std::string t;
          if (auto pe = GetString(part, "text", &t, true)) SEND_ERROR(ex, *pe);
          if (auto te = add_text(t)) SEND_ERROR(ex, *te);
        } else if (type == "input_audio") {
          if (msg.role != "user") {
            SEND_ERROR(ex, BadRequest(pw + ": input_audio is for user messages", pw));
          }
          const json* ia = Field(part, "input_audio");
          std::string data;
          if (ia == nullptr || !ia->is_object()) {
            SEND_ERROR(ex, BadRequest(pw + ".input_audio must be {data, format}", pw));
          }
          if (auto pe = GetString(*ia, "data", &data, true)) SEND_ERROR(ex, *pe);
          auto bytes = Base64Decode(data, opt.max_body_bytes);
          if (!bytes.ok())
            SEND_ERROR(ex, BadRequest(pw + ".input_audio.data: " + bytes.status().message(), pw));
          auto audio = DecodeAudio(*bytes, opt.max_audio_seconds);
          if (!audio.ok()) SEND_ERROR(ex, FromStatus(audio.status().WithContext(pw), pw));
          audio_seconds += audio->seconds();
          msg.pieces.push_back({"", std::make_shared<DecodedAudio>(std::move(audio).value())});
        } else {
          SEND_ERROR(
              ex,
              BadRequest(pw + ": content part type '" + type + "' is not supported (text, input_audio)", pw));
        }
      }
    } else {
      SEND_ERROR(ex, BadRequest(where + ".content must be a string or a list of parts", where));
    }
    messages.push_back(std::move(msg));
  }
  metrics.AddAudioIn(audio_seconds);

  JobSpec spec;
  // Speech out: the model's interleaved speech-to-speech, with its default system prompt unless the
  // request gives one. Text out: the turns as given, greedy, sequential.
  const bool add_default_system = audio_out && !has_system;
  spec.prompt = [messages = std::move(messages), add_default_system](Conversation& c) {
    if (add_default_system) {
      RETURN_IF_ERROR(c.StartChat());
    } else {
      RETURN_IF_ERROR(c.Begin());
    }
    for (const ChatMessage& m : messages) {
      if (m.turn) {
        RETURN_IF_ERROR(m.turn->Replay(c));
        continue;
      }
      RETURN_IF_ERROR(c.StartTurn(m.role));
      for (const ChatPiece& p : m.pieces) {
        if (p.audio) {
          RETURN_IF_ERROR(c.AddAudio(p.audio->samples, p.audio->sample_rate, p.audio->channels));
        } else {
          RETURN_IF_ERROR(c.AddText(p.text));
        }
      }
      RETURN_IF_ERROR(c.EndTurn());
    }
    return c.StartTurn("assistant");
  };
  if (audio_out) {
    spec.options = GenerateOptions::ForSpeechToSpeech(*model);
    if (temperature) spec.options.audio.temperature = static_cast<float>(*temperature);
  } else {
    spec.options = GenerateOptions{};  // sequential, greedy text
    spec.text_only = true;
    spec.want_pcm = false;
  }
  const double limit = max_completion_tokens ? *max_completion_tokens : max_tokens ? *max_tokens : 0;
  if (limit > 0) spec.options.max_new_tokens = static_cast<int>(limit);
  if (opt.max_new_tokens > 0)
    spec.options.max_new_tokens = std::min(spec.options.max_new_tokens, opt.max_new_tokens);
  spec.seed = seed;
  spec.record_turn = audio_out;
  auto job = scheduler->Submit(std::move(spec));
  if (!job.ok()) SEND_ERROR(ex, {503, job.status().message(), "", "", "unavailable_error"});

  const std::string id = NewId("chatcmpl-"), audio_id = NewId("audio_");
  const int64_t created = UnixNow();
  auto chunk = [&](json delta, json finish) {
    return json{
        {"id", id},
        {"object", "chat.completion.chunk"},
        {"created", created},
        {"model", model_id},
        {"choices", json::array({{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", finish}}})}};
  };
  JobReader reader(*job, ex.stream.socket());
  std::string text;
  std::vector<float> pcm;
  bool started = false;
  while (!reader.finished()) {
    std::vector<Event> events = co_await reader.Next();
    for (Event& ev : events) {
      if (ev.kind == Event::kError) {
        if (!started) SEND_ERROR(ex, FromStatus(ev.error, "messages"));
        const json err = {{"error", {{"message", ev.error.message()}, {"type", "server_error"}}}};
        co_await ex.SendEvent(err);
        co_return co_await ex.EndChunked();
      }
      if (stream && !started) {
        if (!co_await ex.BeginChunked("text/event-stream")) co_return false;
        started = true;
        const json first = chunk({{"role", "assistant"}}, nullptr);
        if (!co_await ex.SendEvent(first)) co_return false;
      }
      if (ev.kind == Event::kText) {
        text += ev.text;
        if (stream) {
          json delta = audio_out ? json{{"audio", {{"id", audio_id}, {"transcript", ev.text}}}}
                                 : json{{"content", ev.text}};
          if (!co_await ex.SendEvent(chunk(std::move(delta), nullptr))) co_return false;
        }
      } else if (ev.kind == Event::kPcm) {
        if (stream) {
          std::string bytes;
          AppendPcmBytes(ev.pcm, PcmFormat::kS16, &bytes);
          const json delta = chunk({{"audio", {{"id", audio_id}, {"data", Base64Encode(bytes)}}}}, nullptr);
          if (!co_await ex.SendEvent(delta)) co_return false;
        } else {
          pcm.insert(pcm.end(), ev.pcm.begin(), ev.pcm.end());
        }
      } else if (ev.kind == Event::kDone) {
        const GenerateSummary& s = ev.summary;
        if (ev.turn) audio_store.Put(audio_id, std::move(ev.turn));
        const std::string finish = s.ended || s.cancelled ? "stop" : "length";
        const int completion = s.text_tokens + s.audio_frames;
        const json usage = {
            {"prompt_tokens", 0}, {"completion_tokens", completion}, {"total_tokens", completion}};
        if (stream) {
          if (!co_await ex.SendEvent(chunk(json::object(), finish))) co_return false;
          if (include_usage) {
            json u = chunk(json::object(), nullptr);
            u["choices"] = json::array();
            u["usage"] = usage;
            if (!co_await ex.SendEvent(u)) co_return false;
          }
          if (!co_await ex.SendChunk("data: [DONE]\n\n")) co_return false;
          co_return co_await ex.EndChunked();
        }
        json message = {{"role", "assistant"}, {"content", audio_out ? json(nullptr) : json(text)}};
        if (audio_out) {
          std::string data;
          if (format == OutFormat::kPcm) {
            AppendPcmBytes(pcm, PcmFormat::kS16, &data);
          } else if (format == OutFormat::kWav) {
            auto w = pcm.empty() ? Result<std::string>(StreamingWavHeader(model->sample_rate()))
                                 : EncodeAudio(pcm, model->sample_rate(), AudioFileFormat::kWav);
            if (!w.ok()) SEND_ERROR(ex, FromStatus(w.status()));
            data = std::move(w).value();
          } else if (!pcm.empty()) {
            auto w = EncodeAudio(pcm, model->sample_rate(), FileFormat(format));
            if (!w.ok()) SEND_ERROR(ex, FromStatus(w.status()));
            data = std::move(w).value();
          }
          message["audio"] = {{"id", audio_id},
                              {"data", Base64Encode(data)},
                              {"transcript", text},
                              {"expires_at", created + 3600}};
        }
        const json completion_json = {
            {"id", id},
            {"object", "chat.completion"},
            {"created", created},
            {"model", model_id},
            {"choices", json::array({{{"index", 0}, {"message", message}, {"finish_reason", finish}}})},
            {"usage", usage}};
        co_return co_await ex.SendJson(200, completion_json);
      }
    }
  }
  co_return false;
}

// ---------------------------------------------------------------------------

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Stop(); }

uint16_t Server::port() const { return impl_->port; }

Status Server::WaitReady() {
  std::unique_lock lock(impl_->mu);
  impl_->cv.wait(lock, [&] { return impl_->load_done; });
  return impl_->load_status;
}

std::vector<std::string> Server::Endpoints() const {
  std::vector<std::string> lines;
  const AudioModel& m = *impl_->model;
  const Status listen = m.CanListen(), speak = m.CanSpeak();
  auto line = [&](const char* path, const Status& st) {
    lines.push_back(st.ok() ? std::string(path) : std::string(path) + " (not served: " + st.message() + ")");
  };
  line("/v1/audio/speech", speak);
  line("/v1/audio/transcriptions", listen);
  lines.push_back(std::string("/v1/chat/completions") + (speak.ok() ? "" : " (text answers only)") +
                  (listen.ok() ? "" : " (text questions only)"));
  if (listen.ok() && !speak.ok()) {
    lines.push_back("/v1/realtime (transcription sessions only: " + speak.message() + ")");
  } else {
    line("/v1/realtime", listen);
  }
  return lines;
}

Result<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  if (!options.model && options.model_dir.empty()) return InvalidArgument("give the model (--model DIR)");
  if (options.max_sessions < 1 || options.io_threads < 1 || options.threads < 1) {
    return InvalidArgument("max_sessions, io_threads and threads must be at least 1");
  }
  auto impl = std::make_unique<Impl>();
  impl->opt = options;
  impl->model_id = options.model_id;
  if (impl->model_id.empty()) {
    std::filesystem::path p(options.model_dir);
    while (!p.empty() && p.filename().empty()) p = p.parent_path();
    impl->model_id = p.filename().string().empty() ? "lfmvox" : p.filename().string();
  }
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(options.host, ec);
  if (ec) return InvalidArgument("--host " + options.host + " is not an IP address (" + ec.message() + ")");
  const tcp::endpoint endpoint(address, options.port);
  impl->acceptor->open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor->bind(endpoint, ec);
  if (!ec) impl->acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return IoError("cannot listen on " + options.host + ":" + std::to_string(options.port) + ": " +
                   ec.message() + " (is another server on that port? pick another with --port)");
  }
  impl->port = impl->acceptor->local_endpoint(ec).port();
  Impl* p = impl.get();
  net::co_spawn(*p->ioc, p->Accept(), net::detached);
  for (int i = 0; i < options.io_threads; ++i) {
    p->io_threads.emplace_back([p] {
      for (;;) {
        try {
          p->ioc->run();
          return;
        } catch (const std::exception&) {
          // A handler threw (out of memory): drop it and keep serving.
        }
      }
    });
  }
  p->loader = std::thread([p] { p->Load(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

void Server::Stop() {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.mu);
    if (s.stopped) return;
    s.stopped = true;
  }
  if (s.loader.joinable()) s.loader.join();
  net::post(*s.ioc, [&s] {
    beast::error_code ec;
    s.acceptor->close(ec);
  });
  s.ready.store(false);
  s.ioc->stop();
  for (std::thread& t : s.io_threads) t.join();
  s.io_threads.clear();
  // No connection runs now; the sessions are cancelled and their (suspended) connections are destroyed
  // with the io_context.
  s.scheduler.reset();
}

}  // namespace lfmvox::server
