// lfmvox command-line front end. It uses only the public API (include/lfmvox).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "help.h"
#include "lfmvox/audio_io.h"
#include "lfmvox/lfmvox.h"
#include "lfmvox/transcribe.h"

namespace {

// The usage text, each command's --help, --version and the man page come from one table: help.cc.

int Fail(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "lfmvox: error: %s\n", msg.c_str());
  return code;
}

// The command being run (set by main once it is known): its usage errors point to its help, as serve's do;
// without a command, the usage of every command.
const lfmvox_cli::CommandHelp* g_command = nullptr;

int UsageError(const std::string& msg) {
  if (g_command) {
    std::fprintf(stderr, "lfmvox %s: %s (the options: lfmvox %s --help)\n", g_command->name, msg.c_str(),
                 g_command->name);
  } else {
    std::fprintf(stderr, "lfmvox: %s\n\n%s", msg.c_str(), lfmvox_cli::UsageText().c_str());
  }
  return 2;
}

struct Args {
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> options;  // --name value
  std::vector<std::string> flags;                            // --name

  const std::string* Get(const std::string& name) const {
    for (const auto& [k, v] : options)
      if (k == name) return &v;
    return nullptr;
  }
  bool Has(const std::string& name) const {
    for (const auto& f : flags)
      if (f == name) return true;
    return false;
  }
};

// --weights TYPE: quantize a snapshot's float matrices at load time; --no-weight-check: skip the NaN/inf
// scan of the weights.
lfmvox::ModelOptions ModelOptionsArg(const Args& args) {
  lfmvox::ModelOptions o;
  if (const std::string* w = args.Get("weights")) o.weights = *w;
  o.check_weights = !args.Has("no-weight-check");
  return o;
}

// Splits argv into options that take a value, flags and positionals.
bool ParseArgs(int argc, char** argv, int first, const std::vector<std::string>& valued,
               const std::vector<std::string>& flag_names, Args* out, std::string* err) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-o") a = "--output";
    if (a.size() > 2 && a.rfind("--", 0) == 0) {
      std::string value;
      bool inline_value = false;
      if (size_t eq = a.find('='); eq != std::string::npos) {
        value = a.substr(eq + 1);
        a = a.substr(0, eq);
        inline_value = true;
      }
      const std::string name = a.substr(2);
      if (std::find(valued.begin(), valued.end(), name) != valued.end()) {
        if (!inline_value) {
          if (i + 1 >= argc) {
            *err = "option " + a + " needs a value";
            return false;
          }
          value = argv[++i];
        }
        out->options.emplace_back(name, value);
      } else if (std::find(flag_names.begin(), flag_names.end(), name) != flag_names.end() && !inline_value) {
        out->flags.push_back(name);
      } else {
        *err = "unknown option " + a;
        return false;
      }
    } else {
      out->positional.push_back(a);
    }
  }
  return true;
}

// --pcm s16|f32 (default s16); returns a usage error's exit code, or 0.
int PcmArg(const Args& args, lfmvox::PcmFormat* format) {
  *format = lfmvox::PcmFormat::kS16;
  if (const std::string* p = args.Get("pcm")) {
    if (*p == "f32")
      *format = lfmvox::PcmFormat::kF32;
    else if (*p != "s16")
      return UsageError("--pcm takes s16 or f32, not " + *p);
  }
  return 0;
}

