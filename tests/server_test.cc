// `lfmvox serve` (apps/server) driven over loopback by a Boost.Beast client, in process, on an ephemeral
// port. Model: a small random LFM2.5-Audio checkpoint (the generator's demo shape, with the repository's
// tokenizer fixture, tests/data/tokenizer) written into a scratch folder: it speaks noise, which is enough
// to compare bytes. The references are the library's own results for the same request (a Conversation on
// a private engine, same prompt, same options and seed), so speech bytes and transcripts must be equal
// exactly (tolerance zero: the server only batches and re-encodes, and batching is bit-exact,
// tests/engine_test.cc). FLAC is lossless at 16 bits, so it decodes to the PCM's s16 values / 32768
// exactly; MP3 and Opus are lossy, checked by length only.
// clang-format off
#include <utility>  // before Asio: its awaitable.hpp (Boost 1.74) uses std::exchange without including it
// clang-format on

#include "server.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "codec_util.h"
#include "dsp/resample.h"
#include "io/ffmpeg_audio.h"
#include "lfmvox/audio_io.h"
#include "lfmvox/lfmvox.h"
#include "request_parse.h"
#include "tempo.h"
#include "trace_util.h"
#include "vad.h"
#include "web_assets.h"

namespace lfmvox::server {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using json = nlohmann::json;

std::string DataPath(const std::string& rel) { return std::string(LFMVOX_TEST_DATA_DIR) + "/" + rel; }

constexpr int kMaxNew = 40;  // every generation's cap (server and reference), to keep the tests short

// The TTS request every speech test makes: the demo checkpoint is steered to speak it (greedy decoding
// starts with <|audio_start|>), as `lfmvox-make-checkpoint --steer-tts` does for demos.
constexpr char kSpeechText[] = "Hello there.";
constexpr char kSpeechVoice[] = "US female";

// A demo checkpoint, written once per test process by lfmvox-make-checkpoint: steered for speech (the
// speech tests), or as generated (its greedy answers to ASR and chat prompts are text).
std::string DemoDir(bool steered) {
  auto make = [](bool steer) {
    const std::string d = testing::ScratchPath(steer ? "serve_demo_tts" : "serve_demo_text");
    std::string cmd = std::string(LFMVOX_MAKE_CHECKPOINT) + " lfm25-audio --size demo --tokenizer '" +
                      DataPath("tokenizer/tokenizer.json") + "' --out '" + d + "'";
    if (steer) cmd += std::string(" --steer-tts '") + kSpeechText + "' --voice '" + kSpeechVoice + "'";
    EXPECT_EQ(std::system((cmd + " 2>/dev/null").c_str()), 0) << cmd;
    return d;
  };
  static const std::string tts = make(true), text = make(false);
  return steered ? tts : text;
}

std::shared_ptr<const AudioModel> LoadModel(bool steered) {
  auto r = AudioModel::Load(DemoDir(steered));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : nullptr;
}

// The speech model, and the model for transcription and chat.
std::shared_ptr<const AudioModel> Model() {
  static std::shared_ptr<const AudioModel> m = LoadModel(true);
  return m;
}
std::shared_ptr<const AudioModel> TextModel() {
  static std::shared_ptr<const AudioModel> m = LoadModel(false);
  return m;
}

struct Reply {
  int status = 0;
  std::string body;
  std::string content_type;
  json Json() const { return json::parse(body, nullptr, false); }
};

// One request on a fresh connection.
Reply Call(uint16_t port, http::verb method, const std::string& target, const std::string& body = "",
           const std::string& content_type = "application/json", const std::string& api_key = "") {
  net::io_context ioc;
  tcp::socket socket(ioc);
  beast::error_code ec;
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
  EXPECT_FALSE(ec) << ec.message();
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1");
  if (!body.empty() || method == http::verb::post) req.set(http::field::content_type, content_type);
  if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
  req.body() = body;
  req.keep_alive(false);
  req.prepare_payload();
  http::write(socket, req, ec);
  EXPECT_FALSE(ec) << ec.message();
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1u << 30);
  http::read(socket, buf, parser, ec);
  EXPECT_FALSE(ec) << ec.message();
  Reply r;
  r.status = static_cast<int>(parser.get().result_int());
  r.body = parser.get().body();
  r.content_type = std::string(parser.get()[http::field::content_type]);
  return r;
}

Reply Post(uint16_t port, const std::string& target, const json& body, const std::string& key = "") {
  return Call(port, http::verb::post, target, body.dump(), "application/json", key);
}

Reply Get(uint16_t port, const std::string& target, const std::string& key = "") {
  return Call(port, http::verb::get, target, "", "", key);
}

// The `data: {...}` payloads of an SSE body, in order.
std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> out;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
  }
  return out;
}

double MetricValue(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  return -1;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The error object's shape: {"error": {"message", "type", "param", "code"}}.
void ExpectError(const Reply& r, int status, const std::string& type) {
  EXPECT_EQ(r.status, status) << r.body;
  json j = r.Json();
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
  EXPECT_TRUE(j["error"]["message"].is_string() && !j["error"]["message"].get<std::string>().empty());
  EXPECT_EQ(j["error"]["type"], type) << r.body;
  EXPECT_TRUE(j["error"].contains("param") && j["error"].contains("code")) << r.body;
}

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(Model());
    ASSERT_TRUE(TextModel());
    server_ = StartOn(Model());
    text_server_ = StartOn(TextModel());
  }
  static Server* StartOn(std::shared_ptr<const AudioModel> model, int max_new = kMaxNew) {
    ServerOptions o;
    o.model = std::move(model);
    o.model_id = "demo";
    o.port = 0;
    o.threads = 2;
    o.io_threads = 2;
    o.max_new_tokens = max_new;
    o.context = 1024;
    o.max_audio_seconds = 10;
    auto s = Server::Start(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return nullptr;
    EXPECT_TRUE((*s)->WaitReady().ok());
    return std::move(s).value().release();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete text_server_;
    server_ = text_server_ = nullptr;
  }
  static uint16_t port() { return server_->port(); }
  static uint16_t text_port() { return text_server_->port(); }
  static Server* server_;
  static Server* text_server_;
};

Server* ServerTest::server_ = nullptr;
Server* ServerTest::text_server_ = nullptr;

// ---- the library's own answers ----

struct LibOut {
  std::string text;
  std::vector<float> pcm;
  std::vector<WordTiming> words;  // with GenerateOptions::word_timestamps
};

LibOut RunLibrary(std::shared_ptr<const AudioModel> model, const std::function<Status(Conversation&)>& prompt,
                  GenerateOptions o) {
  o.max_new_tokens = std::min(o.max_new_tokens, kMaxNew);
  auto c = Conversation::Create(model, {.threads = 2, .context = 1024, .seed = 0});
  EXPECT_TRUE(c.ok());
  EXPECT_TRUE(prompt(**c).ok());
  LibOut out;
  OutputCallbacks cb;
  cb.on_text = [&](int32_t id, std::string_view piece) {
    if (!model->IsSpecialToken(id)) out.text += piece;
    return Status::Ok();
  };
  cb.on_pcm = [&](std::span<const float> p) {
    out.pcm.insert(out.pcm.end(), p.begin(), p.end());
    return Status::Ok();
  };
  auto r = (*c)->Generate(o, cb);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (r.ok()) out.words = r->words;
  return out;
}

std::string S16(const std::vector<float>& pcm) {
  std::string b;
  AppendPcmBytes(pcm, PcmFormat::kS16, &b);
  return b;
}

// The ASR task around a clip, as the transcription endpoint builds it.
std::function<Status(Conversation&)> AsrPrompt(const std::string& wav_path) {
  return [wav_path](Conversation& c) {
    Status st = c.StartAsr();
    if (st.ok()) st = c.AddAudioFile(wav_path);
    if (st.ok()) st = c.EndTurn();
    if (st.ok()) st = c.StartTurn("assistant");
    return st;
  };
}

LibOut LibrarySpeech(const std::string& voice, const std::string& text) {
  GenerateOptions o = GenerateOptions::ForTts(*Model());
  o.audio.temperature = 0;
  return RunLibrary(
      Model(), [&](Conversation& c) { return c.StartSpeech(voice, text); }, o);
}

// ---- probes, models, metrics ----

TEST_F(ServerTest, ProbesModelsAndMetrics) {
  for (const char* p : {"/livez", "/readyz", "/health"}) {
    Reply r = Get(port(), p);
    EXPECT_EQ(r.status, 200) << p;
    EXPECT_EQ(r.Json()["status"], "ok") << p;
  }
  Reply m = Get(port(), "/v1/models");
  ASSERT_EQ(m.status, 200);
  json j = m.Json();
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "demo");
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(j["data"][0]["voices"].get<std::vector<std::string>>(), Model()->voices());

  ExpectError(Get(port(), "/nope"), 404, "not_found_error");
  ExpectError(Get(port(), "/v1/audio/speech"), 405, "invalid_request_error");

  Reply metrics = Get(port(), "/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_EQ(MetricValue(metrics.body, "lfmvox_active_sessions"), 0);
  EXPECT_EQ(MetricValue(metrics.body, "lfmvox_queue_depth"), 0);
  // The four probe and model calls above were counted with their status.
  EXPECT_GE(MetricValue(metrics.body, "lfmvox_http_requests_total{endpoint=\"/livez\",status=\"200\"}"), 1);
  EXPECT_GE(MetricValue(metrics.body, "lfmvox_http_requests_total{endpoint=\"/v1/models\",status=\"200\"}"),
            1);
  EXPECT_GE(MetricValue(metrics.body, "lfmvox_http_requests_total{endpoint=\"other\",status=\"404\"}"), 1);
  EXPECT_NE(metrics.body.find("# TYPE lfmvox_time_to_first_audio_seconds histogram"), std::string::npos);
  EXPECT_NE(metrics.body.find("# TYPE lfmvox_real_time_factor histogram"), std::string::npos);
}

// ---- POST /v1/audio/speech ----

TEST_F(ServerTest, SpeechPcmEqualsTheLibraryBitForBit) {
  const std::string text = kSpeechText;
  const LibOut lib = LibrarySpeech(kSpeechVoice, text);
  ASSERT_GT(lib.pcm.size(), 0u) << "the greedy TTS prompt speaks within the cap";
  const std::string want = S16(lib.pcm);
  // The s16 rule itself, independently: round(x * 32767) after clamping.
  const int16_t first =
      static_cast<int16_t>(static_cast<uint8_t>(want[0]) | static_cast<uint8_t>(want[1]) << 8);
  EXPECT_EQ(first, static_cast<int16_t>(std::lround(std::clamp(lib.pcm[0], -1.0f, 1.0f) * 32767.0f)));

  json req = {{"model", "demo"},          {"input", text},    {"voice", "US female"},
              {"response_format", "pcm"}, {"temperature", 0}, {"seed", 0}};
  Reply r = Post(port(), "/v1/audio/speech", req);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "audio/pcm");
  EXPECT_EQ(r.body.size(), lib.pcm.size() * 2);
  EXPECT_TRUE(r.body == want) << "speech bytes differ from the library's PCM";

  // An OpenAI voice maps onto the model's: "alloy" is the US female voice.
  req["voice"] = "alloy";
  EXPECT_TRUE(Post(port(), "/v1/audio/speech", req).body == want);

  // wav: a streaming header (44 bytes), then the same samples.
  req["response_format"] = "wav";
  Reply wav = Post(port(), "/v1/audio/speech", req);
  ASSERT_EQ(wav.status, 200);
  ASSERT_EQ(wav.body.size(), 44 + want.size());
  EXPECT_EQ(wav.body.substr(0, 4), "RIFF");
  EXPECT_EQ(wav.body.substr(8, 8), "WAVEfmt ");
  EXPECT_TRUE(wav.body.substr(44) == want);

  // sse: the deltas decode to the same bytes; the last event is speech.audio.done.
  req["response_format"] = "pcm";
  req["stream_format"] = "sse";
  Reply sse = Post(port(), "/v1/audio/speech", req);
  ASSERT_EQ(sse.status, 200);
  EXPECT_EQ(sse.content_type, "text/event-stream");
  std::vector<std::string> events = SseData(sse.body);
  ASSERT_GE(events.size(), 2u);
  std::string joined;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    json e = json::parse(events[i]);
    ASSERT_EQ(e["type"], "speech.audio.delta");
    auto bytes = Base64Decode(e["audio"].get<std::string>(), 1u << 30);
    ASSERT_TRUE(bytes.ok());
    joined += *bytes;
  }
  EXPECT_TRUE(joined == want);
  json done = json::parse(events.back());
  EXPECT_EQ(done["type"], "speech.audio.done");
  EXPECT_GT(done["usage"]["output_tokens"].get<int>(), 0);
}

