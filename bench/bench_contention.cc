// Threads under contention: each stage at 1 and 2 threads, alone and next to
// a competing busy process (a forked child spinning on one core), one JSON
// line per configuration. On a 2-core machine with one core held by the
// competitor, 2 threads should never be slower than 1 (ratio_vs_1thread ≤ 1).
//   bench_contention [--model DIR] [--reps N] [--warmup N] [--adaptive 0|1|ab]
// Stages: backbone decode step (AppendTokens 1 + Prefill + TextLogits),
// depthformer frame (SampleAudioFrame), detokenizer frame (one 80 ms frame
// streamed), and a bf16 MatMul [2048, 8192] · x (kernel only). Each figure is
// the median of N timed repeats after `warmup` untimed ones (default 12:
// enough for the stages' AdaptiveMode, threading/stage_policy.h, to probe
// both modes), the configurations' calls interleaved. --adaptive 0 switches
// that policy off; ab runs 2 threads both ways, side by side (each line then
// says which).
// Without --model it writes a real-size checkpoint to a temp folder once.
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "models/lfm25_audio/detokenizer.h"
#include "models/lfm25_audio/session.h"
#include "ops/ops.h"
#include "threading/stage_policy.h"
#include "threading/thread_team.h"
#include "tools/checkpoint_gen.h"

using namespace lfmvox;
using bench::CpuModel;
using bench::LoadAverage;
using bench::Now;

namespace {

// A busy child process: a tight loop on the last CPU this process may use,
// so one core is held by someone else while the stage runs.
class Competitor {
 public:
  Competitor() {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    int last = -1;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
      for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &allowed)) last = c;
      }
    }
    pid_ = fork();
    if (pid_ == 0) {
      if (last >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(last, &one);
        sched_setaffinity(0, sizeof(one), &one);
      }
      volatile uint64_t x = 0;
      for (;;) x = x + 1;
    }
    usleep(20000);  // let it start and settle on its core
  }
  ~Competitor() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Competitor(const Competitor&) = delete;
  Competitor& operator=(const Competitor&) = delete;

 private:
  pid_t pid_ = -1;
};

// One way to run a stage: team size, and whether its AdaptiveMode may choose.
struct Config {
  int threads;
  bool adaptive;
};

