#include "realtime.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "codec_util.h"
#include "lfmvox/audio_io.h"
#include "request_parse.h"
#include "vad.h"
#include "wire.h"

namespace lfmvox::server {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using json = nlohmann::json;
constexpr int kRate = 24000;  // the wire's PCM16 rate, both ways

std::string Id(const char* prefix) {
  static std::atomic<uint64_t> n{0};
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%s%llx", prefix, static_cast<unsigned long long>(n.fetch_add(1)));
  return buf;
}

struct Session : std::enable_shared_from_this<Session> {
  Session(beast::tcp_stream& s, RealtimeContext c) : ws(s), ctx(c) {}

  websocket::stream<beast::tcp_stream&> ws;
  RealtimeContext ctx;
  std::shared_ptr<Conversation> conv;
  std::string id = Id("sess_");
  json turn_detection = nullptr;
  // audio.input.transcription: null (off) or the client's {model, language, prompt}; when set, every
  // committed user turn is also transcribed by the model (ASR), as its own job beside the response.
  json transcription = nullptr;
  std::vector<std::shared_ptr<Job>> transcribing;  // those in flight
  // session.type "transcription": committed turns are transcribed and never answered.
  bool transcription_only = false;
  std::string instructions;

  // Writes go one at a time, in order.
  std::deque<std::string> out;
  bool writing = false;
  bool closed = false;

  // The history as the scheduler thread will build it; these are only touched on the connection's strand
  // and copied into each job's prompt.
  std::vector<float> buffer;                      // appended, not yet committed
  size_t heard = 0;                               // samples appended since the session began (accepted ones)
  size_t buffer_origin = 0;                       // the sample index of buffer[0]
  std::vector<std::vector<float>> pending_audio;  // committed user turns not yet answered
  std::vector<std::string> pending_text;          // user text items not yet answered
  struct State {                                  // scheduler thread only
    bool started = false;
    bool open_turn = false;  // the last answer's turn is still open (EndTurn pending)
  };
  std::shared_ptr<State> state = std::make_shared<State>();
  size_t truncate_to = SIZE_MAX;  // a conversation.item.truncate for the last answer, sent with the next job
  size_t answer_sent = 0;         // samples of the last answer's speech sent to the client

  std::shared_ptr<Job> job;  // the response in flight
  std::string response_id, item_id;
  std::string cancel_reason;  // why the response in flight was cancelled: client_cancelled, turn_detected

  // Server VAD (turn_detection.type "server_vad"); null: the client commits turns.
  std::unique_ptr<ServerVad> vad;
  size_t vad_origin = 0;  // the sample index where the detector began
  size_t prefix_samples = 0;
  bool create_response = true, interrupt_response = true;
  bool answer_pending = false;  // a VAD turn waits for the response in flight to end
  std::string speech_item;      // the item id of the turn being spoken
  // turn_detection.idle_timeout_ms, in input samples (0: off): that much audio without speech after
  // the last answer has played (counted from idle_from, a sample index; SIZE_MAX: not counting)
  // commits the silence and answers it.
  size_t idle_samples = 0;
  size_t idle_from = SIZE_MAX;
  size_t first_audio_heard = 0;  // `heard` when the response in flight sent its first audio
  // semantic_vad: a pause the detector finds ends the turn only when the model's own transcript of the
  // turn so far reads as finished (EndsLikeASentence), or once the pause has lasted semantic_wait input
  // samples (eagerness); speech that resumes first continues the turn. end_at: where the pause's turn
  // would end (the detector's audio_end); end_check: the transcription deciding it (one at a time).
  bool semantic = false;
  size_t semantic_wait = 0;
  bool end_pending = false;
  size_t end_at = 0;
  uint64_t end_generation = 0;  // bumped whenever the pending end is dropped or taken
  std::shared_ptr<Job> end_check;

  void Send(json j) {
    if (closed) return;
    j["event_id"] = Id("event_");
    out.push_back(Dump(j));
    if (!writing) {
      writing = true;
      net::co_spawn(ws.get_executor(), Writer(shared_from_this()), net::detached);
    }
  }
  static net::awaitable<void> Writer(std::shared_ptr<Session> self) {
    while (!self->out.empty() && !self->closed) {
      std::string s = std::move(self->out.front());
      self->out.pop_front();
      beast::error_code ec;
      self->ws.text(true);
      co_await self->ws.async_write(net::buffer(s), net::redirect_error(kAwait, ec));
      if (ec) self->closed = true;
    }
    self->out.clear();
    self->writing = false;
  }
  void Error(const std::string& message, const std::string& code = "", const std::string& param = "",
             const std::string& type = "invalid_request_error") {
    Send({{"type", "error"},
          {"error",
           {{"type", type},
            {"message", message},
            {"code", code.empty() ? json(nullptr) : json(code)},
            {"param", param.empty() ? json(nullptr) : json(param)}}}});
  }
  json SessionObject() const {
    return {{"id", id},
            {"object", "realtime.session"},
            {"type", transcription_only ? "transcription" : "realtime"},
            {"model", "lfmvox"},
            {"instructions", instructions},
            {"output_modalities", {"audio"}},
            {"audio",
             {{"input",
               {{"format", {{"type", "audio/pcm"}, {"rate", kRate}}},
                {"turn_detection", turn_detection},
                {"transcription", transcription}}},
              {"output", {{"format", {{"type", "audio/pcm"}, {"rate", kRate}}}}}}}};
  }