// SNR in dB of y against x with y delayed by `lag` samples (y[i + lag] ~ x[i]), over the overlap.
double SnrDb(const std::vector<float>& x, const std::vector<float>& y, int lag) {
  double sig = 0, err = 0;
  for (size_t i = 0; i < x.size() && i + lag < y.size(); ++i) {
    sig += double(x[i]) * x[i];
    err += (double(y[i + lag]) - x[i]) * (double(y[i + lag]) - x[i]);
  }
  return 10 * std::log10(sig / std::max(err, 1e-30));
}
// AAC-LC at 96 kb/s on the demo model's speech measured 18.5 dB (Debian 12's FFmpeg 5.1); the bound
// sits 6.5 dB under it and above what a decoding mistake gives: a sample scale off by 2x (or 1/2) caps
// the SNR at 6 dB (0 dB for x2), a lost frame of 1024 samples or a misaligned trim ~0 dB.
constexpr double kAacSnrDb = 12.0;

// `speed` (TempoStretcher, SoundTouch's WSOLA): a 440 Hz tone keeps its pitch and its length scales by
// 1/speed. Pitch from positive-going zero crossings over the middle 80 % (WSOLA splices whole periods, so
// a splice adds no crossing; 2 % is 9 Hz, far below the 2x an octave error or a resampling would give).
// Length: SoundTouch 2.x's flush trims to the expected count, n / speed rounded (bound: 1 sample).
// Chunking: the output does not depend on how the input is split (the server pushes one frame at a time).
std::vector<float> FromS16(const std::string& b);  // below, with the realtime helpers

std::vector<float> Stretch(const std::vector<float>& in, double speed, size_t chunk) {
  auto t = TempoStretcher::Create(24000, speed);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  std::vector<float> out;
  for (size_t i = 0; i < in.size(); i += chunk) {
    const size_t n = std::min(chunk, in.size() - i);
    EXPECT_TRUE((*t)->Push({in.data() + i, n}, &out).ok());
  }
  EXPECT_TRUE((*t)->Finish(&out).ok());
  return out;
}

TEST(ServerTempo, ToneKeepsItsPitchAndScalesItsLength) {
  std::vector<float> tone(48000);
  for (size_t i = 0; i < tone.size(); ++i)
    tone[i] = 0.5f * static_cast<float>(std::sin(2 * M_PI * 440 * i / 24000.0));
  for (double speed : {0.5, 1.25, 2.0, 4.0}) {
    const std::vector<float> out = Stretch(tone, speed, 1920);
    const double want = tone.size() / speed;
    EXPECT_NEAR(static_cast<double>(out.size()), want, 1) << "speed " << speed;
    const size_t a = out.size() / 10, b = out.size() - out.size() / 10;
    int crossings = 0;
    for (size_t i = a + 1; i < b; ++i) crossings += out[i - 1] < 0 && out[i] >= 0;
    const double hz = crossings * 24000.0 / static_cast<double>(b - a);
    EXPECT_NEAR(hz, 440, 0.02 * 440) << "speed " << speed;
    std::printf("speed %.2f: %zu samples (want %.0f), %.1f Hz\n", speed, out.size(), want, hz);
    EXPECT_TRUE(Stretch(tone, speed, 7) == out) << "chunks of 7 differ from frames, speed " << speed;
    EXPECT_TRUE(Stretch(tone, speed, tone.size()) == out) << "one push differs from frames, speed " << speed;
  }
  EXPECT_FALSE(TempoStretcher::Create(24000, 0.2).ok());
  EXPECT_FALSE(TempoStretcher::Create(24000, 4.5).ok());
}

// Through the server: speed 2 is the library's speech stretched (bit for bit, any chunking), in a
// streamed format (pcm) and an encoded one (flac, lossless: the same s16 samples).
TEST_F(ServerTest, SpeechSpeedIsTheLibrarySpeechStretched) {
  const LibOut lib = LibrarySpeech(kSpeechVoice, kSpeechText);
  ASSERT_GT(lib.pcm.size(), 0u);
  const std::vector<float> want = Stretch(lib.pcm, 2.0, 1920);
  EXPECT_NEAR(static_cast<double>(want.size()), lib.pcm.size() / 2.0, 1);
  json req = {{"input", kSpeechText},     {"voice", kSpeechVoice}, {"temperature", 0}, {"seed", 0},
              {"response_format", "pcm"}, {"speed", 2.0}};
  Reply r = Post(port(), "/v1/audio/speech", req);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body.size(), want.size() * 2);
  EXPECT_TRUE(r.body == S16(want)) << "speed 2 differs from the library's speech stretched";
  req["response_format"] = "flac";
  Reply flac = Post(port(), "/v1/audio/speech", req);
  ASSERT_EQ(flac.status, 200) << flac.body;
  auto d = DecodeAudio(flac.body, 600);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->samples == FromS16(S16(want))) << "flac at speed 2 differs from the pcm";
}

TEST_F(ServerTest, SpeechEncodedFormats) {
  const LibOut lib = LibrarySpeech(kSpeechVoice, kSpeechText);
  ASSERT_GT(lib.pcm.size(), 0u);
  const std::string s16 = S16(lib.pcm);
  json req = {{"input", kSpeechText}, {"voice", kSpeechVoice}, {"temperature", 0}};
  // flac is lossless at 16 bits: it decodes to exactly the s16 samples / 32768.
  req["response_format"] = "flac";
  Reply flac = Post(port(), "/v1/audio/speech", req);
  ASSERT_EQ(flac.status, 200) << flac.body;
  EXPECT_EQ(flac.body.substr(0, 4), "fLaC");
  auto decoded = DecodeAudio(flac.body, 600);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->sample_rate, Model()->sample_rate());
  ASSERT_EQ(decoded->samples.size(), lib.pcm.size());
  size_t mismatched = 0;
  for (size_t i = 0; i < lib.pcm.size(); ++i) {
    const int16_t v =
        static_cast<int16_t>(static_cast<uint8_t>(s16[2 * i]) | static_cast<uint8_t>(s16[2 * i + 1]) << 8);
    mismatched += decoded->samples[i] != static_cast<float>(v) / 32768.0f;
  }
  EXPECT_EQ(mismatched, 0u);
  // mp3 and opus are lossy and pad: each decodes, at the model's length within 0.1 s (codec padding).
  const double seconds = static_cast<double>(lib.pcm.size()) / Model()->sample_rate();
  for (const char* f : {"mp3", "opus"}) {
    req["response_format"] = f;
    Reply r = Post(port(), "/v1/audio/speech", req);
    ASSERT_EQ(r.status, 200) << f << ": " << r.body;
    auto d = DecodeAudio(r.body, 600);
    ASSERT_TRUE(d.ok()) << f << ": " << d.status().ToString();
    EXPECT_NEAR(d->seconds(), seconds, 0.1) << f;
  }
  // aac is an ADTS stream from FFmpeg's AAC-LC encoder, read back through FFmpeg. ADTS keeps the
  // encoder's 1024 samples of priming, so the decoded audio is the speech delayed by exactly 1024
  // samples (the best lag within 2048), and the waveform SNR there is bounded below (see kAacSnrDb).
  req["response_format"] = "aac";
  Reply aac = Post(port(), "/v1/audio/speech", req);
  ASSERT_EQ(aac.status, 200) << aac.body;
  EXPECT_EQ(aac.content_type, "audio/aac");
  ASSERT_GE(aac.body.size(), 2u);
  EXPECT_EQ(static_cast<uint8_t>(aac.body[0]), 0xff);  // the ADTS syncword 0xFFF
  EXPECT_EQ(static_cast<uint8_t>(aac.body[1]) & 0xf0, 0xf0);
  auto a = DecodeAudio(aac.body, 600);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->sample_rate, Model()->sample_rate());
  int best_lag = 0;
  double best_snr = -1e9;
  for (int lag = 0; lag <= 2048; ++lag) {
    const double snr = SnrDb(lib.pcm, a->samples, lag);
    if (snr > best_snr) std::tie(best_snr, best_lag) = std::pair(snr, lag);
  }
  EXPECT_EQ(best_lag, 1024);
  EXPECT_GE(best_snr, kAacSnrDb);
  std::printf("aac: SNR %.1f dB at lag %d\n", best_snr, best_lag);
  req["response_format"] = "pcm";
  req["voice"] = "nobody";
  Reply voice = Post(port(), "/v1/audio/speech", req);
  ExpectError(voice, 400, "invalid_request_error");
  EXPECT_EQ(voice.Json()["error"]["param"], "voice");
  req["voice"] = "US male";
  req["speed"] = 5.0;  // OpenAI's range is [0.25, 4]
  Reply speed = Post(port(), "/v1/audio/speech", req);
  ExpectError(speed, 400, "invalid_request_error");
  EXPECT_EQ(speed.Json()["error"]["param"], "speed");
  req.erase("speed");
  req["input"] = std::string(5000, 'a');
  ExpectError(Post(port(), "/v1/audio/speech", req), 400, "invalid_request_error");
  req.erase("input");
  Reply missing = Post(port(), "/v1/audio/speech", req);
  ExpectError(missing, 400, "invalid_request_error");
  EXPECT_EQ(missing.Json()["error"]["param"], "input");
  ExpectError(Call(port(), http::verb::post, "/v1/audio/speech", "{\"input\": \"x\""), 400,
              "invalid_request_error");
  ExpectError(Call(port(), http::verb::post, "/v1/audio/speech", "[1, 2]"), 400, "invalid_request_error");
  ExpectError(Call(port(), http::verb::post, "/v1/audio/speech", "{\"input\": 5}"), 400,
              "invalid_request_error");
}

// ---- POST /v1/audio/transcriptions ----

std::string Multipart(const std::string& boundary,
                      const std::vector<std::pair<std::string, std::string>>& fields,
                      const std::string& file) {
  std::string b;
  for (const auto& [k, v] : fields) {
    b += "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + k + "\"\r\n\r\n" + v + "\r\n";
  }
  if (!file.empty()) {
    b += "--" + boundary +
         "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"q.wav\"\r\nContent-Type: "
         "audio/wav\r\n\r\n" +
         file + "\r\n";
  }
  b += "--" + boundary + "--\r\n";
  return b;
}

Reply Transcribe(uint16_t port, const std::vector<std::pair<std::string, std::string>>& fields,
                 const std::string& file) {
  const std::string boundary = "----lfmvoxTestBoundary7MA4YWxk";
  return Call(port, http::verb::post, "/v1/audio/transcriptions", Multipart(boundary, fields, file),
              "multipart/form-data; boundary=" + boundary);
}

// Uploads in the formats only FFmpeg reads (M4A/AAC and WebM/Opus, made here from inputs/question.wav
// by FFmpeg's encoders) go through the same decoder as files: the server's transcript equals the
// library's for the same decoded samples, and the duration is the decoded length.
TEST_F(ServerTest, TranscriptionOfM4aAndWebmUploads) {
  auto wav = DecodeAudio(ReadFile(DataPath("inputs/question.wav")), 600);
  ASSERT_TRUE(wav.ok());
  ASSERT_EQ(wav->channels, 1);
  for (FfmpegFormat f : {FfmpegFormat::kM4aAac, FfmpegFormat::kWebmOpus}) {
    auto bytes = EncodeFfmpegMemory(wav->samples, wav->sample_rate, f);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    auto clip = DecodeAudio(*bytes, 600);
    ASSERT_TRUE(clip.ok()) << clip.status().ToString();
    const LibOut lib = RunLibrary(
        TextModel(),
        [&](Conversation& c) {
          Status st = c.StartAsr();
          if (st.ok()) st = c.AddAudio(clip->samples, clip->sample_rate, clip->channels);
          if (st.ok()) st = c.EndTurn();
          if (st.ok()) st = c.StartTurn("assistant");
          return st;
        },
        GenerateOptions::ForAsr(*TextModel()));
    Reply j = Transcribe(text_port(), {{"model", "whisper-1"}}, *bytes);
    ASSERT_EQ(j.status, 200) << j.body;
    EXPECT_EQ(j.Json()["text"], lib.text);
    EXPECT_DOUBLE_EQ(j.Json()["usage"]["seconds"].get<double>(), clip->seconds());
    // A cut upload is a 400 that says so, never a 5xx.
    ExpectError(Transcribe(text_port(), {}, bytes->substr(0, bytes->size() / 2)), 400,
                "invalid_request_error");
  }
}