bool ParseInt(const std::string& s, int lo, int hi, int* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str() || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

// --threads, default: every hardware thread.
int ThreadsArg(const Args& args, int* threads) {
  *threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (const std::string* t = args.Get("threads")) {
    if (!ParseInt(*t, 1, lfmvox::kMaxThreads, threads)) {
      return UsageError("--threads takes an integer in [1, " + std::to_string(lfmvox::kMaxThreads) + "]");
    }
  }
  return 0;
}

// ---- Progress and timings: the library reports through callbacks and StageTimings (it never prints);
// the CLI prints them.

// A progress line on stderr when it is a terminal, rewritten in place; nothing when it is not (a file, a
// pipe, a test), so logs stay clean.
class ProgressLine {
 public:
  ProgressLine() : on_(::isatty(STDERR_FILENO) == 1) {}
  ~ProgressLine() { Clear(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  void Show(const std::string& text) {
    if (!on_) return;
    std::fprintf(stderr, "\r\033[K%s", text.c_str());
    std::fflush(stderr);
    shown_ = true;
  }
  void Clear() {
    if (!shown_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  bool on_;
  bool shown_ = false;
};

lfmvox::Result<std::shared_ptr<const lfmvox::AudioModel>> LoadModel(const std::string& dir,
                                                                    const Args& args) {
  ProgressLine progress;
  progress.Show("lfmvox: loading " + dir + " ...");
  return lfmvox::AudioModel::Load(dir, ModelOptionsArg(args));
}

// --verbose: each stage's wall time, the run's wall time and its real-time factor (wall / audio seconds:
// below 1 is faster than real time). `audio_seconds` is the input for asr, the speech made otherwise.
void PrintTimings(const lfmvox::StageTimings& t, double wall_seconds, double audio_seconds) {
  std::fprintf(stderr, "lfmvox: stage encoder %.3f ms\n", t.encoder_ms);
  std::fprintf(stderr, "lfmvox: stage prefill %.3f ms (%d positions)\n", t.prefill_ms, t.prefill_positions);
  std::fprintf(stderr, "lfmvox: stage backbone_step %.3f ms (%d steps)\n", t.backbone_step_ms,
               t.backbone_steps);
  std::fprintf(stderr, "lfmvox: stage depth_head %.3f ms (%d frames)\n", t.depth_ms, t.depth_frames);
  std::fprintf(stderr, "lfmvox: stage detokenizer %.3f ms\n", t.detokenizer_ms);
  std::fprintf(stderr, "lfmvox: wall %.3f ms (stages %.3f ms), audio %.3f s, real-time factor ",
               wall_seconds * 1e3, t.total_ms(), audio_seconds);
  if (audio_seconds > 0) {
    std::fprintf(stderr, "%.4f\n", wall_seconds / audio_seconds);
  } else {
    std::fprintf(stderr, "n/a (no audio)\n");
  }
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int Detokenize(int argc, char** argv) {
  Args args;
  std::string err;
  if (!ParseArgs(argc, argv, 2, {"model", "codes", "output", "pcm", "threads"}, {"quiet", "no-weight-check"},
                 &args, &err)) {
    return UsageError(err);
  }
  if (!args.positional.empty()) return UsageError("unexpected argument " + args.positional[0]);
  const std::string* model_dir = args.Get("model");
  const std::string* codes_path = args.Get("codes");
  const std::string* output = args.Get("output");
  if (!model_dir || !codes_path || !output) return UsageError("detokenize needs --model, --codes and -o");
  lfmvox::PcmFormat format;
  if (int rc = PcmArg(args, &format)) return rc;
  int threads = 1;
  if (int rc = ThreadsArg(args, &threads)) return rc;
  const bool quiet = args.Has("quiet") || *output == "-";

  auto model = lfmvox::DetokenizerModel::Load(*model_dir, ModelOptionsArg(args));
  if (!model.ok()) return Fail(model.status().message());
  auto codes = lfmvox::LoadCodes(*codes_path, (*model)->num_codebooks());
  if (!codes.ok()) return Fail(codes.status().message());
  const size_t cb = static_cast<size_t>((*model)->num_codebooks());
  const size_t frames = codes->size() / cb;
  // Every code is checked before the output is opened (all or nothing): a bad code on the last line
  // leaves no file behind.
  const int32_t size = (*model)->codebook_size();
  for (size_t i = 0; i < codes->size(); ++i) {
    const int32_t c = (*codes)[i];
    if (c < 0 || c >= size) {
      return Fail(*codes_path + ": frame " + std::to_string(i / cb + 1) + " (line " +
                  std::to_string(i / cb + 1) + " of a text file), code " + std::to_string(i % cb + 1) +
                  " is " + std::to_string(c) + ", outside [0, " + std::to_string(size) +
                  "); nothing was written");
    }
  }
  auto stream = lfmvox::DetokenizerStream::Create(*model, {.threads = threads, .max_frames_per_call = 1});
  if (!stream.ok()) return Fail(stream.status().message());
  auto out = lfmvox::PcmOutput::Open(*output, (*model)->sample_rate(), format);
  if (!out.ok()) return Fail(out.status().message());

  std::vector<float> pcm(static_cast<size_t>((*model)->samples_per_frame()));
  size_t samples = 0;
  const auto t0 = std::chrono::steady_clock::now();
  // Frame by frame, as a live stream would arrive: each chunk is written as soon as it is decoded.
  for (size_t f = 0; f < frames; ++f) {
    auto n = (*stream)->Push({codes->data() + f * cb, cb}, pcm);
    if (!n.ok()) return Fail(n.status().message());
    if (lfmvox::Status s = (*out)->Write({pcm.data(), *n}); !s.ok()) return Fail(s.message());
    samples += *n;
  }
  auto n = (*stream)->Flush(pcm);
  if (!n.ok()) return Fail(n.status().message());
  if (lfmvox::Status s = (*out)->Write({pcm.data(), *n}); !s.ok()) return Fail(s.message());
  if (lfmvox::Status s = (*out)->Close(); !s.ok()) return Fail(s.message());
  samples += *n;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!quiet) {
    const double audio = static_cast<double>(samples) / (*model)->sample_rate();
    std::fprintf(stderr,
                 "lfmvox: %zu frames -> %zu samples (%.2f s of audio) in %.3f s, %.1fx real time -> %s\n",
                 frames, samples, audio, wall, wall > 0 ? audio / wall : 0.0, output->c_str());
  }
  return 0;
}

bool ParseFloat(const std::string& s, float lo, float hi, float* out) {
  char* end = nullptr;
  errno = 0;
  const float v = std::strtof(s.c_str(), &end);
  if (errno != 0 || end == s.c_str() || *end != '\0' || !(v >= lo && v <= hi)) return false;
  *out = v;
  return true;
}

// Digits only (strtoull alone takes "-1" as 2^64 - 1 and saturates on overflow).
bool ParseU64(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 20 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

// --seed, --temperature/--top-k (audio) and --text-temperature/--text-top-k.
// Returns a usage error message, or "" when fine.
std::string ParseSampling(const Args& args, lfmvox::GenerateOptions* o, uint64_t* seed) {
  if (const std::string* v = args.Get("seed"); v && !ParseU64(*v, seed)) {
    return "--seed takes an integer in [0, 18446744073709551615], not " + *v;
  }
  if (const std::string* v = args.Get("temperature"); v && !ParseFloat(*v, 0, 100, &o->audio.temperature)) {
    return "--temperature takes a number in [0, 100]";
  }
  if (const std::string* v = args.Get("top-k"); v && !ParseInt(*v, 0, 1 << 20, &o->audio.top_k)) {
    return "--top-k takes a non-negative integer";
  }
  if (const std::string* v = args.Get("text-temperature");
      v && !ParseFloat(*v, 0, 100, &o->text.temperature)) {
    return "--text-temperature takes a number in [0, 100]";
  }
  if (const std::string* v = args.Get("text-top-k"); v && !ParseInt(*v, 0, 1 << 20, &o->text.top_k)) {
    return "--text-top-k takes a non-negative integer";
  }
  return "";
}

// Sampling values marked unset (-1), for ParseSampling to fill before the model (and its presets) loads.
lfmvox::GenerateOptions UnsetSampling() {
  lfmvox::GenerateOptions o;
  o.text = o.audio = {-1.0f, -1};
  return o;
}

// Copies the sampling values the flags set (those not left at -1) over a preset.
void OverrideSampling(const lfmvox::GenerateOptions& flags, lfmvox::GenerateOptions* o) {
  if (flags.audio.temperature >= 0) o->audio.temperature = flags.audio.temperature;
  if (flags.audio.top_k >= 0) o->audio.top_k = flags.audio.top_k;
  if (flags.text.temperature >= 0) o->text.temperature = flags.text.temperature;
  if (flags.text.top_k >= 0) o->text.top_k = flags.text.top_k;
}

// Runs one generation with PCM going to `output` (when given) and returns the exit code.
int RunGeneration(lfmvox::Conversation& conv, const lfmvox::AudioModel& model,
                  const lfmvox::GenerateOptions& o, const std::string* output, lfmvox::PcmFormat format,
                  bool print_items, bool quiet, bool verbose) {
  std::unique_ptr<lfmvox::PcmOutput> out;
  if (output) {
    auto r = lfmvox::PcmOutput::Open(*output, model.sample_rate(), format);
    if (!r.ok()) return Fail(r.status().message());
    out = std::move(r).value();
  }
  lfmvox::OutputCallbacks cb;
  if (print_items) {
    cb.on_text = [](int32_t id, std::string_view piece) {
      nlohmann::ordered_json j = {{"text", id}, {"piece", std::string(piece)}};
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
      std::fflush(stdout);
      return lfmvox::Status::Ok();
    };
    cb.on_audio_frame = [](std::span<const int32_t> codes, bool) {
      nlohmann::json j = {{"audio", std::vector<int32_t>(codes.begin(), codes.end())}};
      std::printf("%s\n", j.dump().c_str());
      std::fflush(stdout);
      return lfmvox::Status::Ok();
    };
  }
  if (out) cb.on_pcm = [&](std::span<const float> pcm) { return out->Write(pcm); };
  const auto t0 = std::chrono::steady_clock::now();
  auto r = conv.Generate(o, cb);
  if (!r.ok()) return Fail(r.status().message());
  if (out) {
    if (lfmvox::Status s = out->Close(); !s.ok()) return Fail(s.message());
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!quiet) {
    const double audio = static_cast<double>(r->pcm_samples) / model.sample_rate();
    std::fprintf(stderr, "lfmvox: %d text tokens, %d audio frames, %.2f s of speech in %.2f s%s%s\n",
                 r->text_tokens, r->audio_frames, audio, wall,
                 r->ended ? "" : " (budget reached before the end)",
                 r->context_full ? " (context full)" : "");
  }
  if (verbose) PrintTimings(r->timings, wall, static_cast<double>(r->pcm_samples) / model.sample_rate());
  return 0;
}

// Reads a text file whole (`-`: stdin), up to 256 MiB.
int ReadTextInput(const std::string& path, std::string* text) {
  constexpr size_t kMax = size_t{256} << 20;
  std::FILE* f = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Fail("cannot open " + path + ": " + std::strerror(errno));
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && text->size() <= kMax) text->append(buf, n);
  const bool bad = std::ferror(f) != 0;
  if (f != stdin) std::fclose(f);
  if (bad) return Fail("cannot read " + path);
  if (text->size() > kMax) return Fail(path + " is over 256 MiB of text; split it");
  return 0;
}

// Long-form TTS (lfmvox::SpeakText): sentence by sentence into one stream.
int RunSpeak(lfmvox::Conversation& conv, const lfmvox::AudioModel& model, const std::string& voice,
             const std::string& text, const lfmvox::GenerateOptions& o, const std::string& output,
             lfmvox::PcmFormat format, bool quiet, bool verbose) {
  auto out = lfmvox::PcmOutput::Open(output, model.sample_rate(), format);
  if (!out.ok()) return Fail(out.status().message());
  lfmvox::OutputCallbacks cb;
  cb.on_pcm = [&](std::span<const float> pcm) { return (*out)->Write(pcm); };
  ProgressLine progress;
  lfmvox::SpeakOptions speak;
  speak.on_progress = [&progress](size_t done, size_t total) {
    progress.Show("lfmvox: spoke " + std::to_string(done) + " of " + std::to_string(total) + " sentences");
  };
  const auto t0 = std::chrono::steady_clock::now();
  auto r = lfmvox::SpeakText(conv, voice, text, o, cb, speak);
  progress.Clear();
  if (!r.ok()) return Fail(r.status().message());
  if (lfmvox::Status s = (*out)->Close(); !s.ok()) return Fail(s.message());
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!quiet) {
    std::fprintf(stderr, "lfmvox: %zu sentences, %.2f s of speech in %.2f s%s\n", r->segments,
                 static_cast<double>(r->pcm_samples) / model.sample_rate(), wall,
                 r->unfinished_segments ? " (some sentences reached the budget before their end)" : "");
  }
  if (verbose) PrintTimings(r->timings, wall, static_cast<double>(r->pcm_samples) / model.sample_rate());
  return 0;
}

int Tts(int argc, char** argv) {
  Args args;
  std::string err;
  if (!ParseArgs(argc, argv, 2,
                 {"model", "voice", "output", "pcm", "threads", "seed", "temperature", "top-k", "max-new",
                  "context", "weights", "file"},
                 {"quiet", "no-weight-check", "verbose"}, &args, &err)) {
    return UsageError(err);
  }
  const std::string* model_dir = args.Get("model");
  const std::string* output = args.Get("output");
  const std::string* file = args.Get("file");
  if (!model_dir || !output || args.positional.size() != (file ? 0u : 1u)) {
    return UsageError("tts needs --model, -o and the text as one argument (or --file FILE)");
  }
  std::string long_text;  // --file: read whole before the model loads, so a bad path fails fast
  if (file) {
    if (int rc = ReadTextInput(*file, &long_text)) return rc;
  }
  lfmvox::PcmFormat format;
  if (int rc = PcmArg(args, &format)) return rc;
  lfmvox::GenerateOptions flags = UnsetSampling();
  uint64_t seed = 0;
  if (std::string e = ParseSampling(args, &flags, &seed); !e.empty()) return UsageError(e);
  int max_new = 0;
  if (const std::string* v = args.Get("max-new"); v && !ParseInt(*v, 1, 1 << 20, &max_new)) {
    return UsageError("--max-new takes a positive integer");
  }
  int threads;
  if (int rc = ThreadsArg(args, &threads)) return rc;
  int context = 4096;
  if (const std::string* v = args.Get("context"); v && !ParseInt(*v, 1, 1 << 20, &context)) {
    return UsageError("--context takes a positive integer");
  }

  auto model = LoadModel(*model_dir, args);
  if (!model.ok()) return Fail(model.status().message());
  lfmvox::GenerateOptions o = lfmvox::GenerateOptions::ForTts(**model);
  OverrideSampling(flags, &o);
  if (max_new > 0) o.max_new_tokens = max_new;
  const std::string voice = args.Get("voice") ? *args.Get("voice") : (*model)->default_voice();
  auto conv = lfmvox::Conversation::Create(
      *model, {.threads = threads, .context = static_cast<size_t>(context), .seed = seed});
  if (!conv.ok()) return Fail(conv.status().message());
  const bool quiet = args.Has("quiet") || *output == "-";
  const bool verbose = args.Has("verbose");
  if (file) return RunSpeak(**conv, **model, voice, long_text, o, *output, format, quiet, verbose);
  if (lfmvox::Status s = (*conv)->StartSpeech(voice, args.positional[0]); !s.ok()) return Fail(s.message());
  return RunGeneration(**conv, **model, o, output, format, false, quiet, verbose);
}

int Generate(int argc, char** argv) {
  Args args;
  std::string err;
  if (!ParseArgs(argc, argv, 2,
                 {"model", "prompt", "mode", "max-new", "seed", "temperature", "top-k", "text-temperature",
                  "text-top-k", "output", "pcm", "threads", "context", "weights"},
                 {"quiet", "no-weight-check", "verbose"}, &args, &err)) {
    return UsageError(err);
  }
  const std::string* model_dir = args.Get("model");
  const std::string* prompt = args.Get("prompt");
  if (!model_dir || !prompt || !args.positional.empty())
    return UsageError("generate needs --model and --prompt");
  lfmvox::GenerateOptions o;  // greedy unless a sampling flag says otherwise
  if (const std::string* m = args.Get("mode")) {
    if (*m == "interleaved")
      o.mode = lfmvox::GenerationMode::kInterleaved;
    else if (*m != "sequential")
      return UsageError("--mode takes sequential or interleaved");
  }
  if (const std::string* v = args.Get("max-new"); v && !ParseInt(*v, 0, 1 << 20, &o.max_new_tokens)) {
    return UsageError("--max-new takes a non-negative integer");
  }
  uint64_t seed = 0;
  if (std::string e = ParseSampling(args, &o, &seed); !e.empty()) return UsageError(e);
  int threads;
  if (int rc = ThreadsArg(args, &threads)) return rc;
  int context = 4096;
  if (const std::string* v = args.Get("context"); v && !ParseInt(*v, 1, 1 << 20, &context)) {
    return UsageError("--context takes a positive integer");
  }
  lfmvox::PcmFormat format;
  if (int rc = PcmArg(args, &format)) return rc;
  const std::string* output = args.Get("output");
  if (output && *output == "-") return UsageError("generate prints items on stdout; write speech to a file");

  auto model = LoadModel(*model_dir, args);
  if (!model.ok()) return Fail(model.status().message());
  auto conv = lfmvox::Conversation::Create(
      *model, {.threads = threads, .context = static_cast<size_t>(context), .seed = seed});
  if (!conv.ok()) return Fail(conv.status().message());
  if (lfmvox::Status s = (*conv)->AddPromptFile(*prompt); !s.ok()) return Fail(s.message());
  return RunGeneration(**conv, **model, o, output, format, true, args.Has("quiet"), args.Has("verbose"));
}

// Prints text pieces as they stream, leaving out control tokens.
lfmvox::OutputCallbacks PrintText(const lfmvox::AudioModel& model) {
  lfmvox::OutputCallbacks cb;
  cb.on_text = [&model](int32_t id, std::string_view piece) {
    if (!model.IsSpecialToken(id)) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    return lfmvox::Status::Ok();
  };
  return cb;
}

int Quantize(int argc, char** argv) {
  Args args;
  std::string err;
  if (!ParseArgs(argc, argv, 2, {"model", "type", "out", "keep-f32"}, {}, &args, &err))
    return UsageError(err);
  const std::string *model_dir = args.Get("model"), *type = args.Get("type"), *out = args.Get("out");
  if (!model_dir || !type || !out || !args.positional.empty())
    return UsageError("quantize needs --model DIR --type f16|q8_0|q4_0 --out OUTDIR");
  std::vector<std::string> keep;
  if (const std::string* k = args.Get("keep-f32")) {
    for (size_t at = 0; at <= k->size();) {
      const size_t comma = std::min(k->find(',', at), k->size());
      if (comma > at) keep.push_back(k->substr(at, comma - at));
      at = comma + 1;
    }
  }
  auto r = lfmvox::QuantizeModel(*model_dir, *out, *type, keep);
  if (!r.ok()) return Fail(r.status().message());
  for (const std::string& f : r->files) std::printf("%s\n", f.c_str());
  return 0;
}

int Asr(int argc, char** argv) {
  Args args;
  std::string err;
  if (!ParseArgs(argc, argv, 2, {"model", "max-new", "threads", "weights", "format", "max-seconds", "window"},
                 {"no-weight-check", "verbose", "words"}, &args, &err))
    return UsageError(err);
  const std::string* model_dir = args.Get("model");
  if (!model_dir || args.positional.size() != 1) return UsageError("asr needs --model and one audio file");
  lfmvox::TranscribeOptions t;
  t.word_timestamps = args.Has("words");
  if (int rc = ThreadsArg(args, &t.threads)) return rc;
  if (const std::string* v = args.Get("max-new"); v && !ParseInt(*v, 1, 1 << 20, &t.max_new_tokens)) {
    return UsageError("--max-new takes a positive integer");
  }
  lfmvox::TranscriptFormat format = lfmvox::TranscriptFormat::kText;
  if (t.word_timestamps && !args.Get("format")) format = lfmvox::TranscriptFormat::kJson;
  if (const std::string* f = args.Get("format")) {
    if (*f == "json")
      format = lfmvox::TranscriptFormat::kJson;
    else if (*f == "srt")
      format = lfmvox::TranscriptFormat::kSrt;
    else if (*f == "vtt")
      format = lfmvox::TranscriptFormat::kVtt;
    else if (*f != "text")
      return UsageError("--format takes text, json, srt or vtt, not " + *f);
  }
  float seconds = 0;
  if (const std::string* v = args.Get("max-seconds")) {
    if (!ParseFloat(*v, 0.001f, 1e7f, &seconds)) return UsageError("--max-seconds takes a positive number");
    t.max_seconds = seconds;
  }
  if (const std::string* v = args.Get("window")) {
    if (!ParseFloat(*v, 6, 3600, &seconds))
      return UsageError("--window takes a number of seconds in [6, 3600]");
    t.window_seconds = seconds;
  }
  auto model = LoadModel(*model_dir, args);
  if (!model.ok()) return Fail(model.status().message());
  // Text goes out segment by segment as each window is done; the other formats once at the end.
  auto on_segment = [&](const lfmvox::TranscriptSegment& s) {
    if (format == lfmvox::TranscriptFormat::kText) {
      std::fputs(lfmvox::FormatTranscript({&s, 1}, format).c_str(), stdout);
      std::fflush(stdout);
    }
    return lfmvox::Status::Ok();
  };
  ProgressLine progress;
  t.on_progress = [&progress](double done, double total) {
    char line[128];
    if (total > 0) {
      std::snprintf(line, sizeof line, "lfmvox: transcribed %.1f of %.1f s (%.0f%%)", done, total,
                    100.0 * std::min(1.0, done / total));
    } else {
      std::snprintf(line, sizeof line, "lfmvox: transcribed %.1f s", done);
    }
    progress.Show(line);
  };
  // The text lines clear the progress line before they print, so the two never share a line.
  auto print_segment = [&](const lfmvox::TranscriptSegment& s) {
    progress.Clear();
    return on_segment(s);
  };
  const auto t0 = std::chrono::steady_clock::now();
  auto r = lfmvox::Transcribe(*model, args.positional[0], t, print_segment);
  const double wall = SecondsSince(t0);
  progress.Clear();
  if (!r.ok()) return Fail(r.status().message());
  if (format != lfmvox::TranscriptFormat::kText)
    std::fputs(lfmvox::FormatTranscript(r->segments, format, t.word_timestamps).c_str(), stdout);
  if (args.Has("verbose")) PrintTimings(r->timings, wall, r->seconds);
  return 0;
}

int Chat(int argc, char** argv) {
  Args args;
  std::string err;
  if (!ParseArgs(argc, argv, 2,
                 {"model", "in", "out", "out-dir", "system", "seed", "temperature", "top-k", "max-new",
                  "context", "threads", "pcm", "weights", "context-policy"},
                 {"interactive", "no-weight-check", "verbose"}, &args, &err)) {
    return UsageError(err);
  }
  const std::string* model_dir = args.Get("model");
  const bool interactive = args.Has("interactive");
  if (!model_dir || !args.positional.empty()) return UsageError("chat needs --model");
  if (!interactive && (!args.Get("in") || !args.Get("out"))) {
    return UsageError("chat needs --in and --out, or --interactive --out-dir DIR");
  }
  if (interactive && !args.Get("out-dir")) return UsageError("chat --interactive needs --out-dir DIR");
  // Sampling flags are checked before the model loads; the preset fills what they leave.
  lfmvox::GenerateOptions flags = UnsetSampling();
  uint64_t seed = 0;
  if (std::string e = ParseSampling(args, &flags, &seed); !e.empty()) return UsageError(e);
  int max_new = 0;
  if (const std::string* v = args.Get("max-new"); v && !ParseInt(*v, 1, 1 << 20, &max_new)) {
    return UsageError("--max-new takes a positive integer");
  }
  int threads, context = 4096;
  if (int rc = ThreadsArg(args, &threads)) return rc;
  if (const std::string* v = args.Get("context"); v && !ParseInt(*v, 16, 1 << 20, &context)) {
    return UsageError("--context takes an integer >= 16");
  }
  lfmvox::PcmFormat format;
  if (int rc = PcmArg(args, &format)) return rc;
  const std::string system = args.Get("system") ? *args.Get("system") : "";
  // An interactive chat runs on (the oldest turns give way); one question stops at a full context.
  lfmvox::ContextPolicy policy =
      interactive ? lfmvox::ContextPolicy::kDropOldest : lfmvox::ContextPolicy::kStop;
  if (const std::string* v = args.Get("context-policy")) {
    if (*v == "stop") {
      policy = lfmvox::ContextPolicy::kStop;
    } else if (*v == "drop_oldest") {
      policy = lfmvox::ContextPolicy::kDropOldest;
    } else {
      return UsageError("--context-policy takes stop or drop_oldest");
    }
  }

  auto model = LoadModel(*model_dir, args);
  if (!model.ok()) return Fail(model.status().message());
  lfmvox::GenerateOptions o = lfmvox::GenerateOptions::ForSpeechToSpeech(**model);
  OverrideSampling(flags, &o);
  if (max_new > 0) o.max_new_tokens = max_new;
  // drop_oldest is LFM2.5-Audio's (and LFM2-Audio's); an LFM3-Audio chat keeps the stop policy unless told
  // otherwise.
  if (!args.Get("context-policy") && (*model)->family() == "LFM3-Audio")
    policy = lfmvox::ContextPolicy::kStop;
  auto conv = lfmvox::Conversation::Create(
      *model,
      {.threads = threads, .context = static_cast<size_t>(context), .context_policy = policy, .seed = seed});
  if (!conv.ok()) return Fail(conv.status().message());
  lfmvox::Conversation& c = **conv;
  if (lfmvox::Status s = c.StartChat(system); !s.ok()) return Fail(s.message());
  // The user's turn (opened by the caller) given its audio file or text, the assistant's answer, the turn
  // closed.
  auto turn = [&](const std::string& input, bool is_audio, const std::string& out_path) -> int {
    const auto t0 = std::chrono::steady_clock::now();
    lfmvox::Status s = is_audio ? c.AddAudioFile(input) : c.AddText(input);
    if (s.ok()) s = c.EndTurn();
    if (s.ok()) s = c.StartTurn("assistant");
    if (!s.ok()) return Fail(s.message());
    auto out = lfmvox::PcmOutput::Open(out_path, (*model)->sample_rate(), format);
    if (!out.ok()) return Fail(out.status().message());
    lfmvox::OutputCallbacks cb = PrintText(**model);
    if (out_path == "-") cb.on_text = nullptr;  // stdout carries the PCM
    cb.on_pcm = [&](std::span<const float> pcm) { return (*out)->Write(pcm); };
    auto r = c.Generate(o, cb);
    if (out_path != "-") std::printf("\n");
    if (!r.ok()) return Fail(r.status().message());
    if (lfmvox::Status cs = (*out)->Close(); !cs.ok()) return Fail(cs.message());
    if (args.Has("verbose")) {
      PrintTimings(r->timings, SecondsSince(t0),
                   static_cast<double>(r->pcm_samples) / (*model)->sample_rate());
    }
    if (r->context_full) return Fail("the context is full; start a new conversation (or raise --context)");
    if (lfmvox::Status es = c.EndTurn(); !es.ok()) return Fail(es.message());
    return 0;
  };
  if (!interactive) {
    if (lfmvox::Status s = c.StartTurn("user"); !s.ok()) return Fail(s.message());
    return turn(*args.Get("in"), true, *args.Get("out"));
  }
  std::string line;
  int n = 0;
  std::fprintf(stderr, "lfmvox chat: one turn per line (an audio file path, or text); end with Ctrl-D\n");
  for (bool opened = false;;) {
    // While the user is still thinking: the next user turn opened and everything before it (the system
    // prompt, the last reply) run through the backbone, so the answer starts sooner.
    if (!opened) {
      lfmvox::Status s = c.StartTurn("user");
      if (s.ok()) s = c.Prefill();
      if (!s.ok()) return Fail(s.message());
      opened = true;
    }
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    std::error_code ec;
    const bool is_audio = std::filesystem::is_regular_file(line, ec);
    const std::string out_path = *args.Get("out-dir") + "/reply_" + std::to_string(++n) + ".wav";
    if (int rc = turn(line, is_audio, out_path)) return rc;
    opened = false;
    std::fprintf(stderr, "[reply %d -> %s]\n", n, out_path.c_str());
  }
  return 0;
}

// `serve` is the server's own executable, lfmvox-server, installed beside this one (apps/server): the CLI
// links none of the server's libraries (Boost.Beast, WebRTC's VAD, SoundTouch) and builds in a fraction
// of the time. The options pass through unchanged; the server's exit status is this command's.
int Serve(int argc, char** argv) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return Fail("cannot find this executable's folder (/proc/self/exe: " + ec.message() + ")");
  const std::string server = (self.parent_path() / "lfmvox-server").string();
  std::vector<char*> args = {const_cast<char*>(server.c_str())};
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(server.c_str(), args.data());
  const int err = errno;
  if (err == ENOENT)
    return Fail("the server is not built: " + server +
                " is missing (scripts/build.sh builds it; scripts/run.sh builds the CLI alone)");
  return Fail("cannot run " + server + ": " + std::strerror(err));
}

}  // namespace

int main(int argc, char** argv) {
  // A closed pipe on `-o -` becomes a write error with a message, not a silent kill.
  std::signal(SIGPIPE, SIG_IGN);
  if (argc < 2) return UsageError("no command given");
  const std::string cmd = argv[1];
  if (cmd == "--version" || cmd == "version") {
    std::printf("%s\n", lfmvox_cli::VersionText().c_str());
    return 0;
  }
  if (cmd == "--man") {
    std::fputs(lfmvox_cli::ManPage().c_str(), stdout);
    return 0;
  }
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    if (argc < 3) {
      std::fputs(lfmvox_cli::UsageText().c_str(), stdout);
      return 0;
    }
    const lfmvox_cli::CommandHelp* c = lfmvox_cli::FindCommand(argv[2]);
    if (!c) return UsageError(std::string("no command ") + argv[2]);
    std::fputs(lfmvox_cli::CommandHelpText(*c).c_str(), stdout);
    return 0;
  }
  // `lfmvox CMD --help` (or -h anywhere after the command): that command's help, nothing run.
  if (const lfmvox_cli::CommandHelp* c = lfmvox_cli::FindCommand(cmd)) {
    g_command = c;
    for (int i = 2; i < argc; ++i) {
      if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
        std::fputs(lfmvox_cli::CommandHelpText(*c).c_str(), stdout);
        return 0;
      }
    }
  }
  if (cmd == "detokenize") return Detokenize(argc, argv);
  if (cmd == "tts") return Tts(argc, argv);
  if (cmd == "generate") return Generate(argc, argv);
  if (cmd == "asr") return Asr(argc, argv);
  if (cmd == "chat") return Chat(argc, argv);
  if (cmd == "quantize") return Quantize(argc, argv);
  if (cmd == "serve") return Serve(argc, argv);
  return UsageError("unknown command " + cmd);
}