  void Handle(const std::string& text);
  bool UpdateTurnDetection(const json& td);
  bool UpdateSemanticVad(const json& td, const std::string& where);
  bool CheckTranscription(const json& t);
  void Append(std::vector<float> pcm);
  void IdleTimeout();
  void EndSpokenTurn(size_t at);
  void DropPendingEnd();
  void CheckTurnEnd();
  static net::awaitable<void> FollowTurnEnd(std::shared_ptr<Session> self, std::shared_ptr<Job> job,
                                            uint64_t generation);
  void Commit(std::vector<float> audio, const std::string& iid);
  void Transcribe(std::vector<float> audio, const std::string& iid);
  // A job of the model's ASR task on 24 kHz mono `audio` (input transcription, semantic_vad's check).
  JobSpec AsrJob(std::vector<float> audio) const {
    JobSpec spec;
    spec.prompt =
        [a = std::make_shared<const std::vector<float>>(std::move(audio))](Conversation& c) -> Status {
      if (Status s = c.StartAsr(); !s.ok()) return s;
      if (Status s = c.AddAudio(*a, kRate); !s.ok()) return s;
      if (Status s = c.EndTurn(); !s.ok()) return s;
      return c.StartTurn("assistant");
    };
    spec.options = GenerateOptions::ForAsr(ctx.scheduler->model());
    if (ctx.options->max_new_tokens > 0)
      spec.options.max_new_tokens = std::min(spec.options.max_new_tokens, ctx.options->max_new_tokens);
    spec.want_pcm = false;
    return spec;
  }
  void Cancel(const char* reason);
  void CreateResponse();
  static net::awaitable<void> Stream(std::shared_ptr<Session> self, std::shared_ptr<Job> job);
  static net::awaitable<void> StreamTranscript(std::shared_ptr<Session> self, std::shared_ptr<Job> job,
                                               std::string iid, double seconds);
};

// Hands each event of `job` to `each` on the connection's executor, in order, until the job has
// finished (its kDone or kError taken).
template <class Each>
net::awaitable<void> FollowJob(net::any_io_executor ex, std::shared_ptr<Job> job, Each each) {
  auto timer = std::make_shared<net::steady_timer>(ex);
  job->SetNotify([timer, ex] { net::post(ex, [timer] { timer->cancel(); }); });
  for (bool finished = false; !finished;) {
    std::vector<Event> events = job->Take(&finished);
    for (Event& e : events) each(e);
    if (!finished && events.empty()) {
      timer->expires_after(std::chrono::seconds(1));
      beast::error_code ec;
      co_await timer->async_wait(net::redirect_error(kAwait, ec));
    }
  }
  job->SetNotify(nullptr);
}

void Session::Handle(const std::string& text) {
  json e = json::parse(text, nullptr, false);
  if (e.is_discarded() || !e.is_object()) return Error("the event is not a JSON object", "invalid_json");
  if (!e.contains("type") || !e["type"].is_string())
    return Error("the event has no string \"type\"", "", "type");
  const std::string type = e["type"];
  const double max_seconds = ctx.options->max_audio_seconds;
  if (type == "session.update") {
    if (!e.contains("session") || !e["session"].is_object()) {
      return Error("session.update needs a \"session\" object", "", "session");
    }
    const json& s = e["session"];
    const json* td = nullptr;
    const json* tr = nullptr;  // the beta name, then the GA one
    if (s.contains("input_audio_transcription")) tr = &s["input_audio_transcription"];
    if (s.contains("audio") && s["audio"].is_object() && s["audio"].contains("input") &&
        s["audio"]["input"].is_object() && s["audio"]["input"].contains("transcription")) {
      tr = &s["audio"]["input"]["transcription"];
    }
    if (s.contains("turn_detection")) td = &s["turn_detection"];
    if (s.contains("audio") && s["audio"].is_object() && s["audio"].contains("input") &&
        s["audio"]["input"].is_object() && s["audio"]["input"].contains("turn_detection")) {
      td = &s["audio"]["input"]["turn_detection"];
    }
    if (s.contains("instructions")) {
      if (!s["instructions"].is_string())
        return Error("instructions must be a string", "", "session.instructions");
      if (state->started)
        return Error("instructions can only change before the first response", "", "session.instructions");
    }
    if (s.contains("type") && s["type"] != "realtime" && s["type"] != "transcription") {
      return Error("session.type must be \"realtime\" or \"transcription\"", "invalid_value", "session.type");
    }
    if (tr && !CheckTranscription(*tr)) return;
    if (td && !UpdateTurnDetection(*td)) return;
    if (s.contains("instructions")) instructions = s["instructions"];
    if (tr) transcription = *tr;
    if (s.contains("type")) transcription_only = s["type"] == "transcription";
    if (transcription_only && transcription.is_null()) {
      transcription = {{"model", ctx.options->model_id.empty() ? "lfmvox" : ctx.options->model_id}};
    }
    Send({{"type", "session.updated"}, {"session", SessionObject()}});
  } else if (type == "input_audio_buffer.append") {
    if (!e.contains("audio") || !e["audio"].is_string())
      return Error("append needs base64 \"audio\"", "", "audio");
    const size_t cap = static_cast<size_t>(max_seconds * kRate);
    auto bytes = Base64Decode(e["audio"].get<std::string>(), 2 * cap + 2);
    if (!bytes.ok()) return Error(bytes.status().message(), "invalid_audio", "audio");
    if (bytes->size() % 2)
      return Error("PCM16 audio must have an even number of bytes", "invalid_audio", "audio");
    if (buffer.size() + bytes->size() / 2 > cap) {
      return Error("the input audio buffer is over the limit of " + std::to_string(max_seconds) + " seconds",
                   "limit_exceeded", "audio");
    }
    std::vector<float> pcm(bytes->size() / 2);
    for (size_t i = 0; i < pcm.size(); ++i) {
      const auto v =
          static_cast<int16_t>(static_cast<uint8_t>((*bytes)[2 * i]) |
                               static_cast<uint16_t>(static_cast<uint8_t>((*bytes)[2 * i + 1]) << 8));
      pcm[i] = static_cast<float>(v) / 32768.0f;
    }
    Append(std::move(pcm));
  } else if (type == "input_audio_buffer.clear") {
    if (end_pending) DropPendingEnd();
    buffer.clear();
    buffer_origin = heard;
    Send({{"type", "input_audio_buffer.cleared"}});
  } else if (type == "input_audio_buffer.commit") {
    if (buffer.empty()) return Error("the input audio buffer is empty", "input_audio_buffer_commit_empty");
    if (end_pending) DropPendingEnd();
    buffer_origin = heard;
    Commit(std::move(buffer), Id("item_"));
    buffer.clear();
  } else if (type == "conversation.item.create") {
    const json* item = e.contains("item") && e["item"].is_object() ? &e["item"] : nullptr;
    std::string t;
    if (item && item->contains("content") && (*item)["content"].is_array()) {
      for (const json& c : (*item)["content"]) {
        if (c.is_object() && c.contains("text") && c["text"].is_string()) t += c["text"].get<std::string>();
      }
    }
    auto is = [&](const char* k, const char* v) { return item->contains(k) && (*item)[k] == v; };
    if (!item || !is("type", "message") || !is("role", "user") || t.empty()) {
      return Error("conversation.item.create takes a user message with input_text content", "", "item");
    }
    if (transcription_only) return Error("a transcription session takes audio only", "", "item");
    size_t waiting = t.size();
    for (const auto& p : pending_text) waiting += p.size();
    if (waiting > ctx.options->max_text_chars) {
      return Error("the unanswered user text is over the limit of " +
                       std::to_string(ctx.options->max_text_chars) +
                       " characters; send response.create first",
                   "limit_exceeded", "item");
    }
    pending_text.push_back(t);
    const std::string iid = Id("item_");
    Send({{"type", "conversation.item.created"},
          {"item",
           {{"id", iid},
            {"object", "realtime.item"},
            {"type", "message"},
            {"role", "user"},
            {"status", "completed"},
            {"content", {{{"type", "input_text"}, {"text", t}}}}}}});
  } else if (type == "response.create") {
    if (job) return Error("a response is already in progress", "conversation_already_has_active_response");
    CreateResponse();
  } else if (type == "response.cancel") {
    if (!job) return Error("there is no response in progress", "response_cancel_not_active");
    Cancel("client_cancelled");
  } else if (type == "conversation.item.truncate") {
    // A cancelled answer (barge-in: the client stops playing and says how much it played) can be cut
    // before its response.done; the history keeps the lesser of that and what was sent.
    if (job && !job->cancelled())
      return Error("truncate the answer after its response.done (or cancel it first)", "", "item_id");
    if (item_id.empty() || !e.contains("item_id") || e["item_id"] != item_id) {
      return Error("only the last assistant item can be truncated", "", "item_id");
    }
    if (!e.contains("audio_end_ms") || !e["audio_end_ms"].is_number_unsigned()) {
      return Error("audio_end_ms must be a non-negative integer", "", "audio_end_ms");
    }
    // Clamped to the speech sent (known at response.done; before it, Stream clamps).
    const size_t ms = std::min<size_t>(e["audio_end_ms"].get<size_t>(), SIZE_MAX / kRate);
    truncate_to = std::min(ms * (kRate / 1000), job ? SIZE_MAX : answer_sent);
    Send({{"type", "conversation.item.truncated"},
          {"item_id", item_id},
          {"content_index", 0},
          {"audio_end_ms", e["audio_end_ms"]}});
  } else {
    Error("unknown event type \"" + type + "\"", "unknown_event", "type");
  }
}

// turn_detection from session.update: null (the client commits) or server_vad. False after an error
// event (nothing changed).
bool Session::UpdateTurnDetection(const json& td) {
  const std::string where = "session.audio.input.turn_detection";
  if (td.is_null()) {
    vad.reset();
    turn_detection = nullptr;
    idle_samples = 0;
    semantic = false;
    DropPendingEnd();
    return true;
  }
  if (!td.is_object() || !td.contains("type") ||
      (td["type"] != "server_vad" && td["type"] != "semantic_vad")) {
    Error("turn_detection must be null, {\"type\": \"server_vad\", ...} or {\"type\": \"semantic_vad\", ...}",
          "unsupported_turn_detection", where + ".type");
    return false;
  }
  if (td["type"] == "semantic_vad") return UpdateSemanticVad(td, where);
  VadOptions o;
  bool create = true, interrupt = true;
  int64_t idle_ms = 0;
  for (const auto& [k, v] : td.items()) {
    const std::string param = where + "." + k;
    if (k == "type" || (k == "idle_timeout_ms" && v.is_null())) continue;
    if (k == "idle_timeout_ms" && v.is_number_integer()) {
      idle_ms = v.get<int64_t>();
      if (idle_ms < 1 || idle_ms > 600000) {
        Error("idle_timeout_ms takes 1..600000 (or null: none)", "invalid_value", param);
        return false;
      }
      continue;
    }
    if (k == "threshold" && v.is_number()) {
      o.threshold = v.get<double>();
    } else if ((k == "prefix_padding_ms" || k == "silence_duration_ms") && v.is_number_integer()) {
      const int64_t ms = v.get<int64_t>();
      const int clamped =
          static_cast<int>(std::clamp<int64_t>(ms, -1, 10001));  // out of range: refused below
      (k == "prefix_padding_ms" ? o.prefix_padding_ms : o.silence_duration_ms) = clamped;
    } else if ((k == "create_response" || k == "interrupt_response") && v.is_boolean()) {
      (k == "create_response" ? create : interrupt) = v.get<bool>();
    } else {
      const bool known = k == "threshold" || k == "prefix_padding_ms" || k == "silence_duration_ms" ||
                         k == "create_response" || k == "interrupt_response" || k == "idle_timeout_ms";
      Error(known ? k + " has the wrong type (threshold: number; *_ms: integer; create_response, "
                        "interrupt_response: boolean)"
                  : "server_vad has no option \"" + k + "\"",
            "invalid_value", param);
      return false;
    }
  }
  std::string bad;
  auto v = ServerVad::Create(o, &bad);
  if (!v.ok()) {
    Error(v.status().message(), bad.empty() ? "server_error" : "invalid_value",
          bad.empty() ? "" : where + "." + bad, bad.empty() ? "server_error" : "invalid_request_error");
    return false;
  }
  vad = std::move(v).value();
  vad_origin = heard;
  prefix_samples = static_cast<size_t>(o.prefix_padding_ms) * (kRate / 1000);
  create_response = create;
  interrupt_response = interrupt;
  idle_samples = static_cast<size_t>(idle_ms) * (kRate / 1000);
  idle_from = job ? SIZE_MAX : heard;
  semantic = false;
  DropPendingEnd();
  turn_detection = {{"type", "server_vad"},
                    {"threshold", o.threshold},
                    {"prefix_padding_ms", o.prefix_padding_ms},
                    {"silence_duration_ms", o.silence_duration_ms},
                    {"create_response", create},
                    {"interrupt_response", interrupt},
                    {"idle_timeout_ms", idle_ms > 0 ? json(idle_ms) : json(nullptr)}};
  return true;
}

// semantic_vad: {eagerness: low | medium | high | auto, create_response, interrupt_response}. The
// detector runs with kSemanticPauseMs of silence for a pause; eagerness is the longest a pause may last
// before it ends the turn regardless (OpenAI's 8, 4 and 2 s; auto = medium).
constexpr int kSemanticPauseMs = 300;

bool Session::UpdateSemanticVad(const json& td, const std::string& where) {
  std::string eagerness = "auto";
  bool create = true, interrupt = true;
  for (const auto& [k, v] : td.items()) {
    const std::string param = where + "." + k;
    if (k == "type") continue;
    if (k == "eagerness" && v.is_string() && (v == "low" || v == "medium" || v == "high" || v == "auto")) {
      eagerness = v.get<std::string>();
    } else if ((k == "create_response" || k == "interrupt_response") && v.is_boolean()) {
      (k == "create_response" ? create : interrupt) = v.get<bool>();
    } else {
      Error(k == "eagerness" ? std::string("eagerness takes low, medium, high or auto")
            : k == "create_response" || k == "interrupt_response"
                ? k + " must be a boolean"
                : "semantic_vad has no option \"" + k + "\" (eagerness, create_response, interrupt_response)",
            "invalid_value", param);
      return false;
    }
  }
  std::string bad;
  auto v = ServerVad::Create(
      {.threshold = 0.5, .prefix_padding_ms = 300, .silence_duration_ms = kSemanticPauseMs}, &bad);
  if (!v.ok()) {
    Error(v.status().message(), "server_error", "", "server_error");
    return false;
  }
  vad = std::move(v).value();
  vad_origin = heard;
  prefix_samples = 300 * (kRate / 1000);
  create_response = create;
  interrupt_response = interrupt;
  idle_samples = 0;
  idle_from = SIZE_MAX;
  semantic = true;
  const int wait_ms = eagerness == "low" ? 8000 : eagerness == "high" ? 2000 : 4000;
  semantic_wait = static_cast<size_t>(wait_ms - kSemanticPauseMs) * (kRate / 1000);
  DropPendingEnd();
  turn_detection = {{"type", "semantic_vad"},
                    {"eagerness", eagerness},
                    {"create_response", create},
                    {"interrupt_response", interrupt}};
  return true;
}

void Session::DropPendingEnd() {
  end_pending = false;
  ++end_generation;
  if (end_check) end_check->Cancel();
  end_check.reset();
}

// The turn being spoken ends at input sample `at` (its audio_end): speech_stopped, the audio committed
// and, with create_response, answered.
void Session::EndSpokenTurn(size_t at) {
  const size_t n = std::min(at > buffer_origin ? at - buffer_origin : 0, buffer.size());
  Send({{"type", "input_audio_buffer.speech_stopped"},
        {"audio_end_ms", at / (kRate / 1000)},
        {"item_id", speech_item}});
  if (n == 0) return;  // committed or cleared by the client meanwhile
  std::vector<float> turn(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(n));
  buffer.erase(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(n));
  buffer_origin += n;
  Commit(std::move(turn), speech_item);
  if (create_response && !transcription_only) {
    if (job) {
      answer_pending = true;
    } else {
      CreateResponse();
    }
  }
  if (!job) idle_from = heard;  // nothing answers: the idle time counts from here
}

// semantic_vad at a pause: the turn so far through the model's ASR task; a finished sentence ends it.
void Session::CheckTurnEnd() {
  const size_t n = std::min(end_at > buffer_origin ? end_at - buffer_origin : 0, buffer.size());
  if (n == 0) return;
  auto j = ctx.scheduler->Submit(AsrJob({buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(n)}));
  if (!j.ok()) return;  // busy: the pause's longest wait still ends the turn
  end_check = *j;
  net::co_spawn(ws.get_executor(), FollowTurnEnd(shared_from_this(), *j, end_generation), net::detached);
}

net::awaitable<void> Session::FollowTurnEnd(std::shared_ptr<Session> self, std::shared_ptr<Job> job,
                                            uint64_t generation) {
  std::string text;
  bool ok = true;
  co_await FollowJob(self->ws.get_executor(), job, [&](Event& e) {
    if (e.kind == Event::kText) text += e.text;
    if (e.kind == Event::kError) ok = false;
  });
  if (self->end_check == job) self->end_check.reset();
  if (!ok || !self->end_pending || self->end_generation != generation || !EndsLikeASentence(text)) co_return;
  self->end_pending = false;
  ++self->end_generation;
  self->EndSpokenTurn(self->end_at);
}

// audio.input.transcription from session.update: null or an object of strings (model, language,
// prompt). The model is this server's whatever the client names (its ASR task), and neither the
// language nor the prompt steers it. False after an error event (nothing changed).
bool Session::CheckTranscription(const json& t) {
  const std::string where = "session.audio.input.transcription";
  if (t.is_null()) return true;
  if (!t.is_object()) {
    Error("transcription must be null or an object such as {\"model\": \"whisper-1\"}", "invalid_value",
          where);
    return false;
  }
  for (const auto& [k, v] : t.items()) {
    if (k != "model" && k != "language" && k != "prompt") {
      Error("transcription has no option \"" + k + "\" (model, language, prompt)", "invalid_value",
            where + "." + k);
      return false;
    }
    if (!v.is_string()) {
      Error(k + " must be a string", "invalid_value", where + "." + k);
      return false;
    }
  }
  return true;
}

// Appended audio goes into the buffer and, with server VAD, through the detector: a speech start
// (barge-in when a response is playing) and a speech stop (the turn committed, and answered).
void Session::Append(std::vector<float> pcm) {
  buffer.insert(buffer.end(), pcm.begin(), pcm.end());
  heard += pcm.size();
  if (!vad) return;
  std::vector<VadTransition> turns;
  if (Status s = vad->Push(pcm, &turns); !s.ok()) {
    vad.reset();
    turn_detection = nullptr;
    return Error(
        "server VAD stopped (" + s.message() + "); commit turns yourself or set turn_detection again",
        "vad_failed", "", "server_error");
  }
  for (const VadTransition& t : turns) {
    const size_t at = std::max(vad_origin + t.sample, buffer_origin);
    const size_t n = std::min(at - buffer_origin, buffer.size());
    if (t.kind == VadTransition::kSpeechStarted && semantic && end_pending) {
      DropPendingEnd();  // the pause was not the end: the same turn goes on
      continue;
    }
    if (t.kind == VadTransition::kSpeechStarted) {
      idle_from = SIZE_MAX;
      buffer.erase(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(n));
      buffer_origin += n;
      speech_item = Id("item_");
      Send({{"type", "input_audio_buffer.speech_started"},
            {"audio_start_ms", buffer_origin / (kRate / 1000)},
            {"item_id", speech_item}});
      ctx.metrics->CountVadTurn();
      if (interrupt_response && job && !job->cancelled()) {
        ctx.metrics->CountBargeIn();
        Cancel("turn_detected");
      }
    } else if (semantic) {
      DropPendingEnd();
      end_pending = true;
      end_at = at;
      CheckTurnEnd();
    } else {
      EndSpokenTurn(at);
    }
  }
  if (semantic && end_pending && heard >= end_at + semantic_wait) {  // the pause's longest wait
    DropPendingEnd();
    EndSpokenTurn(end_at);
  }
  if (idle_samples != 0 && idle_from != SIZE_MAX && !job && !vad->speaking() &&
      heard >= idle_from + idle_samples)
    IdleTimeout();
  if (!vad->speaking() && !end_pending) {
    // Between turns only the audio a coming speech start can reach back to is kept.
    const size_t next = vad_origin + vad->frames() * ServerVad::kFrame;
    const size_t keep_from = std::max(buffer_origin, next > prefix_samples ? next - prefix_samples : 0);
    const size_t drop = std::min(keep_from - buffer_origin, buffer.size());
    buffer.erase(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(drop));
    buffer_origin += drop;
  }
}

// idle_timeout_ms ran out: the audio held since the last turn (silence, by the detector) is committed
// as a user turn and, with create_response, answered.
void Session::IdleTimeout() {
  const std::string iid = Id("item_");
  Send({{"type", "input_audio_buffer.timeout_triggered"},
        {"audio_start_ms", idle_from / (kRate / 1000)},
        {"audio_end_ms", heard / (kRate / 1000)},
        {"item_id", iid}});
  idle_from = SIZE_MAX;  // until the answer has played
  std::vector<float> turn = std::move(buffer);
  buffer.clear();
  buffer_origin = heard;
  // With no prefix padding nothing was kept: one 80 ms frame of the silence stands for it.
  if (turn.empty()) turn.assign(kRate / 1000 * 80, 0.0f);
  Commit(std::move(turn), iid);
  if (create_response && !transcription_only) CreateResponse();
  if (!job) idle_from = heard;
}

// Stops the response in flight; what was not sent yet is dropped (Stream), so the history keeps just
// the audio the client got.
void Session::Cancel(const char* reason) {
  cancel_reason = reason;
  job->Cancel();
}

void Session::Commit(std::vector<float> audio, const std::string& iid) {
  // Unanswered turns wait in memory: together they stay within the clip limit.
  size_t waiting = audio.size();
  for (const auto& a : pending_audio) waiting += a.size();
  if (waiting > static_cast<size_t>(ctx.options->max_audio_seconds * kRate)) {
    return Error("the unanswered user audio is over the limit of " +
                     std::to_string(ctx.options->max_audio_seconds) + " seconds; send response.create first",
                 "limit_exceeded", "");
  }
  if (!transcription_only) pending_audio.push_back(audio);
  Send({{"type", "input_audio_buffer.committed"}, {"previous_item_id", nullptr}, {"item_id", iid}});
  Send({{"type", "conversation.item.created"},
        {"item",
         {{"id", iid},
          {"object", "realtime.item"},
          {"type", "message"},
          {"role", "user"},
          {"status", "completed"},
          {"content", {{{"type", "input_audio"}, {"transcript", nullptr}}}}}}});
  if (!transcription.is_null()) Transcribe(std::move(audio), iid);
}

// The user turn `iid` through the model's ASR task, a job of its own (batched with the response and
// every other session); its text goes out as conversation.item.input_audio_transcription.delta
// events, then .completed with the whole transcript (or .failed).
void Session::Transcribe(std::vector<float> audio, const std::string& iid) {
  const double seconds = static_cast<double>(audio.size()) / kRate;
  auto j = ctx.scheduler->Submit(AsrJob(std::move(audio)));
  if (!j.ok()) {
    Send({{"type", "conversation.item.input_audio_transcription.failed"},
          {"item_id", iid},
          {"content_index", 0},
          {"error",
           {{"type", "server_error"},
            {"code", "server_busy"},
            {"message", j.status().message()},
            {"param", nullptr}}}});
    return;
  }
  transcribing.push_back(*j);
  net::co_spawn(ws.get_executor(), StreamTranscript(shared_from_this(), *j, iid, seconds), net::detached);
}

net::awaitable<void> Session::StreamTranscript(std::shared_ptr<Session> self, std::shared_ptr<Job> job,
                                               std::string iid, double seconds) {
  std::string transcript;
  Status failure;
  co_await FollowJob(self->ws.get_executor(), job, [&](Event& e) {
    if (e.kind == Event::kText) {
      transcript += e.text;
      self->Send({{"type", "conversation.item.input_audio_transcription.delta"},
                  {"item_id", iid},
                  {"content_index", 0},
                  {"delta", e.text}});
    } else if (e.kind == Event::kError) {
      failure = e.error;
    }
  });
  std::erase(self->transcribing, job);
  if (!failure.ok()) {
    self->Send({{"type", "conversation.item.input_audio_transcription.failed"},
                {"item_id", iid},
                {"content_index", 0},
                {"error",
                 {{"type", "server_error"},
                  {"code", "transcription_failed"},
                  {"message", failure.message()},
                  {"param", nullptr}}}});
    co_return;
  }
  self->Send({{"type", "conversation.item.input_audio_transcription.completed"},
              {"item_id", iid},
              {"content_index", 0},
              {"transcript", transcript},
              {"usage", {{"type", "duration"}, {"seconds", seconds}}}});
}

void Session::CreateResponse() {
  if (transcription_only) {
    return Error("a transcription session only transcribes; set session.type to \"realtime\" for answers", "",
                 "session.type");
  }
  if (pending_audio.empty() && pending_text.empty()) {
    return Error("nothing to answer: commit audio or create a user item first", "", "");
  }
  const AudioModel& model = ctx.scheduler->model();
  JobSpec spec;
  spec.options = GenerateOptions::ForSpeechToSpeech(model);
  if (ctx.options->max_new_tokens > 0) spec.options.max_new_tokens = ctx.options->max_new_tokens;
  spec.conversation = conv;
  spec.prompt = [st = state, audio = std::move(pending_audio), text = std::move(pending_text),
                 instr = instructions, keep = truncate_to](Conversation& c) -> Status {
    if (!st->started) {
      if (Status s = c.StartChat(instr); !s.ok()) return s;
      st->started = true;
    }
    if (st->open_turn) {
      if (keep != SIZE_MAX) {
        if (Status s = c.TruncateSpeech(keep); !s.ok()) return s;
      }
      if (Status s = c.EndTurn(); !s.ok()) return s;
      st->open_turn = false;
    }
    for (const auto& t : text) {
      for (Status s : {c.StartTurn("user"), c.AddText(t), c.EndTurn()}) {
        if (!s.ok()) return s;
      }
    }
    for (const auto& a : audio) {
      if (Status s = c.StartTurn("user"); !s.ok()) return s;
      if (Status s = c.AddAudio(a, kRate); !s.ok()) return s;
      if (Status s = c.EndTurn(); !s.ok()) return s;
    }
    Status s = c.StartTurn("assistant");
    if (s.ok()) st->open_turn = true;
    return s;
  };
  pending_audio.clear();
  pending_text.clear();
  truncate_to = SIZE_MAX;
  auto j = ctx.scheduler->Submit(std::move(spec));
  if (!j.ok()) return Error(j.status().message(), "server_busy", "", "server_error");
  job = *j;
  cancel_reason = "client_cancelled";
  response_id = Id("resp_");
  item_id = Id("item_");
  Send({{"type", "response.created"},
        {"response",
         {{"id", response_id},
          {"object", "realtime.response"},
          {"status", "in_progress"},
          {"output", json::array()}}}});
  Send({{"type", "response.output_item.added"},
        {"response_id", response_id},
        {"output_index", 0},
        {"item",
         {{"id", item_id},
          {"object", "realtime.item"},
          {"type", "message"},
          {"role", "assistant"},
          {"status", "in_progress"},
          {"content", json::array()}}}});
  net::co_spawn(ws.get_executor(), Stream(shared_from_this(), job), net::detached);
}

net::awaitable<void> Session::Stream(std::shared_ptr<Session> self, std::shared_ptr<Job> job) {
  const json ids = {{"response_id", self->response_id},
                    {"item_id", self->item_id},
                    {"output_index", 0},
                    {"content_index", 0}};
  std::string transcript;
  size_t sent = 0;
  GenerateSummary summary;
  Status failure;
  co_await FollowJob(self->ws.get_executor(), job, [&](Event& e) {
    json m = ids;
    // After a cancel (response.cancel, barge-in) nothing more goes out, so `sent` is what was heard.
    if (job->cancelled() && (e.kind == Event::kText || e.kind == Event::kPcm)) return;
    if (e.kind == Event::kText) {
      transcript += e.text;
      m["type"] = "response.output_audio_transcript.delta";
      m["delta"] = e.text;
      self->Send(std::move(m));
    } else if (e.kind == Event::kPcm) {
      std::string bytes;
      AppendPcmBytes(e.pcm, PcmFormat::kS16, &bytes);
      if (sent == 0) self->first_audio_heard = self->heard;
      sent += e.pcm.size();
      m["type"] = "response.output_audio.delta";
      m["delta"] = Base64Encode(bytes);
      self->Send(std::move(m));
    } else if (e.kind == Event::kDone) {
      summary = e.summary;
    } else {
      failure = e.error;
    }
  });
  json done = ids;
  done["type"] = "response.output_audio.done";
  self->Send(done);
  done["type"] = "response.output_audio_transcript.done";
  done["transcript"] = transcript;
  self->Send(done);
  // A cancel that came as the answer ended still cancels: its last output was not sent.
  const bool cancelled = summary.cancelled || job->cancelled();
  const std::string status = !failure.ok() ? "failed" : cancelled ? "cancelled" : "completed";
  json resp = {{"id", self->response_id},
               {"object", "realtime.response"},
               {"status", status},
               {"output",
                {{{"id", self->item_id},
                  {"object", "realtime.item"},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"status", status == "completed" ? "completed" : "incomplete"},
                  {"content", {{{"type", "output_audio"}, {"transcript", transcript}}}}}}},
               {"usage", {{"output_tokens", summary.text_tokens + summary.audio_frames}}}};
  if (!failure.ok())
    resp["status_details"] = {{"type", "failed"}, {"error", {{"message", failure.message()}}}};
  if (cancelled) resp["status_details"] = {{"type", "cancelled"}, {"reason", self->cancel_reason}};
  self->Send({{"type", "response.done"}, {"response", resp}});
  // What the listener was sent is what the history keeps (applied before the next turn).
  if (cancelled) self->truncate_to = std::min(self->truncate_to, sent);
  self->answer_sent = sent;
  self->job.reset();
  // The answer plays from its first audio on (the client streams its microphone meanwhile): the idle
  // time counts from when it has played, or from now.
  if (self->vad && !self->vad->speaking()) {
    self->idle_from = sent == 0 ? self->heard : std::max(self->heard, self->first_audio_heard + sent);
  }
  if (self->answer_pending) {
    self->answer_pending = false;
    self->CreateResponse();
  }
}

}  // namespace

