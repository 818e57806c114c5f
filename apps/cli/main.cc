// lfmvox command-line front end. It uses only the public API (include/lfmvox).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "lfmvox/audio_io.h"
#include "lfmvox/lfmvox.h"

namespace {

constexpr char kUsage[] =
    "usage: lfmvox <command> [options]\n"
    "\n"
    "commands:\n"
    "  detokenize  audio codes -> 24 kHz speech (LFM2.5-Audio detokenizer)\n"
    "      --model DIR      model directory (holding audio_detokenizer/) or the detokenizer folder\n"
    "      --codes FILE     codes: text, one frame of 8 integers per line, or .npy [8, T]\n"
    "      -o, --output F   WAV file to write, or - for raw little-endian PCM on stdout\n"
    "      --pcm s16|f32    sample format (default s16)\n"
    "      --threads N      threads (default: all cores)\n"
    "      --quiet          no progress line on stderr\n"
    "  help        this text\n";

int Fail(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "lfmvox: error: %s\n", msg.c_str());
  return code;
}

int UsageError(const std::string& msg) {
  std::fprintf(stderr, "lfmvox: %s\n\n%s", msg.c_str(), kUsage);
  return 2;
}

struct Args {
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> options;  // --name value
  std::vector<std::string> flags;                            // --name

  const std::string* Get(const std::string& name) const {
    for (const auto& [k, v] : options) if (k == name) return &v;
    return nullptr;
  }
  bool Has(const std::string& name) const {
    for (const auto& f : flags) if (f == name) return true;
    return false;
  }
};

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
          if (i + 1 >= argc) { *err = "option " + a + " needs a value"; return false; }
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

bool ParseInt(const std::string& s, int lo, int hi, int* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str() || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

int Detokenize(int argc, char** argv) {
  Args args;
  std::string err;
  if (!ParseArgs(argc, argv, 2, {"model", "codes", "output", "pcm", "threads"}, {"quiet"}, &args, &err)) {
    return UsageError(err);
  }
  if (!args.positional.empty()) return UsageError("unexpected argument " + args.positional[0]);
  const std::string* model_dir = args.Get("model");
  const std::string* codes_path = args.Get("codes");
  const std::string* output = args.Get("output");
  if (!model_dir || !codes_path || !output) return UsageError("detokenize needs --model, --codes and -o");
  lfmvox::PcmFormat format = lfmvox::PcmFormat::kS16;
  if (const std::string* p = args.Get("pcm")) {
    if (*p == "s16") format = lfmvox::PcmFormat::kS16;
    else if (*p == "f32") format = lfmvox::PcmFormat::kF32;
    else return UsageError("--pcm takes s16 or f32, not " + *p);
  }
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (const std::string* t = args.Get("threads")) {
    if (!ParseInt(*t, 1, 256, &threads)) return UsageError("--threads takes an integer in [1, 256]");
  }
  const bool quiet = args.Has("quiet") || *output == "-";

  auto model = lfmvox::DetokenizerModel::Load(*model_dir);
  if (!model.ok()) return Fail(model.status().message());
  auto codes = lfmvox::LoadCodes(*codes_path, (*model)->num_codebooks());
  if (!codes.ok()) return Fail(codes.status().message());
  auto stream = lfmvox::DetokenizerStream::Create(*model, {.threads = threads, .max_frames_per_call = 1});
  if (!stream.ok()) return Fail(stream.status().message());
  auto out = lfmvox::PcmOutput::Open(*output, (*model)->sample_rate(), format);
  if (!out.ok()) return Fail(out.status().message());

  const size_t cb = static_cast<size_t>((*model)->num_codebooks());
  const size_t frames = codes->size() / cb;
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
    std::fprintf(stderr, "lfmvox: %zu frames -> %zu samples (%.2f s of audio) in %.3f s, %.1fx real time -> %s\n",
                 frames, samples, audio, wall, wall > 0 ? audio / wall : 0.0, output->c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return UsageError("no command given");
  const std::string cmd = argv[1];
  if (cmd == "detokenize") return Detokenize(argc, argv);
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  return UsageError("unknown command " + cmd);
}
