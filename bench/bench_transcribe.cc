// Long-form ASR's memory: transcribes one file with lfmvox::Transcribe and prints one JSON line with the
// audio length, the segments, the API's peak buffered samples and the process's peak RSS (getrusage).
// scripts/bench_long_asr.sh runs it on 5/20/60-minute espeak-ng files: the RSS should not grow with length.
//   bench_transcribe MODEL_DIR AUDIO [--max-new N] [--window S] [--max-seconds S] [--before ID,ID,...]
//   [--after ID,...]
// --before/--after: the prompt ids around the speech (for the oracle checkpoints, whose vocabulary lacks
// the official ASR prompt; see TranscribeOptions).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "lfmvox/transcribe.h"

namespace {

std::vector<int32_t> Ids(const std::string& list) {
  std::vector<int32_t> ids;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) ids.push_back(std::stoi(item));
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(
        stderr,
        "usage: bench_transcribe MODEL_DIR AUDIO [--max-new N] [--window S] [--max-seconds S] [--before IDS] "
        "[--after IDS]\n");
    return 2;
  }
  lfmvox::TranscribeOptions o;
  o.max_new_tokens = 16;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--max-new") o.max_new_tokens = std::atoi(v.c_str());
    if (a == "--window") o.window_seconds = std::atof(v.c_str());
    if (a == "--max-seconds") o.max_seconds = std::atof(v.c_str());
    if (a == "--before") o.prompt_before_speech = Ids(v);
    if (a == "--after") o.prompt_after_speech = Ids(v);
  }
  auto model = lfmvox::AudioModel::Load(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().message().c_str());
    return 1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto r = lfmvox::Transcribe(*model, argv[2], o);
  if (!r.ok()) {
    std::fprintf(stderr, "%s\n", r.status().message().c_str());
    return 1;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  nlohmann::ordered_json j = {{"bench", "transcribe"},
                              {"audio_seconds", r->seconds},
                              {"window_seconds", o.window_seconds},
                              {"segments", r->segments.size()},
                              {"peak_buffered_samples", r->peak_buffered_samples},
                              {"peak_rss_mib", static_cast<double>(ru.ru_maxrss) / 1024.0},
                              {"wall_s", wall}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