net::awaitable<void> ServeRealtime(beast::tcp_stream& stream,
                                   beast::http::request<beast::http::string_body> req, RealtimeContext ctx) {
  auto self = std::make_shared<Session>(stream, ctx);
  struct Count {
    std::atomic<size_t>& n;
    size_t now;
    explicit Count(std::atomic<size_t>& c) : n(c), now(c.fetch_add(1) + 1) {}
    ~Count() { n.fetch_sub(1); }
  } count(*ctx.sessions);
  stream.expires_never();
  self->ws.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
  self->ws.read_message_max(ctx.options->max_body_bytes);
  // A browser that offers subprotocols (the page's `realtime`, with its key) needs one chosen.
  const auto protocols = req.find(beast::http::field::sec_websocket_protocol);
  if (protocols != req.end() &&
      HeaderToken({protocols->value().data(), protocols->value().size()}, "realtime") == std::string_view{}) {
    self->ws.set_option(websocket::stream_base::decorator([](websocket::response_type& res) {
      res.set(beast::http::field::sec_websocket_protocol, "realtime");
    }));
  }
  beast::error_code ec;
  co_await self->ws.async_accept(req, net::redirect_error(kAwait, ec));
  if (ec) co_return;
  if (count.now > ctx.options->max_sessions) {
    self->Error("too many realtime sessions (the limit is " + std::to_string(ctx.options->max_sessions) + ")",
                "session_limit", "", "server_error");
  } else {
    auto c =
        Conversation::Create(ctx.scheduler->model_ptr(),
                             {.context = ctx.options->context, .seed = 0, .engine = ctx.scheduler->engine()});
    if (!c.ok()) {
      self->Error(c.status().message(), "", "", "server_error");
    } else {
      self->conv = std::move(c).value();
      self->Send({{"type", "session.created"}, {"session", self->SessionObject()}});
      for (;;) {
        beast::flat_buffer buf;
        co_await self->ws.async_read(buf, net::redirect_error(kAwait, ec));
        if (ec == websocket::error::message_too_big) {
          self->Error(
              "the message is over the limit of " + std::to_string(ctx.options->max_body_bytes) + " bytes",
              "limit_exceeded");
          break;
        }
        if (ec) break;
        self->Handle(beast::buffers_to_string(buf.data()));
      }
    }
  }
  self->answer_pending = false;  // no VAD turn is answered after the client left
  if (self->job) self->job->Cancel();
  for (const auto& t : self->transcribing) t->Cancel();
  self->DropPendingEnd();  // a semantic_vad check in flight
  // Let the queued events (the last error) go out, then close.
  for (int i = 0; i < 200 && self->writing; ++i) {
    net::steady_timer t(stream.get_executor(), std::chrono::milliseconds(10));
    co_await t.async_wait(net::redirect_error(kAwait, ec));
  }
  self->closed = true;
  co_await self->ws.async_close(websocket::close_code::normal, net::redirect_error(kAwait, ec));
}

}  // namespace lfmvox::server
