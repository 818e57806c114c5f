// Detokenizer benchmark at the real LFM2.5 size (hidden 512, 8 layers,
// FFN 2304): streaming one 80 ms frame at a time, 1 and 2 threads.
//   bench_detokenizer [--model DIR] [--frames N]
// Without --model it writes a random real-size checkpoint to a temp folder.
// Prints frames/s, × real time, per-frame latency p50/p99, and the floors:
// weight bytes a frame reads ÷ DRAM bandwidth, FLOPs ÷ FMA peak.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "models/lfm25_audio/detokenizer.h"
#include "ops/ops.h"
#include "threading/thread_team.h"
#include "tools/checkpoint_gen.h"

using namespace lfmvox;

namespace {
// This machine class (see README "Speed"): DRAM read per core / both cores,
// fp32 FMA peak per core.
constexpr double kDramPerCore = 15e9, kDramBoth = 28e9, kFlopsPerCore = 198e9;
}  // namespace

int main(int argc, char** argv) {
  std::string model_dir;
  int frames = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--model")
      model_dir = argv[i + 1];
    else if (k == "--frames")
      frames = std::max(10, std::atoi(argv[i + 1]));
  }
  if (model_dir.empty()) {
    model_dir = (std::filesystem::temp_directory_path() / "lfmvox_bench_detok").string();
    if (!std::filesystem::exists(model_dir + "/audio_detokenizer/model.safetensors")) {
      std::printf("writing a random real-size detokenizer to %s ...\n", model_dir.c_str());
      Status s = tools::WriteRandomDetokenizer(model_dir, tools::DetokenizerShape{});
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
    }
  }
  auto model = Lfm25Detokenizer::Load(model_dir);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  const Lfm25DetokenizerConfig& c = (*model)->config();
  const size_t cb = static_cast<size_t>(c.num_codebooks);
  const double frame_s = static_cast<double>(c.samples_per_frame()) / c.sample_rate;
  const double bytes = static_cast<double>((*model)->weight_bytes_per_frame());
  // Matrix FLOPs: 2 per weight per row, upsample rows per frame (attention
  // over ≤ 30 keys adds < 1 %).
  const double weights =
      static_cast<double>((*model)->stack().weight_bytes()) / 2.0 + c.output_size * c.lfm.hidden_size;
  const double flops = 2.0 * weights * c.upsample;
  std::printf("detokenizer: hidden %d, %d layers, ffn %d, %d codebooks × %d; SIMD target %s\n",
              c.lfm.hidden_size, c.lfm.num_layers, c.lfm.ffn_dim, c.num_codebooks, c.codebook_size,
              ops::ChosenTarget());
  std::printf("per frame (%.0f ms of audio): %.1f MB of weights read, %.2f GFLOP\n", frame_s * 1e3,
              bytes / 1e6, flops / 1e9);

  std::vector<int32_t> codes(static_cast<size_t>(frames) * cb);
  uint64_t r = 12345;
  for (auto& x : codes) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<int32_t>((r >> 33) % c.codebook_size);
  }
  std::vector<float> pcm(static_cast<size_t>(c.samples_per_frame()));

  for (int threads : {1, 2}) {
    ThreadTeam team(threads);
    auto s = Lfm25DetokenizerSession::Create(**model, 1, threads);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
      return 1;
    }
    for (int f = 0; f < 10; ++f) (void)(*s)->Step({codes.data() + f * cb, cb}, pcm, team);  // warm up
    (*s)->Reset();
    std::vector<double> lat;
    const auto t0 = std::chrono::steady_clock::now();
    for (int f = 0; f < frames; ++f) {
      const auto a = std::chrono::steady_clock::now();
      auto w = (*s)->Step({codes.data() + static_cast<size_t>(f) * cb, cb}, pcm, team);
      if (!w.ok()) {
        std::fprintf(stderr, "%s\n", w.status().ToString().c_str());
        return 1;
      }
      lat.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::sort(lat.begin(), lat.end());
    const double p50 = lat[lat.size() / 2], p99 = lat[std::min(lat.size() - 1, lat.size() * 99 / 100)];
    const double per = wall / frames;
    const double bw_floor = bytes / (threads == 1 ? kDramPerCore : kDramBoth);
    const double fl_floor = flops / (kFlopsPerCore * threads);
    std::printf(
        "threads %d: %.1f frames/s, %.1fx real time, latency p50 %.2f ms p99 %.2f ms | "
        "%.1f GB/s weights, floor %.2f ms (bandwidth) %.2f ms (FLOPs): %.0f%% of the bandwidth floor\n",
        threads, frames / wall, frame_s / per, p50 * 1e3, p99 * 1e3, bytes / per / 1e9, bw_floor * 1e3,
        fl_floor * 1e3, 100.0 * std::max(bw_floor, fl_floor) / per);
  }
  return 0;
}