TEST_F(ServerTest, TranscriptionEqualsTheLibrary) {
  const std::string wav_path = DataPath("inputs/question.wav");
  const std::string wav = ReadFile(wav_path);
  ASSERT_FALSE(wav.empty());
  const auto asr_prompt = AsrPrompt(wav_path);
  const LibOut lib = RunLibrary(TextModel(), asr_prompt, GenerateOptions::ForAsr(*TextModel()));
  ASSERT_FALSE(lib.text.empty());
  auto clip = DecodeAudio(wav, 600);
  ASSERT_TRUE(clip.ok());

  Reply j = Transcribe(text_port(), {{"model", "whisper-1"}}, wav);
  ASSERT_EQ(j.status, 200) << j.body;
  EXPECT_EQ(j.Json()["text"], lib.text);
  EXPECT_EQ(j.Json()["usage"]["type"], "duration");
  EXPECT_DOUBLE_EQ(j.Json()["usage"]["seconds"].get<double>(), clip->seconds());

  Reply t = Transcribe(text_port(), {{"response_format", "text"}}, wav);
  EXPECT_EQ(t.body, lib.text + "\n");
  Reply srt = Transcribe(text_port(), {{"response_format", "srt"}}, wav);
  EXPECT_EQ(srt.body.rfind("1\n00:00:00,000 --> 00:00:", 0), 0u) << srt.body;
  EXPECT_NE(srt.body.find("\n" + lib.text + "\n"), std::string::npos);
  Reply vtt = Transcribe(text_port(), {{"response_format", "vtt"}}, wav);
  EXPECT_EQ(vtt.body.rfind("WEBVTT\n\n00:00:00.000 --> 00:00:", 0), 0u) << vtt.body;
  Reply verbose = Transcribe(
      text_port(), {{"response_format", "verbose_json"}, {"timestamp_granularities[]", "segment"}}, wav);
  ASSERT_EQ(verbose.status, 200) << verbose.body;
  json v = verbose.Json();
  EXPECT_EQ(v["task"], "transcribe");
  EXPECT_EQ(v["text"], lib.text) << verbose.body;
  ASSERT_EQ(v["segments"].size(), 1u);
  EXPECT_EQ(v["segments"][0]["text"], lib.text);
  EXPECT_DOUBLE_EQ(v["segments"][0]["end"].get<double>(), clip->seconds());
  EXPECT_FALSE(v.contains("words"));

  // timestamp_granularities[] word: verbose_json's "words" are the library's (word_timestamps), clamped
  // to the clip's length; `temperature` samples as the library does with the same seed (0). (The demo
  // model repeats the prompt's last token, a newline, so its transcript has no words: the words' content
  // is checked on the oracle model in transcribe_test.)
  GenerateOptions timed = GenerateOptions::ForAsr(*TextModel());
  timed.word_timestamps = true;
  timed.text.temperature = 1;
  const LibOut lib_words = RunLibrary(TextModel(), asr_prompt, timed);
  Reply wv = Transcribe(text_port(),
                        {{"response_format", "verbose_json"},
                         {"temperature", "1"},
                         {"timestamp_granularities[]", "word"},
                         {"timestamp_granularities[]", "segment"}},
                        wav);
  ASSERT_EQ(wv.status, 200) << wv.body;
  json w = wv.Json();
  EXPECT_EQ(w["text"], lib_words.text);
  ASSERT_TRUE(w.contains("words") && w["words"].is_array()) << wv.body;
  ASSERT_EQ(w["words"].size(), lib_words.words.size()) << wv.body;
  for (size_t i = 0; i < lib_words.words.size(); ++i) {
    const WordTiming& want = lib_words.words[i];
    EXPECT_EQ(w["words"][i]["word"], want.text);
    EXPECT_DOUBLE_EQ(w["words"][i]["start"].get<double>(), std::min(want.start, clip->seconds()));
    EXPECT_DOUBLE_EQ(w["words"][i]["end"].get<double>(), std::min(want.end, clip->seconds()));
  }

  // stream=true: the deltas concatenate to the text, and transcript.text.done carries it whole.
  Reply sse = Transcribe(text_port(), {{"stream", "true"}}, wav);
  ASSERT_EQ(sse.status, 200);
  std::vector<std::string> events = SseData(sse.body);
  ASSERT_GE(events.size(), 2u);
  std::string joined;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    json e = json::parse(events[i]);
    ASSERT_EQ(e["type"], "transcript.text.delta");
    joined += e["delta"].get<std::string>();
  }
  EXPECT_EQ(joined, lib.text);
  json done = json::parse(events.back());
  EXPECT_EQ(done["type"], "transcript.text.done");
  EXPECT_EQ(done["text"], lib.text);

  // Bad uploads: 400 each, never a 5xx.
  ExpectError(Transcribe(text_port(), {{"model", "m"}}, ""), 400, "invalid_request_error");    // no file
  ExpectError(Transcribe(text_port(), {}, "not audio at all"), 400, "invalid_request_error");  // not audio
  ExpectError(Transcribe(text_port(), {{"response_format", "xml"}}, wav), 400, "invalid_request_error");
  ExpectError(Transcribe(text_port(), {{"temperature", "1.5"}}, wav), 400, "invalid_request_error");
  ExpectError(Transcribe(text_port(), {{"temperature", "hot"}}, wav), 400, "invalid_request_error");
  // word needs verbose_json.
  ExpectError(Transcribe(text_port(), {{"timestamp_granularities[]", "word"}}, wav), 400,
              "invalid_request_error");
  const std::string cut = Multipart("BBB", {}, wav).substr(0, 300);  // no closing boundary
  ExpectError(Call(text_port(), http::verb::post, "/v1/audio/transcriptions", cut,
                   "multipart/form-data; boundary=BBB"),
              400, "invalid_request_error");
  ExpectError(Call(text_port(), http::verb::post, "/v1/audio/transcriptions", "x", "multipart/form-data"),
              400, "invalid_request_error");
  ExpectError(Call(text_port(), http::verb::post, "/v1/audio/transcriptions", "x", "application/json"), 400,
              "invalid_request_error");
  // Over the clip limit (10 s here): a 400 naming the limit.
  std::vector<float> long_clip(16000 * 11, 0.0f);
  auto long_wav = EncodeAudio(long_clip, 16000, AudioFileFormat::kWav);
  ASSERT_TRUE(long_wav.ok());
  Reply too_long = Transcribe(text_port(), {}, *long_wav);
  ExpectError(too_long, 400, "invalid_request_error");
  EXPECT_EQ(too_long.Json()["error"]["code"], "limit_exceeded");
}

// ---- POST /v1/chat/completions ----

TEST_F(ServerTest, ChatStreamEqualsNonStream) {
  // Text only: the deltas' content concatenates to the non-stream message.
  json req = {{"model", "demo"},
              {"messages",
               {{{"role", "system"}, {"content", "You are terse."}}, {{"role", "user"}, {"content", "Hi"}}}}};
  Reply whole = Post(text_port(), "/v1/chat/completions", req);
  ASSERT_EQ(whole.status, 200) << whole.body;
  json w = whole.Json();
  EXPECT_EQ(w["object"], "chat.completion");
  ASSERT_TRUE(w["choices"][0]["message"]["content"].is_string());
  const std::string answer = w["choices"][0]["message"]["content"];
  EXPECT_FALSE(answer.empty());
  req["stream"] = true;
  Reply streamed = Post(text_port(), "/v1/chat/completions", req);
  ASSERT_EQ(streamed.status, 200);
  std::vector<std::string> events = SseData(streamed.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string joined;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    json c = json::parse(events[i]);
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    const json& delta = c["choices"][0]["delta"];
    if (delta.contains("content")) joined += delta["content"].get<std::string>();
  }
  EXPECT_EQ(joined, answer);

  // Speech in and out: a user turn with input_audio; greedy audio so both runs take the same path.
  const std::string wav = ReadFile(DataPath("inputs/question.wav"));
  json audio_req = {
      {"modalities", {"text", "audio"}},
      {"audio", {{"voice", "alloy"}, {"format", "pcm16"}}},
      {"temperature", 0},
      {"messages",
       {{{"role", "user"},
         {"content",
          {{{"type", "input_audio"}, {"input_audio", {{"data", Base64Encode(wav)}, {"format", "wav"}}}}}}}}}};
  Reply a = Post(text_port(), "/v1/chat/completions", audio_req);
  ASSERT_EQ(a.status, 200) << a.body;
  json am = a.Json()["choices"][0]["message"];
  EXPECT_TRUE(am["content"].is_null());
  auto pcm = Base64Decode(am["audio"]["data"].get<std::string>(), 1u << 30);
  ASSERT_TRUE(pcm.ok());
  const std::string transcript = am["audio"]["transcript"];
  EXPECT_GT(pcm->size() + transcript.size(), 0u);
  EXPECT_EQ(pcm->size() % 2, 0u);

  audio_req["stream"] = true;
  Reply as = Post(text_port(), "/v1/chat/completions", audio_req);
  ASSERT_EQ(as.status, 200);
  std::string s_pcm, s_text;
  for (const std::string& e : SseData(as.body)) {
    if (e == "[DONE]") continue;
    json c = json::parse(e);
    const json& delta = c["choices"][0]["delta"];
    if (!delta.contains("audio")) continue;
    if (delta["audio"].contains("data")) {
      auto b = Base64Decode(delta["audio"]["data"].get<std::string>(), 1u << 30);
      ASSERT_TRUE(b.ok());
      s_pcm += *b;
    }
    if (delta["audio"].contains("transcript")) s_text += delta["audio"]["transcript"].get<std::string>();
  }
  EXPECT_EQ(s_text, transcript);
  EXPECT_TRUE(s_pcm == *pcm) << "streamed audio differs from the non-stream audio";

  // Bad requests: 400.
  ExpectError(Post(text_port(), "/v1/chat/completions", json{{"model", "m"}}), 400, "invalid_request_error");
  ExpectError(
      Post(text_port(), "/v1/chat/completions", json{{"messages", {{{"role", "robot"}, {"content", "x"}}}}}),
      400, "invalid_request_error");
  json no_audio = {{"modalities", {"text", "audio"}}, {"messages", {{{"role", "user"}, {"content", "x"}}}}};
  ExpectError(Post(text_port(), "/v1/chat/completions", no_audio), 400, "invalid_request_error");
  json bad_b64 = audio_req;
  bad_b64["messages"][0]["content"][0]["input_audio"]["data"] = "@@@";
  ExpectError(Post(text_port(), "/v1/chat/completions", bad_b64), 400, "invalid_request_error");
  ExpectError(Call(text_port(), http::verb::post, "/v1/chat/completions", "{nope"), 400,
              "invalid_request_error");
}

