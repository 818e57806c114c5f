// Batched sessions: N = 1, 2, 4 sessions sharing one Lfm25Worker (max_batch 4), each with its own
// short TTS prompt, all generating audio; StepSessions timed per step once every session is in the
// decode phase and sampling audio frames, at 1 and 2 threads. One JSON line per configuration:
//   {"bench":"batching","sessions":N,"threads":T,"ms_per_step":..,"frames_per_s_aggregate":..,
//    "speedup_vs_1_session":..}
// after a header line with the CPU model and the SIMD target. Frames are audio frames produced: one
// per session per audio step. ms_per_step is the median over the timed steps.
//   bench_batching [--model DIR] [--steps N]
// Generation runs in interleaved mode: sequential mode starts every turn in text, and a random model
// never samples <|audio_start|>, whereas interleaved mode switches to audio after
// interleaved_n_text text tokens by rule. A step counts as an audio step when every session produced
// exactly one audio frame in it (and no text token); the first such step (the depthformer's weights
// paging in) is not timed. Prompts are different, so the sessions' histories differ as in a server.
// Without --model it writes a real-size checkpoint to a temp folder once (2.9 GB, reused).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "models/lfm25_audio/session.h"
#include "ops/ops.h"
#include "threading/thread_team.h"
#include "tools/checkpoint_gen.h"

using namespace lfmvox;
using bench::CpuModel;
using bench::LoadAverage;
using bench::Now;

namespace {

int Fail(const Status& s) {
  std::fprintf(stderr, "%s\n", s.ToString().c_str());
  return 1;
}

// Counts what a session produced; the step loop compares counts before and after each step.
class CountingSink : public GenerationSink {
 public:
  Status OnText(int32_t) override {
    ++text;
    return Status::Ok();
  }
  Status OnAudioFrame(std::span<const int32_t>, bool end_of_audio) override {
    ++frames;
    if (end_of_audio) ++end_frames;
    return Status::Ok();
  }
  int text = 0, frames = 0, end_frames = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int steps = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--model")
      dir = argv[i + 1];
    else if (k == "--steps")
      steps = std::max(1, std::atoi(argv[i + 1]));
  }
  if (dir.empty()) {
    dir = (std::filesystem::temp_directory_path() / "lfmvox_bench_real").string();
    Status s = tools::EnsureRealSizeModel(
        dir, std::string(LFMVOX_SOURCE_DIR) + "/tests/data/tokenizer/tokenizer.json");
    if (!s.ok()) return Fail(s);
  }
  auto model = Lfm25AudioModel::Load(dir, {.load_detokenizer = false});
  if (!model.ok()) return Fail(model.status());
  const Lfm25AudioConfig& config = (*model)->config();
  // One interleaved audio slot must hold the warm-up step and the timed ones.
  steps = std::min(steps, config.interleaved_n_audio - 1);
  if (steps < 1) return Fail(InvalidArgument("the model's interleaved audio slot is too short to time"));
  std::printf(
      "{\"bench\":\"batching\",\"cpu\":\"%s\",\"simd\":\"%s\",\"online_cpus\":%ld,\"load_avg_1min\":%.2f,"
      "\"timed_steps\":%d}\n",
      CpuModel().c_str(), ops::ChosenTarget(), sysconf(_SC_NPROCESSORS_ONLN), LoadAverage(), steps);
  std::fflush(stdout);

  constexpr size_t kMaxBatch = 4;
  constexpr size_t kContext = 512;
  auto worker = Lfm25Worker::Create(**model, {.max_batch = kMaxBatch,
                                              .max_rows = 128,
                                              .max_context = kContext,
                                              .threads = 2,
                                              .max_clip_seconds = 1});
  if (!worker.ok()) return Fail(worker.status());
  std::shared_ptr<Lfm25Worker> shared = std::move(worker).value();
  const std::vector<std::string> texts = {
      "Hello, how can I help you today?",
      "The train to Boston leaves at nine.",
      "Please turn the lights off.",
      "It will rain this afternoon.",
  };
  ThreadTeam team1(1), team2(2);

  for (int threads : {1, 2}) {
    ThreadTeam& team = threads == 1 ? team1 : team2;
    double aggregate_1 = 0;
    for (size_t n : {size_t{1}, size_t{2}, size_t{4}}) {
      std::vector<std::unique_ptr<Lfm25Session>> sessions;
      std::vector<CountingSink> sinks(n);
      std::vector<Lfm25Session*> ptrs;
      GenerationOptions options;
      options.mode = GenerationMode::kInterleaved;
      options.max_new_tokens = 256;
      options.audio = SamplingParams::Lfm25TtsAudio();
      for (size_t i = 0; i < n; ++i) {
        auto s = Lfm25Session::Create(
            **model,
            {.threads = threads, .context = kContext, .prefill_chunk = 128, .seed = 1 + i, .worker = shared});
        if (!s.ok()) return Fail(s.status());
        const std::string& voice = Lfm25TtsVoices()[i % Lfm25TtsVoices().size()];
        if (Status a = (*s)->AppendTtsPrompt(voice, texts[i % texts.size()]); !a.ok()) return Fail(a);
        if (Status b = (*s)->BeginGeneration(options, sinks[i]); !b.ok()) return Fail(b);
        ptrs.push_back(s->get());
        sessions.push_back(std::move(s).value());
      }
      // Step until `steps` audio steps after the warm-up one have been timed.
      std::vector<double> times;
      int audio_steps = 0;
      for (int step = 0; step < 4 * options.max_new_tokens && static_cast<int>(times.size()) < steps;
           ++step) {
        std::vector<CountingSink> before = sinks;
        const double t0 = Now();
        if (Status st = StepSessions(ptrs, *shared, team); !st.ok()) return Fail(st);
        const double dt = Now() - t0;
        bool all_audio = true;
        for (size_t i = 0; i < n; ++i) {
          if (!sessions[i]->generating()) {
            return Fail(Internal(StrFormat("session %zu stopped after %d steps (status: %s)", i, step + 1,
                                           sessions[i]->generation_status().ToString().c_str())));
          }
          all_audio = all_audio && sinks[i].frames == before[i].frames + 1 &&
                      sinks[i].text == before[i].text && sinks[i].end_frames == before[i].end_frames;
        }
        if (!all_audio) continue;
        if (audio_steps++ > 0) times.push_back(dt);
      }
      if (static_cast<int>(times.size()) < steps) {
        return Fail(Internal(StrFormat("only %zu audio steps in a row for %zu sessions", times.size(), n)));
      }
      std::sort(times.begin(), times.end());
      const double step_s = times[times.size() / 2];
      const double aggregate = static_cast<double>(n) / step_s;
      if (n == 1) aggregate_1 = aggregate;
      std::printf(
          "{\"bench\":\"batching\",\"sessions\":%zu,\"threads\":%d,\"ms_per_step\":%.1f,"
          "\"ms_per_step_min\":%.1f,\"ms_per_step_max\":%.1f,\"frames_per_s_aggregate\":%.2f,"
          "\"speedup_vs_1_session\":%.2f}\n",
          n, threads, step_s * 1e3, times.front() * 1e3, times.back() * 1e3, aggregate,
          aggregate / aggregate_1);
      std::fflush(stdout);
    }
  }
  return 0;
}