// Median seconds of one call of run(config) for each config: `warmup` untimed
// and then `reps` timed calls each, interleaved round-robin, so that load that
// comes and goes (other processes) falls on every config alike. Each timed
// call follows an untimed one of the same config, so that it finds the team as
// that config leaves it (workers awake or asleep), not as the previous did.
std::vector<double> InterleavedMedians(int warmup, int reps, const std::vector<Config>& configs,
                                       const std::function<void(const Config&)>& run) {
  auto call = [&](const Config& c) {
    StageTimer::set_enabled(c.adaptive);
    run(c);
  };
  for (int i = 0; i < warmup; ++i) {
    for (const Config& c : configs) call(c);
  }
  std::vector<std::vector<double>> t(configs.size());
  for (int r = 0; r < reps; ++r) {
    for (size_t i = 0; i < configs.size(); ++i) {
      call(configs[i]);
      const double t0 = Now();
      run(configs[i]);
      t[i].push_back(Now() - t0);
    }
  }
  std::vector<double> med;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    med.push_back(v[v.size() / 2]);
  }
  return med;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "%s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int reps = 9, warmup = 12;
  std::string adaptive = "1";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--model")
      dir = argv[i + 1];
    else if (k == "--reps")
      reps = std::max(1, std::atoi(argv[i + 1]));
    else if (k == "--warmup")
      warmup = std::max(1, std::atoi(argv[i + 1]));
    else if (k == "--adaptive")
      adaptive = argv[i + 1];
  }
  if (dir.empty()) {
    dir = (std::filesystem::temp_directory_path() / "lfmvox_bench_real").string();
    Status s = tools::EnsureRealSizeModel(
        dir, std::string(LFMVOX_SOURCE_DIR) + "/tests/data/tokenizer/tokenizer.json");
    if (!s.ok()) return Fail(s);
  }
  std::vector<Config> configs = {{1, true}};
  if (adaptive != "1") configs.push_back({2, false});
  if (adaptive != "0") configs.push_back({2, true});
  auto model = Lfm25AudioModel::Load(dir);
  if (!model.ok()) return Fail(model.status());
  const Lfm2Backbone& bb = (*model)->backbone();
  const Lfm25Detokenizer* detok = (*model)->detokenizer();
  if (detok == nullptr) return Fail(NotFound("the model has no audio_detokenizer/"));
  std::printf(
      "{\"cpu\":\"%s\",\"simd\":\"%s\",\"online_cpus\":%ld,\"reps\":%d,\"warmup\":%d,"
      "\"adaptive\":\"%s\"}\n",
      CpuModel().c_str(), ops::ChosenTarget(), sysconf(_SC_NPROCESSORS_ONLN), reps, warmup, adaptive.c_str());
  std::fflush(stdout);

  // The teams, as an engine would hold them: created once, shared by stages.
  ThreadTeam team1(1), team2(2);
  // With --adaptive ab the 2-thread runs without the stage policy get their own team, so that
  // neither inherits the other's fallback state (ThreadTeam's own inline back-off).
  ThreadTeam team2_off(2);
  auto team_for = [&](int threads) -> ThreadTeam& {
    return threads == 1 ? team1 : StageTimer::enabled() ? team2 : team2_off;
  };

  // Per-thread-count state for each stage, created before any timing.
  struct StageState {
    std::unique_ptr<Lfm25Session> session;
    std::optional<DepthformerScratch> depth;
    std::unique_ptr<Lfm25DetokenizerSession> detok;
  };
  StageState st[2];
  std::vector<int32_t> prompt(16);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(1000 + (i * 7919) % 50000);
  for (int threads : {1, 2}) {
    StageState& s = st[threads - 1];
    auto session = Lfm25Session::Create(**model, {.threads = threads, .context = 2048, .prefill_chunk = 16});
    if (!session.ok()) return Fail(session.status());
    s.session = std::move(*session);
    if (Status a = s.session->AppendTokens(prompt); !a.ok()) return Fail(a);
    if (auto h = s.session->Prefill(team_for(threads)); !h.ok()) return Fail(h.status());
    auto depth = DepthformerScratch::Create((*model)->depthformer(), 1, threads);
    if (!depth.ok()) return Fail(depth.status());
    s.depth.emplace(std::move(*depth));
    auto ds = Lfm25DetokenizerSession::Create(*detok, 1, threads);
    if (!ds.ok()) return Fail(ds.status());
    s.detok = std::move(*ds);
  }

  std::vector<float> logits(static_cast<size_t>(bb.vocab()));
  std::vector<float> hidden(static_cast<size_t>((*model)->config().lfm.hidden_size), 0.1f);
  auto sampler = Sampler::Create(SamplingParams::Lfm25TtsAudio(), static_cast<size_t>(bb.audio_vocab()));
  if (!sampler.ok()) return Fail(sampler.status());
  Rng rng(1);
  std::vector<int32_t> codes(static_cast<size_t>((*model)->config().codebooks));
  const Lfm25DetokenizerConfig& dc = detok->config();
  std::vector<int32_t> frame_codes(static_cast<size_t>(dc.num_codebooks));
  std::vector<float> pcm(static_cast<size_t>(dc.samples_per_frame()));
  uint64_t lcg = 12345;
  // MatMul stage: W [2048, 8192] bf16 (the FFN down projection's shape), one row of X.
  constexpr size_t kRows = 2048, kCols = 8192;
  std::vector<uint16_t> w(kRows * kCols);
  for (auto& v : w) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<uint16_t>(0x3c00u + ((lcg >> 33) & 0x7fu));  // bf16 in [2^-7, 2^-6)
  }
  const ops::Weight weight = ops::Weight::Dense(WeightFormat::kBF16, w.data(), kRows, kCols, kCols);
  std::vector<float> x(kCols, 0.5f), y(kRows);
  int32_t next_id = 2000;

  struct Stage {
    const char* name;
    int reps;
    std::function<void(int threads)> unit;
  };
  const std::vector<Stage> stages = {
      {"backbone_decode", reps,
       [&](int threads) {
         StageState& s = st[threads - 1];
         const int32_t id = next_id++ % 50000;
         (void)s.session->AppendTokens({&id, 1});
         auto h = s.session->Prefill(team_for(threads));
         if (h.ok()) bb.TextLogits(*h, logits.data(), team_for(threads));
       }},
      {"depthformer_frame", reps,
       [&](int threads) {
         (void)SampleAudioFrame((*model)->depthformer(), *st[threads - 1].depth, hidden.data(), *sampler, rng,
                                codes.data(), team_for(threads), nullptr);
       }},
      {"detokenizer_frame", reps * 3,
       [&](int threads) {
         for (auto& c : frame_codes) {
           lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
           c = static_cast<int32_t>((lcg >> 33) % static_cast<uint64_t>(dc.codebook_size));
         }
         (void)st[threads - 1].detok->Step(frame_codes, pcm, team_for(threads));
       }},
      {"matmul_2048x8192_bf16", reps * 5,
       [&](int threads) {
         ops::MatMul(x.data(), 1, kCols, weight, nullptr, y.data(), kRows, team_for(threads));
       }},
  };

  for (const Stage& stage : stages) {
    for (bool competitor : {false, true}) {
      std::optional<Competitor> busy;
      if (competitor) busy.emplace();
      const std::vector<double> sec =
          InterleavedMedians(warmup, stage.reps, configs, [&](const Config& c) { stage.unit(c.threads); });
      if (competitor) {
        busy.reset();
        // A team that degraded to inline work next to the competitor probes
        // again within its longest back-off (128 ms): let it, so that the
        // next stage's "alone" figures are alone.
        usleep(200000);
      }
      for (size_t i = 0; i < configs.size(); ++i) {
        std::printf(
            "{\"stage\":\"%s\",\"threads\":%d,\"adaptive\":%s,\"competitor\":%s,\"ms\":%.3f,"
            "\"ratio_vs_1thread\":%.3f}\n",
            stage.name, configs[i].threads, configs[i].adaptive ? "true" : "false",
            competitor ? "true" : "false", 1e3 * sec[i], sec[i] / sec[0]);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