// An assistant message {"audio": {"id"}} replays that earlier answer's own tokens and codes: the second
// answer of a two-request spoken chat equals the library's second turn of one conversation (greedy, the
// server's 40-item cap), PCM bit for bit and transcript. An unknown id is a 400 naming it.
TEST_F(ServerTest, ChatAudioIdKeepsTheExactHistory) {
  const std::string wav = ReadFile(DataPath("inputs/question.wav"));
  const json user_audio = {
      {"role", "user"},
      {"content",
       {{{"type", "input_audio"}, {"input_audio", {{"data", Base64Encode(wav)}, {"format", "wav"}}}}}}};
  json req = {{"modalities", {"text", "audio"}},
              {"audio", {{"voice", "alloy"}, {"format", "pcm16"}}},
              {"temperature", 0},
              {"messages", {user_audio}}};
  Reply first = Post(text_port(), "/v1/chat/completions", req);
  ASSERT_EQ(first.status, 200) << first.body;
  const json m1 = first.Json()["choices"][0]["message"];
  const std::string audio_id = m1["audio"]["id"];
  req["messages"] = {user_audio,
                     {{"role", "assistant"}, {"audio", {{"id", audio_id}}}},
                     {{"role", "user"}, {"content", "And then?"}}};
  Reply second = Post(text_port(), "/v1/chat/completions", req);
  ASSERT_EQ(second.status, 200) << second.body;
  const json m2 = second.Json()["choices"][0]["message"];
  auto pcm2 = Base64Decode(m2["audio"]["data"].get<std::string>(), 1u << 30);
  ASSERT_TRUE(pcm2.ok());

  // The library: one conversation, two turns.
  auto clip = DecodeAudio(wav, 600);
  ASSERT_TRUE(clip.ok());
  auto c = Conversation::Create(TextModel(), {.threads = 2, .context = 1024, .seed = 0});
  ASSERT_TRUE(c.ok());
  GenerateOptions o = GenerateOptions::ForSpeechToSpeech(*TextModel());
  o.audio.temperature = 0;
  o.max_new_tokens = kMaxNew;
  std::string text[2];
  std::vector<float> pcm[2];
  for (int turn = 0; turn < 2; ++turn) {
    if (turn == 0) {
      ASSERT_TRUE((*c)->StartChat().ok());
      ASSERT_TRUE((*c)->StartTurn("user").ok());
      ASSERT_TRUE((*c)->AddAudio(clip->samples, clip->sample_rate, clip->channels).ok());
    } else {
      ASSERT_TRUE((*c)->EndTurn().ok());  // the assistant's
      ASSERT_TRUE((*c)->StartTurn("user").ok());
      ASSERT_TRUE((*c)->AddText("And then?").ok());
    }
    ASSERT_TRUE((*c)->EndTurn().ok());
    ASSERT_TRUE((*c)->StartTurn("assistant").ok());
    OutputCallbacks cb;
    cb.on_text = [&](int32_t id, std::string_view piece) {
      if (!TextModel()->IsSpecialToken(id)) text[turn] += piece;
      return Status::Ok();
    };
    cb.on_pcm = [&](std::span<const float> p) {
      pcm[turn].insert(pcm[turn].end(), p.begin(), p.end());
      return Status::Ok();
    };
    ASSERT_TRUE((*c)->Generate(o, cb).ok());
  }
  EXPECT_EQ(m1["audio"]["transcript"], text[0]);
  EXPECT_EQ(m2["audio"]["transcript"], text[1]);
  ASSERT_FALSE(pcm[1].empty());
  EXPECT_TRUE(*pcm2 == S16(pcm[1])) << "the second answer differs from the library's second turn";

  req["messages"][1]["audio"]["id"] = "audio_nope";
  ExpectError(Post(text_port(), "/v1/chat/completions", req), 400, "invalid_request_error");
  req["messages"][1] = {{"role", "user"}, {"audio", {{"id", audio_id}}}, {"content", "x"}};
  ExpectError(Post(text_port(), "/v1/chat/completions", req), 400, "invalid_request_error");
}

// ---- limits, auth, disconnects ----

// A partial GGUF set (backbone + mmproj, what llama.cpp transcribes with): the server starts, lists the
// endpoints its files allow, transcribes exactly as the whole snapshot does (the library's answer on the
// text demo), and answers speech requests with a 400 naming the missing file.
TEST(ServerPartialFiles, BackboneAndMmprojServeTranscriptionOnly) {
  namespace fs = std::filesystem;
  const std::string full = testing::ScratchPath("serve_partial_full"),
                    asr = testing::ScratchPath("serve_partial_asr");
  fs::remove_all(full);
  fs::remove_all(asr);
  auto q = QuantizeModel(DemoDir(false), full, "f32");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  fs::create_directories(asr);
  for (size_t i = 0; i < 2; ++i) fs::copy_file(q->files[i], fs::path(asr) / fs::path(q->files[i]).filename());
  ServerOptions o;
  o.model_dir = asr;
  o.port = 0;
  o.threads = 2;
  o.max_new_tokens = kMaxNew;  // RunLibrary's budget
  o.context = 1024;
  auto s = Server::Start(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE((*s)->WaitReady().ok());
  const std::vector<std::string> lines = (*s)->Endpoints();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[0].find("not served"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("vocoder-*.gguf"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[1], "/v1/audio/transcriptions");
  const uint16_t port = (*s)->port();
  Reply speech = Post(port, "/v1/audio/speech", {{"input", "Hello."}, {"voice", "US female"}});
  ExpectError(speech, 400, "invalid_request_error");
  EXPECT_EQ(speech.Json()["error"]["code"], "model_not_capable") << speech.body;
  EXPECT_NE(speech.body.find("vocoder-*.gguf"), std::string::npos) << speech.body;
  const std::string wav_path = DataPath("inputs/question.wav");
  const LibOut lib = RunLibrary(TextModel(), AsrPrompt(wav_path), GenerateOptions::ForAsr(*TextModel()));
  ASSERT_FALSE(lib.text.empty());
  Reply t = Transcribe(port, {{"model", "whisper-1"}}, ReadFile(wav_path));
  ASSERT_EQ(t.status, 200) << t.body;
  EXPECT_EQ(t.Json()["text"], lib.text);
  (*s)->Stop();
  fs::remove_all(full);
  fs::remove_all(asr);
}

// LFM2-Audio-1.5B behind the server: a demo snapshot in its layout (Kyutai's Mimi file, no
// audio_detokenizer/, steered on its own TTS prompt) answers /v1/audio/speech with the library's
// PCM, bit for bit: an OpenAI voice name means the model's own voice ("Perform TTS." alone), a description
// in words is its voice line, and /v1/models lists no preset voices.
TEST(ServerLfm2Audio, SpeechThroughMimiEqualsTheLibrary) {
  const std::string dir = testing::ScratchPath("serve_lfm2_audio");
  std::filesystem::remove_all(dir);
  const std::string cmd = std::string(LFMVOX_MAKE_CHECKPOINT) + " lfm2-audio --size demo --tokenizer '" +
                          DataPath("tokenizer/tokenizer.json") + "' --out '" + dir + "' --steer-tts '" +
                          kSpeechText + "' 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto model = AudioModel::Load(dir);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_EQ((*model)->family(), "LFM2-Audio");
  ServerOptions o;
  o.model = *model;
  o.model_id = "demo";
  o.port = 0;
  o.threads = 2;
  o.max_new_tokens = kMaxNew;
  o.context = 1024;
  auto s = Server::Start(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE((*s)->WaitReady().ok());
  const uint16_t port = (*s)->port();
  for (const char* voice : {"alloy", "A calm female voice."}) {
    GenerateOptions g = GenerateOptions::ForTts(**model);
    g.audio.temperature = 0;
    const std::string v = std::string(voice) == "alloy" ? "" : voice;
    const LibOut lib = RunLibrary(
        *model, [&](Conversation& c) { return c.StartSpeech(v, kSpeechText); }, g);
    if (v.empty()) {
      ASSERT_GT(lib.pcm.size(), 0u) << "the steered prompt speaks";
    }
    json req = {{"model", "demo"},          {"input", kSpeechText}, {"voice", voice},
                {"response_format", "pcm"}, {"temperature", 0},     {"seed", 0}};
    Reply r = Post(port, "/v1/audio/speech", req);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(r.body == S16(lib.pcm)) << voice << ": speech bytes differ from the library's PCM";
  }
  Reply models = Get(port, "/v1/models");
  EXPECT_EQ(models.Json()["data"][0]["family"], "LFM2-Audio");
  EXPECT_TRUE(models.Json()["data"][0]["voices"].empty());
  (*s)->Stop();
  std::filesystem::remove_all(dir);
}

TEST(ServerLimits, AuthBodyLimitAndDisconnect) {
  ASSERT_TRUE(Model());
  ServerOptions o;
  o.model = Model();
  o.port = 0;
  o.threads = 2;
  o.api_key = "sekret-key";
  o.max_body_bytes = 64 * 1024;
  o.context = 2048;
  auto s = Server::Start(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE((*s)->WaitReady().ok());
  const uint16_t port = (*s)->port();
  const std::string key = "sekret-key";

  // Probes are open; everything else needs the key, compared whole.
  EXPECT_EQ(Get(port, "/livez").status, 200);
  EXPECT_EQ(Get(port, "/readyz").status, 200);
  ExpectError(Get(port, "/v1/models"), 401, "authentication_error");
  ExpectError(Get(port, "/v1/models", "sekret-ke"), 401, "authentication_error");
  ExpectError(Get(port, "/v1/models", "sekret-key2"), 401, "authentication_error");
  ExpectError(Get(port, "/metrics"), 401, "authentication_error");
  EXPECT_EQ(Get(port, "/v1/models", key).status, 200);

  // A body over 64 KiB: 413, and the server keeps serving.
  json big = {{"input", std::string(100 * 1024, 'a')}};
  Reply r = Post(port, "/v1/audio/speech", big, key);
  ExpectError(r, 413, "invalid_request_error");
  ExpectError(Call(port, http::verb::post, "/v1/audio/speech", "{\"input\":", "application/json", key), 400,
              "invalid_request_error");

  // Raw garbage instead of HTTP: a 400, not a crash.
  {
    net::io_context ioc;
    tcp::socket sock(ioc);
    sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
    net::write(sock, net::buffer(std::string("\x01\x02 garbage \xff\r\n\r\n")));
    std::string got;
    beast::error_code ec;
    std::vector<char> buf(4096);
    for (;;) {
      size_t n = sock.read_some(net::buffer(buf), ec);
      if (ec) break;
      got.append(buf.data(), n);
    }
    EXPECT_EQ(got.rfind("HTTP/1.1 400", 0), 0u) << got;
  }

  // A client that goes away mid-stream: its session is cancelled and freed (active sessions back to 0,
  // and far less speech produced than the budget of the whole request).
  const double out_before = MetricValue(Get(port, "/metrics", key).body, "lfmvox_audio_output_seconds_total");
  {
    net::io_context ioc;
    tcp::socket sock(ioc);
    sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
    http::request<http::string_body> req{http::verb::post, "/v1/audio/speech", 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::authorization, "Bearer " + key);
    req.set(http::field::content_type, "application/json");
    req.body() = json{{"input", kSpeechText}, {"response_format", "pcm"}, {"temperature", 0}}.dump();
    req.keep_alive(false);
    req.prepare_payload();
    http::write(sock, req);
    // Read until some audio has arrived (the header and a first chunk), then hang up.
    std::string got;
    std::vector<char> buf(4096);
    while (got.size() < 8192) {
      beast::error_code ec;
      size_t n = sock.read_some(net::buffer(buf), ec);
      ASSERT_FALSE(ec) << ec.message();
      got.append(buf.data(), n);
    }
    EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u);
    sock.close();
  }
  double active = -1;
  for (int i = 0; i < 200; ++i) {
    std::string m = Get(port, "/metrics", key).body;
    active = MetricValue(m, "lfmvox_active_sessions");
    if (active == 0 && MetricValue(m, "lfmvox_audio_output_seconds_total") > out_before) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(active, 0);
  const double produced =
      MetricValue(Get(port, "/metrics", key).body, "lfmvox_audio_output_seconds_total") - out_before;
  const double budget = GenerateOptions::ForTts(*Model()).max_new_tokens * 0.08;  // 80 ms frames
  EXPECT_GT(produced, 0);
  EXPECT_LT(produced, budget / 2) << "the session ran on after its client left";

  // The same for a non-stream reply (flac: nothing is written before the end): the hang-up alone
  // cancels the session.
  const double out_before2 =
      MetricValue(Get(port, "/metrics", key).body, "lfmvox_audio_output_seconds_total");
  {
    net::io_context ioc;
    tcp::socket sock(ioc);
    sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
    http::request<http::string_body> req{http::verb::post, "/v1/audio/speech", 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::authorization, "Bearer " + key);
    req.set(http::field::content_type, "application/json");
    req.body() = json{{"input", kSpeechText}, {"response_format", "flac"}, {"temperature", 0}}.dump();
    req.keep_alive(false);
    req.prepare_payload();
    http::write(sock, req);
    for (int i = 0; i < 200; ++i) {  // until its session runs
      if (MetricValue(Get(port, "/metrics", key).body, "lfmvox_active_sessions") == 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    sock.close();
  }
  active = -1;
  for (int i = 0; i < 200; ++i) {
    active = MetricValue(Get(port, "/metrics", key).body, "lfmvox_active_sessions");
    if (active == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(active, 0);
  EXPECT_LT(MetricValue(Get(port, "/metrics", key).body, "lfmvox_audio_output_seconds_total") - out_before2,
            budget / 2)
      << "the non-stream session ran on after its client left";
  (*s)->Stop();
}

// ---- the multipart parser and base64 on their own ----

// ---- GET /v1/realtime (WebSocket) ----

// A blocking Realtime client over a Beast WebSocket.
class RealtimeClient {
 public:
  explicit RealtimeClient(uint16_t port) : ws_(ioc_) {
    ws_.next_layer().connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
    ws_.handshake("127.0.0.1", "/v1/realtime");
  }
  void SendRaw(const std::string& text) { ws_.write(net::buffer(text)); }
  void Send(const json& e) { SendRaw(e.dump()); }
  json Read() {
    beast::flat_buffer b;
    ws_.read(b);
    return json::parse(beast::buffers_to_string(b.data()), nullptr, false);
  }
  // Every event up to and including the first of `type`.
  std::vector<json> ReadUntil(const std::string& type) {
    std::vector<json> out;
    do {
      out.push_back(Read());
    } while (out.back().value("type", "") != type);
    return out;
  }

 private:
  net::io_context ioc_;
  beast::websocket::stream<tcp::socket> ws_;
};

// The s16 PCM of the 24 kHz test clip, as a client sends it.
std::string ClipS16() {
  auto clip = DecodeAudio(ReadFile(DataPath("inputs/synthetic_24k.wav")), 60);
  EXPECT_TRUE(clip.ok() && clip->sample_rate == 24000 && clip->channels == 1);
  return S16(clip->samples);
}

// What the server hears: the s16 values / 32768.
std::vector<float> FromS16(const std::string& b) {
  std::vector<float> f(b.size() / 2);
  for (size_t i = 0; i < f.size(); ++i) {
    f[i] = static_cast<float>(static_cast<int16_t>(static_cast<uint8_t>(b[2 * i]) |
                                                   static_cast<uint8_t>(b[2 * i + 1]) << 8)) /
           32768.0f;
  }
  return f;
}

struct RtAnswer {
  std::vector<std::string> types;
  std::string audio, transcript, status, item_id;
  std::map<std::string, json> first;  // the first event of each type
};

RtAnswer RtCollect(const std::vector<json>& events) {
  RtAnswer a;
  for (const json& e : events) {
    const std::string t = e.value("type", "");
    a.types.push_back(t);
    a.first.emplace(t, e);
    if (t == "response.output_audio.delta") a.audio += *Base64Decode(e["delta"].get<std::string>(), 1u << 26);
    if (t == "response.output_audio_transcript.delta") a.transcript += e["delta"].get<std::string>();
    if (t == "response.output_item.added") a.item_id = e["item"]["id"];
    if (t == "response.done") a.status = e["response"]["status"];
  }
  return a;
}

RtAnswer RtRespond(RealtimeClient& c) {
  c.Send({{"type", "response.create"}});
  return RtCollect(c.ReadUntil("response.done"));
}

void RtAppendCommit(RealtimeClient& c, const std::string& pcm) {
  c.Send({{"type", "input_audio_buffer.append"}, {"audio", Base64Encode(pcm)}});
  c.Send({{"type", "input_audio_buffer.commit"}});
  EXPECT_EQ(c.Read()["type"], "input_audio_buffer.committed");
  EXPECT_EQ(c.Read()["type"], "conversation.item.created");
}

void ExpectErrorEvent(const json& e) {
  EXPECT_EQ(e.value("type", ""), "error") << e.dump();
  EXPECT_TRUE(e["error"]["message"].is_string() && !e["error"]["message"].get<std::string>().empty())
      << e.dump();
  EXPECT_TRUE(e["error"].contains("type") && e["error"].contains("code") && e["error"].contains("param"));
}

// The reference: the same turns through the library (a private engine, seed 0, the server's options).
struct LibTurn {
  std::vector<float> audio;    // the user's speech
  size_t truncate = SIZE_MAX;  // samples of the previous answer to keep
  int max_new = 0;             // this turn's cap; 0: LibraryRealtime's (a cancelled answer's length, so
                               // that the sampler's random stream advances as much as the server's did)
};

LibOut LibraryRealtime(const std::vector<LibTurn>& turns, int max_new = kMaxNew,
                       std::shared_ptr<const AudioModel> model = Model()) {
  auto c = Conversation::Create(model, {.threads = 2, .context = 1024, .seed = 0});
  EXPECT_TRUE(c.ok());
  EXPECT_TRUE((*c)->StartChat().ok());
  GenerateOptions o = GenerateOptions::ForSpeechToSpeech(*model);
  o.max_new_tokens = max_new;
  LibOut out;
  for (size_t i = 0; i < turns.size(); ++i) {
    if (i > 0) {
      if (turns[i].truncate != SIZE_MAX) {
        EXPECT_TRUE((*c)->TruncateSpeech(turns[i].truncate).ok());
      }
      EXPECT_TRUE((*c)->EndTurn().ok());
    }
    EXPECT_TRUE((*c)->StartTurn("user").ok());
    EXPECT_TRUE((*c)->AddAudio(turns[i].audio, 24000).ok());
    EXPECT_TRUE((*c)->EndTurn().ok());
    EXPECT_TRUE((*c)->StartTurn("assistant").ok());
    o.max_new_tokens = turns[i].max_new > 0 ? turns[i].max_new : max_new;
    out = {};
    OutputCallbacks cb;
    cb.on_text = [&](int32_t id, std::string_view piece) {
      if (!model->IsSpecialToken(id)) out.text += piece;
      return Status::Ok();
    };
    cb.on_pcm = [&](std::span<const float> p) {
      out.pcm.insert(out.pcm.end(), p.begin(), p.end());
      return Status::Ok();
    };
    EXPECT_TRUE((*c)->Generate(o, cb).ok());
  }
  return out;
}

TEST_F(ServerTest, RealtimeSpeechToSpeechEqualsTheLibrary) {
  RealtimeClient c(port());
  json created = c.Read();
  EXPECT_EQ(created["type"], "session.created");
  EXPECT_TRUE(created["session"]["id"].is_string());

  // Bad events are error events; the socket stays usable.
  c.SendRaw("{not json");
  ExpectErrorEvent(c.Read());
  c.Send({{"type", "no.such.event"}});
  ExpectErrorEvent(c.Read());
  c.Send({{"type", "input_audio_buffer.append"}, {"audio", "%%%"}});
  ExpectErrorEvent(c.Read());
  c.Send({{"type", "input_audio_buffer.commit"}});  // nothing appended
  ExpectErrorEvent(c.Read());
  c.Send({{"type", "response.create"}});  // nothing to answer
  ExpectErrorEvent(c.Read());
  c.Send({{"type", "session.update"}, {"session", {{"audio", {{"input", {{"turn_detection", nullptr}}}}}}}});
  EXPECT_EQ(c.Read()["type"], "session.updated");

  const std::string pcm = ClipS16();
  RtAppendCommit(c, pcm);
  RtAnswer a = RtRespond(c);
  EXPECT_EQ(a.status, "completed");
  ASSERT_GE(a.types.size(), 5u);
  EXPECT_EQ(a.types.front(), "response.created");
  EXPECT_EQ(a.types[1], "response.output_item.added");
  EXPECT_EQ(a.types[a.types.size() - 3], "response.output_audio.done");
  EXPECT_EQ(a.types[a.types.size() - 2], "response.output_audio_transcript.done");
  const LibOut lib = LibraryRealtime({{FromS16(pcm)}});
  EXPECT_EQ(a.transcript, lib.text);
  EXPECT_EQ(a.audio.size(), lib.pcm.size() * 2);
  EXPECT_TRUE(a.audio == S16(lib.pcm)) << "realtime speech bytes differ from the library's";

  ASSERT_GT(lib.pcm.size(), 1920u) << "the steered demo answers in speech within the cap";
  // Fields of the wrong type are error events (they once threw out of the session).
  c.Send({{"type", "conversation.item.truncate"}, {"item_id", 5}, {"audio_end_ms", 80}});
  ExpectErrorEvent(c.Read());
  c.Send(
      {{"type", "conversation.item.create"},
       {"item", {{"type", 1}, {"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "hi"}}}}}}});
  ExpectErrorEvent(c.Read());
  // conversation.item.truncate keeps the first 80 ms of that answer; the next turn continues from it.
  {
    c.Send({{"type", "conversation.item.truncate"},
            {"item_id", a.item_id},
            {"content_index", 0},
            {"audio_end_ms", 80}});
    EXPECT_EQ(c.Read()["type"], "conversation.item.truncated");
    RtAppendCommit(c, pcm);
    RtAnswer b = RtRespond(c);
    EXPECT_EQ(b.status, "completed");
    const LibOut lib2 = LibraryRealtime({{FromS16(pcm)}, {FromS16(pcm), 1920}});
    EXPECT_EQ(b.transcript, lib2.text);
    EXPECT_TRUE(b.audio == S16(lib2.pcm)) << "the truncated history's answer differs from the library's";
  }
}

// audio.input.transcription: each committed turn is also transcribed (the model's ASR task, its own job
// batched beside the response). The deltas add up to the completed transcript, which equals the
// library's ASR of the same samples; the response is the one a session without transcription gives.
TEST_F(ServerTest, RealtimeInputTranscriptionEqualsTheLibrarysAsr) {
  RealtimeClient c(text_port());
  EXPECT_EQ(c.Read()["type"], "session.created");
  auto update = [&](const json& t) {
    c.Send({{"type", "session.update"}, {"session", {{"audio", {{"input", {{"transcription", t}}}}}}}});
    return c.Read();
  };
  for (const json& bad : {json(5), json{{"model", 3}}, json{{"model", "whisper-1"}, {"speaker", "x"}}}) {
    const json e = update(bad);
    ExpectErrorEvent(e);
    EXPECT_EQ(e["error"]["param"].get<std::string>().rfind("session.audio.input.transcription", 0), 0u) << e;
  }
  const json ok = update({{"model", "whisper-1"}, {"language", "en"}});
  ASSERT_EQ(ok["type"], "session.updated") << ok;
  EXPECT_EQ(ok["session"]["audio"]["input"]["transcription"]["model"], "whisper-1");

  const std::string pcm = S16(DecodeAudio(ReadFile(DataPath("inputs/question.wav")), 60)->samples);
  c.Send({{"type", "input_audio_buffer.append"}, {"audio", Base64Encode(pcm)}});
  c.Send({{"type", "input_audio_buffer.commit"}});
  const json committed = c.Read();
  ASSERT_EQ(committed["type"], "input_audio_buffer.committed");
  EXPECT_EQ(c.Read()["type"], "conversation.item.created");
  c.Send({{"type", "response.create"}});
  std::vector<json> events;
  bool responded = false, transcribed = false;
  std::string deltas;
  json completed;
  while (!responded || !transcribed) {
    events.push_back(c.Read());
    const json& e = events.back();
    const std::string t = e.value("type", "");
    if (t == "response.done") responded = true;
    if (t == "conversation.item.input_audio_transcription.delta") {
      EXPECT_EQ(e["item_id"], committed["item_id"]);
      deltas += e["delta"].get<std::string>();
    }
    if (t == "conversation.item.input_audio_transcription.completed") {
      transcribed = true;
      completed = e;
    }
    ASSERT_NE(t, "conversation.item.input_audio_transcription.failed") << e;
    ASSERT_NE(t, "error") << e;
  }
  const std::vector<float> heard = FromS16(pcm);
  const LibOut asr = RunLibrary(
      TextModel(),
      [&](Conversation& conv) {
        Status st = conv.StartAsr();
        if (st.ok()) st = conv.AddAudio(heard, 24000);
        if (st.ok()) st = conv.EndTurn();
        if (st.ok()) st = conv.StartTurn("assistant");
        return st;
      },
      GenerateOptions::ForAsr(*TextModel()));
  ASSERT_FALSE(asr.text.empty()) << "the text demo transcribes the question";
  EXPECT_EQ(completed["item_id"], committed["item_id"]);
  EXPECT_EQ(completed["content_index"], 0);
  EXPECT_EQ(completed["transcript"], asr.text);
  EXPECT_EQ(deltas, asr.text);
  EXPECT_DOUBLE_EQ(completed["usage"]["seconds"].get<double>(), static_cast<double>(heard.size()) / 24000);
  const RtAnswer a = RtCollect(events);
  EXPECT_EQ(a.status, "completed");
  const LibOut lib = LibraryRealtime({{heard}}, kMaxNew, TextModel());
  EXPECT_EQ(a.transcript, lib.text);
  EXPECT_TRUE(a.audio == S16(lib.pcm)) << "the response differs from the library's";

  // A transcription session (session.type "transcription", transcription on by default): committed turns
  // are transcribed, never answered.
  {
    RealtimeClient t(text_port());
    EXPECT_EQ(t.Read()["type"], "session.created");
    t.Send({{"type", "session.update"}, {"session", {{"type", "transcription"}}}});
    const json u = t.Read();
    ASSERT_EQ(u["type"], "session.updated") << u;
    EXPECT_EQ(u["session"]["type"], "transcription");
    EXPECT_EQ(u["session"]["audio"]["input"]["transcription"]["model"], "demo");
    t.Send({{"type", "session.update"}, {"session", {{"type", "translation"}}}});
    ExpectErrorEvent(t.Read());
    RtAppendCommit(t, pcm);
    const std::vector<json> got = t.ReadUntil("conversation.item.input_audio_transcription.completed");
    EXPECT_EQ(got.back()["transcript"], asr.text);
    t.Send({{"type", "response.create"}});
    ExpectErrorEvent(t.Read());
    t.Send(
        {{"type", "conversation.item.create"},
         {"item",
          {{"type", "message"}, {"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "hi"}}}}}}});
    ExpectErrorEvent(t.Read());
  }
  // Unanswered turns are held within the clip limit (10 s here): the fourth 3.3 s turn is refused.
  {
    RealtimeClient r(text_port());
    EXPECT_EQ(r.Read()["type"], "session.created");
    for (int i = 0; i < 3; ++i) RtAppendCommit(r, pcm);
    r.Send({{"type", "input_audio_buffer.append"}, {"audio", Base64Encode(pcm)}});
    r.Send({{"type", "input_audio_buffer.commit"}});
    const json e = r.Read();
    ExpectErrorEvent(e);
    EXPECT_EQ(e["error"]["code"], "limit_exceeded") << e;
  }

  // Turned off again: the next turn is answered without transcription events.
  EXPECT_EQ(update(nullptr)["session"]["audio"]["input"]["transcription"], nullptr);
  RtAppendCommit(c, pcm);
  for (const std::string& t : RtRespond(c).types)
    EXPECT_EQ(t.find("input_audio_transcription"), std::string::npos);
}

TEST_F(ServerTest, RealtimeCancelStopsTheResponse) {
  RealtimeClient c(port());
  EXPECT_EQ(c.Read()["type"], "session.created");
  const std::string pcm = ClipS16();
  RtAppendCommit(c, pcm);
  const LibOut full = LibraryRealtime({{FromS16(pcm)}});
  // The cancel follows the create at once: the scheduler stops the session at its next step.
  c.Send({{"type", "response.create"}});
  c.Send({{"type", "response.cancel"}});
  std::string audio;
  std::string status;
  for (const json& e : c.ReadUntil("response.done")) {
    if (e["type"] == "response.output_audio.delta")
      audio += *Base64Decode(e["delta"].get<std::string>(), 1u << 26);
    if (e["type"] == "response.done") status = e["response"]["status"];
  }
  EXPECT_EQ(status, "cancelled");
  EXPECT_LT(audio.size(), full.pcm.size() * 2 + 1);
  EXPECT_TRUE(audio == S16(full.pcm).substr(0, audio.size()))
      << "the audio sent before the cancel is the answer's start";
  // The session goes on: the next turn is answered.
  RtAppendCommit(c, pcm);
  EXPECT_EQ(RtRespond(c).status, "completed");
}

// ---- server VAD (vad.h) and barge-in ----

constexpr size_t kVadFrame = ServerVad::kFrame;  // 10 ms at 24 kHz

// tests/data/inputs/question.wav (16 kHz speech over a little noise) at 24 kHz, and its speech onset:
// the first 10 ms frame (of the 16 kHz file) whose RMS is over 4 times the loudest of its first 0.5 s.
struct Question {
  std::vector<float> pcm24;
  size_t onset_frame = 0;
};
const Question& QuestionClip() {
  static const Question q = [] {
    Question r;
    auto clip = DecodeAudio(ReadFile(DataPath("inputs/question.wav")), 60);
    EXPECT_TRUE(clip.ok() && clip->sample_rate == 16000 && clip->channels == 1);
    auto up = dsp::Resample(clip->samples, 16000, 24000);
    EXPECT_TRUE(up.ok());
    r.pcm24 = *up;
    auto rms = [&](size_t f) {
      double e = 0;
      for (size_t i = 160 * f; i < 160 * (f + 1); ++i) e += clip->samples[i] * clip->samples[i];
      return std::sqrt(e / 160);
    };
    double noise = 0;
    for (size_t f = 0; f < 50; ++f) noise = std::max(noise, rms(f));
    while (rms(r.onset_frame) <= 4 * noise) ++r.onset_frame;
    return r;
  }();
  return q;
}

std::vector<VadTransition> RunVad(const std::vector<float>& x, const VadOptions& o, size_t chunk) {
  auto v = ServerVad::Create(o);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  std::vector<VadTransition> t;
  for (size_t i = 0; i < x.size(); i += chunk) {
    EXPECT_TRUE((*v)->Push(std::span<const float>(x).subspan(i, std::min(chunk, x.size() - i)), &t).ok());
  }
  return t;
}

TEST(ServerVad, ToneBurstAndSpeechTransitions) {
  // 0.5 s of silence, a 1 s 440 Hz tone at 0.3 (frames 50..149), 1.5 s of silence.
  std::vector<float> x(72000, 0.0f);
  for (size_t i = 12000; i < 36000; ++i)
    x[i] = 0.3f * static_cast<float>(std::sin(2 * M_PI * 440.0 * i / 24000));
  const VadOptions o{.threshold = 0.9, .prefix_padding_ms = 300, .silence_duration_ms = 500};
  // Speech starts at the burst's first frame, 50; the turn begins 300 ms (30 frames) before it. The
  // library (threshold 0.9 = kVeryLowLikelihood, WebRTC's mode 3) holds "voice" for 10 frames after
  // the burst (150..159: frame 150 carries the resampler's tail, then the VAD's hangover), so the
  // 50 silent frames that end the turn are 160..209: audio_end = 210 frames.
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{2400}, x.size()}) {
    const std::vector<VadTransition> t = RunVad(x, o, chunk);
    ASSERT_EQ(t.size(), 2u) << "chunk " << chunk;
    EXPECT_EQ(t[0].kind, VadTransition::kSpeechStarted);
    EXPECT_EQ(t[0].sample, (50 - 30) * kVadFrame) << "chunk " << chunk;
    EXPECT_EQ(t[1].kind, VadTransition::kSpeechStopped);
    EXPECT_EQ(t[1].sample, 210 * kVadFrame) << "chunk " << chunk;
  }
  // With no padding and no silence: [50, 161); the padding clamps at the start of the audio.
  auto t = RunVad(x, {.threshold = 0.9, .prefix_padding_ms = 0, .silence_duration_ms = 0}, 2400);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].sample, 50 * kVadFrame);
  EXPECT_EQ(t[1].sample, 161 * kVadFrame);
  t = RunVad(x, {.threshold = 0.9, .prefix_padding_ms = 2000, .silence_duration_ms = 0}, 2400);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].sample, 0u);
  // Digital silence is never speech, at any threshold.
  for (double th : {0.0, 0.5, 1.0})
    EXPECT_TRUE(RunVad(std::vector<float>(48000, 0.0f), {.threshold = th}, 480).empty());
  // Speech: the file's onset (energy, above) is the VAD's first voiced frame.
  const Question& q = QuestionClip();
  EXPECT_EQ(q.onset_frame, 55u);
  t = RunVad(q.pcm24, {.threshold = 0.9, .prefix_padding_ms = 0, .silence_duration_ms = 500}, 2400);
  ASSERT_GE(t.size(), 1u);
  EXPECT_EQ(t[0].sample, q.onset_frame * kVadFrame);
}

TEST(ServerVad, ThresholdMappingAndBadOptions) {
  // Four equal bins of threshold onto webrtc::VoiceDetection::Likelihood (kVeryLow 0 ... kHigh 3).
  EXPECT_EQ(ServerVad::LikelihoodFor(0.0), 3);
  EXPECT_EQ(ServerVad::LikelihoodFor(0.249), 3);
  EXPECT_EQ(ServerVad::LikelihoodFor(0.25), 2);
  EXPECT_EQ(ServerVad::LikelihoodFor(0.5), 1);
  EXPECT_EQ(ServerVad::LikelihoodFor(0.75), 0);
  EXPECT_EQ(ServerVad::LikelihoodFor(1.0), 0);
  const std::pair<VadOptions, const char*> bad[] = {{{.threshold = 1.5}, "threshold"},
                                                    {{.threshold = -0.1}, "threshold"},
                                                    {{.threshold = std::nan("")}, "threshold"},
                                                    {{.prefix_padding_ms = -1}, "prefix_padding_ms"},
                                                    {{.silence_duration_ms = 10001}, "silence_duration_ms"}};
  for (const auto& [o, name] : bad) {
    std::string which;
    auto v = ServerVad::Create(o, &which);
    ASSERT_FALSE(v.ok()) << name;
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(which, name);
    EXPECT_NE(v.status().message().find(name), std::string::npos) << v.status().message();
  }
}

// A spoken turn as a client streams it: 1 s of silence, question.wav from its onset to frame 390
// (still speech), then `tail` samples of silence. Its speech is frames [100, 435) of the result.
std::vector<float> SpokenTurn(size_t tail) {
  const Question& q = QuestionClip();
  std::vector<float> x(24000, 0.0f);
  x.insert(x.end(), q.pcm24.begin() + static_cast<std::ptrdiff_t>(q.onset_frame * kVadFrame),
           q.pcm24.begin() + static_cast<std::ptrdiff_t>(390 * kVadFrame));
  x.resize(x.size() + tail, 0.0f);
  return x;
}

void AppendChunks(RealtimeClient& c, const std::string& pcm) {
  for (size_t i = 0; i < pcm.size(); i += 4800) {  // 100 ms a message
    c.Send({{"type", "input_audio_buffer.append"}, {"audio", Base64Encode(pcm.substr(i, 4800))}});
  }
}

const json kVadConfig = {
    {"type", "server_vad"}, {"threshold", 0.9}, {"prefix_padding_ms", 300}, {"silence_duration_ms", 500}};

// The bounds on a VAD turn over SpokenTurn's speech [100, 435) frames (of 10 ms), with 300 ms padding
// and 500 ms silence: it starts 30 frames before the first voiced frame, which is the onset frame or
// the next (the cut lands on a frame boundary, one frame of slack); it ends 50 frames after the last
// voiced one, which is the speech's last frame plus the library's hangover, at most 10 frames (the
// tone burst above): audio_end_ms in [4850, 4950].
void ExpectVadTurn(const json& started, const json& stopped, size_t offset_ms) {
  const size_t start = started["audio_start_ms"], end = stopped["audio_end_ms"];
  EXPECT_GE(start, offset_ms + 700);
  EXPECT_LE(start, offset_ms + 710);
  EXPECT_GE(end, offset_ms + 4850);
  EXPECT_LE(end, offset_ms + 4950);
}

TEST_F(ServerTest, RealtimeServerVadCommitsAndAnswers) {
  RealtimeClient c(port());
  EXPECT_EQ(c.Read()["type"], "session.created");
  // Bad options are error events naming the option; nothing changes.
  const std::pair<json, std::string> bad[] = {
      {{{"type", "server_vad"}, {"threshold", 2}}, "threshold"},
      {{{"type", "server_vad"}, {"prefix_padding_ms", "300"}}, "prefix_padding_ms"},
      {{{"type", "server_vad"}, {"silence_duration_ms", -5}}, "silence_duration_ms"},
      {{{"type", "server_vad"}, {"create_response", 1}}, "create_response"},
      {{{"type", "server_vad"}, {"eagerness", "low"}}, "eagerness"},
      {{{"type", "vad"}}, "type"}};
  for (const auto& [td, param] : bad) {
    c.Send({{"type", "session.update"}, {"session", {{"audio", {{"input", {{"turn_detection", td}}}}}}}});
    const json e = c.Read();
    ExpectErrorEvent(e);
    EXPECT_EQ(e["error"]["param"], "session.audio.input.turn_detection." + param) << e.dump();
  }
  // The older top-level place is accepted too; the GA place is echoed with the defaults filled in.
  c.Send({{"type", "session.update"}, {"session", {{"turn_detection", kVadConfig}}}});
  json u = c.Read();
  ASSERT_EQ(u["type"], "session.updated") << u.dump();
  const json& td = u["session"]["audio"]["input"]["turn_detection"];
  EXPECT_EQ(td["type"], "server_vad");
  EXPECT_EQ(td["silence_duration_ms"], 500);
  EXPECT_EQ(td["create_response"], true);
  EXPECT_EQ(td["interrupt_response"], true);

  const std::string pcm = S16(SpokenTurn(24000));
  AppendChunks(c, pcm);
  RtAnswer a = RtCollect(c.ReadUntil("response.done"));
  std::map<std::string, json>& first = a.first;
  ASSERT_TRUE(first.count("input_audio_buffer.speech_started") &&
              first.count("input_audio_buffer.speech_stopped") &&
              first.count("input_audio_buffer.committed") && first.count("response.created"));
  ASSERT_GE(a.types.size(), 3u);
  EXPECT_EQ(a.types[0], "input_audio_buffer.speech_started");
  EXPECT_EQ(a.types[1], "input_audio_buffer.speech_stopped");
  EXPECT_EQ(a.types[2], "input_audio_buffer.committed");
  const json& started = first["input_audio_buffer.speech_started"];
  const json& stopped = first["input_audio_buffer.speech_stopped"];
  ExpectVadTurn(started, stopped, 0);
  EXPECT_EQ(started["item_id"], first["input_audio_buffer.committed"]["item_id"]);
  EXPECT_EQ(stopped["item_id"], started["item_id"]);
  EXPECT_EQ(a.status, "completed");
  // The answer is the library's to the committed audio, [audio_start_ms, audio_end_ms) of what was sent.
  const size_t s0 = started["audio_start_ms"].get<size_t>() * 24,
               s1 = stopped["audio_end_ms"].get<size_t>() * 24;
  const LibOut lib = LibraryRealtime({{FromS16(pcm.substr(2 * s0, 2 * (s1 - s0)))}});
  EXPECT_EQ(a.transcript, lib.text);
  EXPECT_EQ(a.audio.size(), lib.pcm.size() * 2);
  EXPECT_TRUE(a.audio == S16(lib.pcm)) << "the VAD turn's answer differs from the library's";

  // create_response false: the turn is committed and nothing answers it. The clear after the audio is
  // handled after it, so every event the audio caused comes before `cleared`.
  json quiet = kVadConfig;
  quiet["create_response"] = false;
  c.Send({{"type", "session.update"}, {"session", {{"audio", {{"input", {{"turn_detection", quiet}}}}}}}});
  EXPECT_EQ(c.Read()["type"], "session.updated");
  AppendChunks(c, pcm);
  c.Send({{"type", "input_audio_buffer.clear"}});
  const RtAnswer q = RtCollect(c.ReadUntil("input_audio_buffer.cleared"));
  EXPECT_EQ(q.types.size(), 5u);  // speech_started, speech_stopped, committed, item.created, cleared
  EXPECT_TRUE(q.first.count("input_audio_buffer.committed"));
  EXPECT_FALSE(q.first.count("response.created"));
}

// semantic_vad: a pause ends the turn when the model's transcript of it reads as a finished sentence, or
// once the pause has lasted the eagerness's wait (high: 2 s). The demo model's transcripts are newlines,
// never a sentence, so here every turn ends by the wait: not after 1.5 s of silence (an event sent after
// the audio is answered first), then once 2 s have passed since the pause's start (the detector's end
// of speech, with its hangover), with audio_end_ms where a 300 ms pause ends (the server_vad bounds
// above, 200 ms earlier); a 1 s pause inside the speech does not end it (one turn: one
// speech_started, one speech_stopped after the second part).
TEST_F(ServerTest, RealtimeSemanticVadWaitsForTheEagerness) {
  RealtimeClient c(port());
  EXPECT_EQ(c.Read()["type"], "session.created");
  const std::pair<json, std::string> bad[] = {
      {{{"type", "semantic_vad"}, {"eagerness", "soon"}}, "eagerness"},
      {{{"type", "semantic_vad"}, {"threshold", 0.5}}, "threshold"},
      {{{"type", "semantic_vad"}, {"create_response", "no"}}, "create_response"}};
  for (const auto& [td, param] : bad) {
    c.Send({{"type", "session.update"}, {"session", {{"audio", {{"input", {{"turn_detection", td}}}}}}}});
    const json e = c.Read();
    ExpectErrorEvent(e);
    EXPECT_EQ(e["error"]["param"], "session.audio.input.turn_detection." + param) << e.dump();
  }
  const json td = {{"type", "semantic_vad"}, {"eagerness", "high"}, {"create_response", false}};
  c.Send({{"type", "session.update"}, {"session", {{"audio", {{"input", {{"turn_detection", td}}}}}}}});
  json u = c.Read();
  ASSERT_EQ(u["type"], "session.updated") << u.dump();
  const json& echo = u["session"]["audio"]["input"]["turn_detection"];
  EXPECT_EQ(echo["type"], "semantic_vad");
  EXPECT_EQ(echo["eagerness"], "high");
  EXPECT_EQ(echo["create_response"], false);
  EXPECT_EQ(echo["interrupt_response"], true);

  const std::vector<float> turn = SpokenTurn(36000);  // 1.5 s of silence after the speech
  AppendChunks(c, S16(turn));
  c.Send({{"type", "no.such.event"}});
  std::vector<json> got = c.ReadUntil("error");
  std::vector<std::string> types;
  for (const json& e : got) types.push_back(e["type"]);
  EXPECT_EQ(types, (std::vector<std::string>{"input_audio_buffer.speech_started", "error"}));
  AppendChunks(c, S16(std::vector<float>(
                      24000, 0.0f)));  // 1 s more: the 2 s wait (from the pause's end − 300 ms) is passed
  got = c.ReadUntil("conversation.item.created");
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0]["type"], "input_audio_buffer.speech_stopped");
  const size_t end = got[0]["audio_end_ms"];
  EXPECT_GE(end, 4650u);
  EXPECT_LE(end, 4750u);
  EXPECT_EQ(got[1]["type"], "input_audio_buffer.committed");

  // 1.5 s of speech, a 0.8 s pause, the whole speech again, then 2.5 s of silence: one turn (a new
  // session: unanswered turns count against the clip limit).
  RealtimeClient c2(port());
  EXPECT_EQ(c2.Read()["type"], "session.created");
  c2.Send({{"type", "session.update"}, {"session", {{"audio", {{"input", {{"turn_detection", td}}}}}}}});
  ASSERT_EQ(c2.Read()["type"], "session.updated");
  const Question& q = QuestionClip();
  std::vector<float> two(24000, 0.0f);
  two.insert(two.end(), q.pcm24.begin() + static_cast<std::ptrdiff_t>(q.onset_frame * kVadFrame),
             q.pcm24.begin() + static_cast<std::ptrdiff_t>((q.onset_frame + 150) * kVadFrame));
  two.resize(two.size() + 19200, 0.0f);
  const std::vector<float> again = SpokenTurn(60000);
  two.insert(two.end(), again.begin() + 24000, again.end());  // the second part without its lead-in
  AppendChunks(c2, S16(two));
  got = c2.ReadUntil("conversation.item.created");
  types.clear();
  for (const json& e : got) types.push_back(e["type"]);
  EXPECT_EQ(types, (std::vector<std::string>{"input_audio_buffer.speech_started",
                                             "input_audio_buffer.speech_stopped",
                                             "input_audio_buffer.committed", "conversation.item.created"}));
  const size_t start2 = got[0]["audio_start_ms"], end2 = got[1]["audio_end_ms"];
  EXPECT_GE(start2, 700u);
  EXPECT_LE(start2, 710u);
  // The second speech starts 1000 + 1500 + 800 ms in; its pause ends 3650–3750 ms after its start (as
  // SpokenTurn's, 4650–4750 from its lead-in).
  EXPECT_GE(end2, 3300u + 3650);
  EXPECT_LE(end2, 3300u + 3750);
}

// idle_timeout_ms: that much audio without speech since the last answer played commits the silence as a
// user turn (input_audio_buffer.timeout_triggered with the silent span) and answers it. The idle time
// is counted in input samples: from the session's start, then from when the answer has played (its
// first audio delta + its length, the client streaming its microphone meanwhile).
TEST_F(ServerTest, RealtimeIdleTimeoutAnswersTheSilence) {
  RealtimeClient c(port());
  EXPECT_EQ(c.Read()["type"], "session.created");
  for (const json& bad : {json(-1), json(0), json("500"), json(600001)}) {
    json td = kVadConfig;
    td["idle_timeout_ms"] = bad;
    c.Send({{"type", "session.update"}, {"session", {{"audio", {{"input", {{"turn_detection", td}}}}}}}});
    const json e = c.Read();
    ExpectErrorEvent(e);
    EXPECT_EQ(e["error"]["param"], "session.audio.input.turn_detection.idle_timeout_ms") << e;
  }
  json td = kVadConfig;
  td["idle_timeout_ms"] = 500;
  c.Send({{"type", "session.update"}, {"session", {{"audio", {{"input", {{"turn_detection", td}}}}}}}});
  const json u = c.Read();
  ASSERT_EQ(u["type"], "session.updated") << u;
  EXPECT_EQ(u["session"]["audio"]["input"]["turn_detection"]["idle_timeout_ms"], 500);

  // 500 ms of silence in 100 ms chunks: the fifth chunk runs the timeout out.
  const std::string chunk(4800, '\0');
  for (int i = 0; i < 5; ++i) c.Send({{"type", "input_audio_buffer.append"}, {"audio", Base64Encode(chunk)}});
  const RtAnswer a = RtCollect(c.ReadUntil("response.done"));
  ASSERT_GE(a.types.size(), 3u);
  EXPECT_EQ(a.types[0], "input_audio_buffer.timeout_triggered");
  EXPECT_EQ(a.types[1], "input_audio_buffer.committed");
  const json& t = a.first.at("input_audio_buffer.timeout_triggered");
  EXPECT_EQ(t["audio_start_ms"], 0);
  EXPECT_EQ(t["audio_end_ms"], 500);
  EXPECT_EQ(t["item_id"], a.first.at("input_audio_buffer.committed")["item_id"]);
  EXPECT_EQ(a.status, "completed");
  const size_t sent = a.audio.size() / 2;
  ASSERT_GT(sent, 0u);

  // Nothing was appended while it answered, so the answer plays over the next `sent` samples and the
  // idle time counts from 12000 + sent: the timeout runs out at the first chunk end 12000 samples later.
  const size_t from = 12000 + sent, n = (sent + 12000 + 2399) / 2400;
  for (size_t i = 0; i < n; ++i)
    c.Send({{"type", "input_audio_buffer.append"}, {"audio", Base64Encode(chunk)}});
  const RtAnswer b = RtCollect(c.ReadUntil("response.done"));
  ASSERT_FALSE(b.types.empty());
  EXPECT_EQ(b.types[0], "input_audio_buffer.timeout_triggered");
  const json& t2 = b.first.at("input_audio_buffer.timeout_triggered");
  EXPECT_EQ(t2["audio_start_ms"], from / 24);
  EXPECT_EQ(t2["audio_end_ms"], (12000 + 2400 * n) / 24);
  EXPECT_EQ(b.status, "completed");
}

// Barge-in: speech during a response cancels it (nothing more is sent after speech_started) and the
// next answer continues a history that keeps just the speech sent. A server with a longer cap, so the
// answer is still streaming when the client starts speaking (it speaks on the first audio delta).
TEST_F(ServerTest, RealtimeBargeInCancelsAndTruncates) {
  constexpr int kLong = 160;
  std::unique_ptr<Server> server(StartOn(Model(), kLong));
  ASSERT_TRUE(server);
  RealtimeClient c(server->port());
  EXPECT_EQ(c.Read()["type"], "session.created");
  c.Send(
      {{"type", "session.update"}, {"session", {{"audio", {{"input", {{"turn_detection", kVadConfig}}}}}}}});
  EXPECT_EQ(c.Read()["type"], "session.updated");
  const std::string turn = S16(SpokenTurn(14400));  // 600 ms of silence after the speech
  AppendChunks(c, turn);
  json started1, stopped1;
  std::string item1;
  size_t sent = 0;
  auto delta_samples = [](const json& e) {
    return Base64Decode(e["delta"].get<std::string>(), 1u << 26)->size() / 2;
  };
  for (;;) {
    const json e = c.Read();
    const std::string t = e.value("type", "");
    if (t == "input_audio_buffer.speech_started") started1 = e;
    if (t == "input_audio_buffer.speech_stopped") stopped1 = e;
    if (t == "response.output_item.added") item1 = e["item"]["id"];
    ASSERT_NE(t, "response.done") << "the answer ended before its first audio";
    if (t == "response.output_audio.delta") {
      sent += delta_samples(e);
      break;
    }
  }
  ASSERT_FALSE(started1.is_null() || stopped1.is_null());
  // Speak again (1 s of silence and the same speech, right after the first turn's audio): first up to
  // 200 ms into the speech, which is heard as a speech start.
  const size_t offset_ms = turn.size() / 48;  // 24 kHz s16: 48 bytes a millisecond
  const std::string turn2 = S16(SpokenTurn(24000));
  const size_t head = 48 * 1200;
  AppendChunks(c, turn2.substr(0, head));
  json started2, stopped2, done1;
  for (;;) {
    const json e = c.Read();
    const std::string t = e.value("type", "");
    ASSERT_NE(t, "response.done") << "the answer ended before the barge-in: " << e.dump();
    if (t == "response.output_audio.delta") sent += delta_samples(e);
    if (t == "input_audio_buffer.speech_started") {
      started2 = e;
      break;
    }
  }
  // The client stops playing and says it played half of what it got; then the rest of the turn.
  const size_t played_ms = sent / 48;
  c.Send({{"type", "conversation.item.truncate"},
          {"item_id", item1},
          {"content_index", 0},
          {"audio_end_ms", played_ms}});
  AppendChunks(c, turn2.substr(head));
  // Until the second answer's response.done: the cancelled one's events, then the new turn's.
  std::vector<json> events = c.ReadUntil("response.done");
  done1 = events.back();
  size_t after_start = 0;
  for (const json& e : events) {
    if (e["type"] == "response.output_audio.delta") after_start += delta_samples(e);
  }
  EXPECT_EQ(done1["response"]["status"], "cancelled");
  EXPECT_EQ(done1["response"]["status_details"]["reason"], "turn_detected");
  EXPECT_LE(after_start, 1920u) << "more than one 80 ms frame went out after speech_started";
  EXPECT_EQ(after_start, 0u) << "the server drops what the scheduler made after the cancel";
  // The second turn is committed and answered (after the cancelled one's response.done).
  const std::vector<json> rest = c.ReadUntil("response.done");
  events.insert(events.end(), rest.begin(), rest.end());
  const RtAnswer b = RtCollect(rest);
  const RtAnswer all = RtCollect(events);
  ASSERT_TRUE(all.first.count("conversation.item.truncated") &&
              all.first.count("input_audio_buffer.speech_stopped"));
  EXPECT_EQ(all.first.at("conversation.item.truncated")["audio_end_ms"], played_ms);
  stopped2 = all.first.at("input_audio_buffer.speech_stopped");
  ASSERT_FALSE(stopped2.is_null());
  ExpectVadTurn(started1, stopped1, 0);
  ExpectVadTurn(started2, stopped2, offset_ms);
  EXPECT_EQ(b.status, "completed");
  auto cut = [](const std::string& pcm, const json& a, const json& z, size_t offset_ms) {
    const size_t s0 = a["audio_start_ms"].get<size_t>() - offset_ms,
                 s1 = z["audio_end_ms"].get<size_t>() - offset_ms;
    return FromS16(pcm.substr(48 * s0, 48 * (s1 - s0)));
  };
  // The cancelled answer made usage.output_tokens steps (its sampler drew that many times).
  const int made = done1["response"]["usage"]["output_tokens"];
  ASSERT_LT(made, kLong);
  const LibOut lib = LibraryRealtime({{cut(turn, started1, stopped1, 0), SIZE_MAX, made},
                                      {cut(turn2, started2, stopped2, offset_ms), played_ms * 24}},
                                     kLong);
  EXPECT_EQ(b.transcript, lib.text);
  const std::string metrics = Get(server->port(), "/metrics").body;
  EXPECT_EQ(MetricValue(metrics, "lfmvox_realtime_vad_turns_total"), 2);
  EXPECT_EQ(MetricValue(metrics, "lfmvox_realtime_barge_ins_total"), 1);
  EXPECT_TRUE(b.audio == S16(lib.pcm))
      << "the answer after the barge-in differs from the library's with the history truncated at the "
      << played_ms << " ms played";
}

TEST(ServerCodec, MultipartAndBase64) {
  const std::string body =
      "preamble\r\n--XY\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n"
      "--XY\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x;y.wav\"\r\nContent-Type: "
      "audio/wav\r\n\r\n"
      "\r\n--X not the end\r\n--XY--\r\n";
  auto parts = ParseMultipart(body, "XY");
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].name, "a");
  EXPECT_EQ((*parts)[0].body, "1");
  EXPECT_EQ((*parts)[1].filename, "x;y.wav");
  EXPECT_EQ((*parts)[1].content_type, "audio/wav");
  EXPECT_EQ((*parts)[1].body, "\r\n--X not the end");
  EXPECT_FALSE(ParseMultipart(body.substr(0, body.size() - 12), "XY").ok());  // cut before the last boundary
  EXPECT_FALSE(
      ParseMultipart("--XY\r\nContent-Disposition: form-data\r\n\r\nv\r\n--XY--", "XY").ok());  // no name
  auto b = MultipartBoundary("multipart/form-data; boundary=\"a b\"");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, "a b");
  // RFC 4648 test vectors.
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, coded] : vectors) {
    EXPECT_EQ(Base64Encode(plain), coded);
    auto d = Base64Decode(coded, 100);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(*d, plain);
  }
  EXPECT_FALSE(Base64Decode("Zm9v!", 100).ok());
  EXPECT_FALSE(Base64Decode("Zm9vYmFy", 5).ok());
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
}

// ---- the web page at / (apps/server/web, embedded) and who may open /v1/realtime ----

// One request with extra headers on a fresh connection; the whole response (a 101 has no body).
http::response<http::string_body> Raw(uint16_t port, http::verb method, const std::string& target,
                                      const std::vector<std::pair<http::field, std::string>>& headers) {
  net::io_context ioc;
  tcp::socket socket(ioc);
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1:" + std::to_string(port));
  for (const auto& [k, v] : headers) req.set(k, v);
  req.prepare_payload();
  http::write(socket, req);
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  beast::error_code ec;
  http::read(socket, buf, res, ec);
  EXPECT_FALSE(ec) << ec.message();
  return res;
}

TEST(ServerWeb, PageIsEmbeddedAndRealtimeUpgradesAreChecked) {
  ASSERT_TRUE(Model());
  ServerOptions o;
  o.model = Model();
  o.port = 0;
  o.threads = 1;
  o.api_key = "sekret-key";
  auto s = Server::Start(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE((*s)->WaitReady().ok());
  const uint16_t port = (*s)->port();

  // The page needs no key; each file is the embedded one, with its type and the CSP.
  for (const char* path :
       {"/", "/index.html", "/app.js", "/style.css", "/capture-worklet.js", "/playback-worklet.js"}) {
    const WebFile* f = WebAsset(path);
    ASSERT_NE(f, nullptr) << path;
    auto r = Raw(port, http::verb::get, path, {});
    EXPECT_EQ(r.result_int(), 200u) << path;
    EXPECT_EQ(r.body(), std::string(f->body)) << path;
    EXPECT_EQ(std::string(r[http::field::content_type]), f->content_type) << path;
    EXPECT_EQ(std::string(r["Content-Security-Policy"]), kWebCsp) << path;
    EXPECT_EQ(std::string(r["X-Content-Type-Options"]), "nosniff") << path;
  }
  EXPECT_EQ(WebAsset("/")->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(WebAsset("/app.js")->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(WebAsset("/index.html")->body.substr(0, 15), "<!doctype html>");
  for (const char* path :
       {"/../CMakeLists.txt", "/web/app.js", "/app.js/", "/%2e%2e/README.md", "//etc/passwd"}) {
    EXPECT_EQ(WebAsset(path), nullptr) << path;
    EXPECT_EQ(Raw(port, http::verb::get, path, {}).result_int(), 401u) << path << ": the API, behind the key";
    EXPECT_EQ(
        Raw(port, http::verb::get, path, {{http::field::authorization, "Bearer sekret-key"}}).result_int(),
        404u)
        << path;
  }
  EXPECT_EQ(Raw(port, http::verb::post, "/", {}).result_int(), 405u);

  // The realtime upgrade: the key as a Bearer header or (browsers) the openai-insecure-api-key subprotocol,
  // answered with `realtime`; a page from another origin is refused.
  const std::vector<std::pair<http::field, std::string>> ws = {
      {http::field::upgrade, "websocket"},
      {http::field::connection, "Upgrade"},
      {http::field::sec_websocket_version, "13"},
      {http::field::sec_websocket_key, "dGhlIHNhbXBsZSBub25jZQ=="}};
  auto with = [&](std::vector<std::pair<http::field, std::string>> extra) {
    extra.insert(extra.end(), ws.begin(), ws.end());
    return Raw(port, http::verb::get, "/v1/realtime", extra);
  };
  const std::string self = "http://127.0.0.1:" + std::to_string(port);
  auto ok = with({{http::field::sec_websocket_protocol, "realtime, openai-insecure-api-key.sekret-key"},
                  {http::field::origin, self}});
  EXPECT_EQ(ok.result_int(), 101u);
  EXPECT_EQ(std::string(ok[http::field::sec_websocket_protocol]), "realtime");
  EXPECT_EQ(with({{http::field::authorization, "Bearer sekret-key"}}).result_int(), 101u);
  EXPECT_EQ(with({{http::field::sec_websocket_protocol, "realtime, openai-insecure-api-key.sekret-ke"}})
                .result_int(),
            401u);
  EXPECT_EQ(with({{http::field::sec_websocket_protocol, "realtime"}}).result_int(), 401u);
  auto evil =
      with({{http::field::authorization, "Bearer sekret-key"}, {http::field::origin, "http://evil.example"}});
  EXPECT_EQ(evil.result_int(), 403u);
  EXPECT_EQ(json::parse(evil.body())["error"]["code"], "cross_origin");
  EXPECT_EQ(
      with({{http::field::authorization, "Bearer sekret-key"}, {http::field::origin, "null"}}).result_int(),
      403u);
  // The subprotocol key is for the upgrade only.
  EXPECT_EQ(Raw(port, http::verb::get, "/v1/models",
                {{http::field::sec_websocket_protocol, "realtime, openai-insecure-api-key.sekret-key"}})
                .result_int(),
            401u);

  EXPECT_EQ(HeaderToken("realtime, openai-insecure-api-key.k1 ,x", "openai-insecure-api-key."), "k1");
  EXPECT_EQ(HeaderToken(" realtime ", "realtime"), "");
  EXPECT_EQ(HeaderToken("realtimes", "realtime"), "s");
  EXPECT_FALSE(HeaderToken("a, b", "realtime").has_value());
  EXPECT_FALSE(HeaderToken("", "realtime").has_value());
}

// ---- request bodies: JSON within depth and value limits (request_parse.h) ----

// semantic_vad's end-of-turn test on the model's transcript of the turn so far.
TEST(ServerVad, EndsLikeASentence) {
  for (const char* yes : {"Hello there.", "Is it?", "Go!", "He said \"stop.\"", "(Done.) ", "Wait\u2026",
                          "\u597d\u3002", "\u5417\uff1f", "\u554a\uff01\n"}) {
    EXPECT_TRUE(EndsLikeASentence(yes)) << yes;
  }
  for (const char* no : {"", " ", "\n\n", "and then", "so,", "Hello there", "\"", "e.g", "3 -"}) {
    EXPECT_FALSE(EndsLikeASentence(no)) << no;
  }
}

TEST(ServerCodec, RequestJsonLimits) {
  nlohmann::json j;
  const std::string ok_depth = std::string(kMaxJsonDepth - 1, '[') + std::string(kMaxJsonDepth - 1, ']');
  EXPECT_FALSE(ParseObject("{\"a\":" + ok_depth + "}", &j).has_value());
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto e = ParseObject("{\"a\":" + deep + "}", &j);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status, 400);
  EXPECT_NE(e->message.find("deeper than 32"), std::string::npos) << e->message;
  std::string wide = "{\"a\":[0";
  for (size_t i = 0; i < kMaxJsonValues; ++i) wide += ",0";
  e = ParseObject(wide + "]}", &j);
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->message.find("more than 65536 JSON values"), std::string::npos) << e->message;
  EXPECT_EQ(ParseObject("[1]", &j)->message, "the request body must be a JSON object");
  EXPECT_EQ(ParseObject("{\"a\":", &j)->message, "the request body is not valid JSON");
  SpeechRequest r;
  EXPECT_EQ(ParseSpeechRequest(R"({"input":"hi","seed":-1})", 10, &r)->param, "seed");
  EXPECT_EQ(ParseSpeechRequest(R"({"input":"hello world"})", 10, &r)->code, "string_above_max_length");
  ASSERT_FALSE(ParseSpeechRequest(R"({"input":"hi","voice":{"id":"nova"},"seed":7})", 10, &r).has_value());
  EXPECT_EQ(r.voice, "nova");
  EXPECT_EQ(r.seed, 7u);
}

}  // namespace
}  // namespace lfmvox::server
