// LFM3-Audio depth decoder benchmark at the real size (spec LFM3_AUDIO.md §1.4, §2: text hidden 2048,
// depth width 1024, 3 attention layers, 32 / 8 heads of 32, FFN 2816, 12 codebooks × 2017): the three
// MaskGIT passes of one frame, 1 and 2 threads, BF16 weights as released and the depth decoder's matrices
// converted to Q8_0 (or Q4_0) at load (Lfm3DepthDecoder::Load's `matrices`; llama.cpp's integer path).
//   bench_lfm3_depth [--model DIR] [--frames N] [--threads 1,2] [--formats BF16,Q8_0,Q4_0] [--batch B]
//                    [--all-rows 1: every slot through the last layer, as in the parity tests]
// Without --model it writes a random real-size checkpoint in the lfm3_tiny layout
// (tools/lfm3_checkpoint_gen.h: the oracle's names, config.json and value recipe; gates on layers 0 and 2,
// sandwich norms everywhere) to a temp folder, once. One JSON line per configuration: "bench":"lfm3_depth",
// "format", "threads", "amx_tiles" (the stack in ops' AMX tiles: BF16 on a CPU with AMX), "cpu", "frame_ms"
// (median per frame: a call's time / batch), plus min, p90 and CPU time per frame, the call's time, the
// weights one call reads and the rate they imply, and the bandwidth floor: "read_gb_s"
// (bench::MeasureReadBandwidth, the same threads), "floor_ms" (a call's weight reads at that rate, per frame)
// and "floor_fraction" (floor ÷ measured).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "io/json_config.h"
#include "io/safetensors.h"
#include "models/lfm3_audio/depth_decoder.h"
#include "models/lfm3_audio/lfm3_config.h"
#include "ops/ops.h"
#include "tensor/matrix.h"
#include "threading/thread_team.h"
#include "tools/lfm3_checkpoint_gen.h"

using namespace lfmvox;

namespace {

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

int Fail(const Status& s) {
  std::fprintf(stderr, "%s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int frames = 30, batch = 1;
  bool all_rows = false;
  std::vector<std::string> thread_list = {"1", "2"}, format_list = {"BF16", "Q8_0"};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--model")
      dir = argv[i + 1];
    else if (k == "--frames")
      frames = std::max(5, std::atoi(argv[i + 1]));
    else if (k == "--threads")
      thread_list = bench::SplitList(argv[i + 1]);
    else if (k == "--all-rows")
      all_rows = std::atoi(argv[i + 1]) != 0;
    else if (k == "--formats")
      format_list = bench::SplitList(argv[i + 1]);
    else if (k == "--batch")
      batch = std::max(1, std::atoi(argv[i + 1]));
  }
  if (dir.empty()) {
    dir = (std::filesystem::temp_directory_path() / "lfmvox_bench_lfm3_depth").string();
    if (!std::filesystem::exists(dir + "/model.safetensors")) {
      std::fprintf(stderr, "writing a random real-size LFM3 depth decoder to %s ...\n", dir.c_str());
      const Status s = tools::WriteRandomLfm3(dir, tools::Lfm3Shape{});
      if (!s.ok()) return Fail(s);
    }
  }
  bench::ApplyAmxSetting();  // LFMVOX_BENCH_AMX=0: the stack stays in its stored layout
  Result<Lfm3Config> cfg = Lfm3Config::Load(dir + "/config.json");
  if (!cfg.ok()) return Fail(cfg.status());
  Result<nlohmann::json> root = ReadJsonFile(dir + "/config.json");
  if (!root.ok()) return Fail(root.status());
  Result<Lfm3AudioSampling> sampling = Lfm3AudioSampling::FromJson(*root, dir + "/config.json");
  if (!sampling.ok()) return Fail(sampling.status());
  for (const std::string& format : format_list) {
    Result<Checkpoint> ckpt = Checkpoint::Open(dir + "/model.safetensors");
    if (!ckpt.ok()) return Fail(ckpt.status());
    std::optional<WeightFormat> matrices;
    if (format == "Q8_0") {
      matrices = WeightFormat::kQ8_0;
    } else if (format == "Q4_0") {
      matrices = WeightFormat::kQ4_0;
    } else if (format != "BF16") {
      std::fprintf(stderr, "unknown format %s (BF16, Q8_0 or Q4_0)\n", format.c_str());
      return 2;
    }
    Result<Lfm3DepthDecoder> model = Lfm3DepthDecoder::Load(*ckpt, *cfg, matrices);
    if (!model.ok()) return Fail(model.status());
    const Lfm3DepthDecoder& m = *model;
    const double bytes = static_cast<double>(m.weight_bytes());
    const bool tiles = m.stack().layers()[0].ffn.w1.w.layout == WeightLayout::kTiles;
    std::fprintf(stderr,
                 "depth decoder: width %d, %d codebooks × %d, text hidden %d; %.1f MB read per frame; %s%s\n",
                 m.width(), m.codebooks(), m.codebook_size(), m.text_hidden(), bytes / 1e6,
                 ops::ChosenTarget(), tiles ? "; stack in AMX tiles" : "");

    // Hidden states: unit-RMS rows (as a final-normed backbone state with norm weight 1).
    const size_t Ht = static_cast<size_t>(m.text_hidden());
    std::vector<float> h(static_cast<size_t>(batch) * Ht);
    uint64_t r = 99;
    for (float& v : h) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      v = static_cast<float>(static_cast<int32_t>(r >> 32)) * (1.7320508f / 2147483648.0f);
    }

    for (const std::string& ts : thread_list) {
      const int threads = std::max(1, std::atoi(ts.c_str()));
      ThreadTeam team(threads);
      const double read_gbs = bench::MeasureReadBandwidth(team) * 1e-9;
      Result<Lfm3DepthScratch> scratch = Lfm3DepthScratch::Create(m, static_cast<size_t>(batch), threads);
      if (!scratch.ok()) return Fail(scratch.status());
      scratch->set_all_rows(all_rows);
      std::vector<Lfm3DepthState> states;
      for (int b = 0; b < batch; ++b) {
        Result<Lfm3DepthState> s = Lfm3DepthState::Create(m, *sampling, 1000 + static_cast<uint64_t>(b));
        if (!s.ok()) return Fail(s.status());
        states.push_back(std::move(s).value());
      }
      std::vector<const float*> hs;
      std::vector<Lfm3DepthState*> ptrs;
      for (int b = 0; b < batch; ++b) {
        hs.push_back(h.data() + static_cast<size_t>(b) * Ht);
        ptrs.push_back(&states[static_cast<size_t>(b)]);
      }
      // Wall time per frame, and the process's CPU time per frame (on a shared machine the CPU time of a
      // 1-thread run is close to its wall time alone; with 2 threads it includes the workers' spinning).
      std::vector<double> ms, cpu;
      for (int f = -3; f < frames; ++f) {
        const double t0 = bench::Now(), c0 = ProcessCpuSeconds();
        const Status s = DecodeFrames(m, hs, ptrs, *scratch, team, nullptr);
        if (!s.ok()) return Fail(s);
        if (f >= 0) {
          ms.push_back((bench::Now() - t0) * 1e3);
          cpu.push_back((ProcessCpuSeconds() - c0) * 1e3);
        }
      }
      std::sort(ms.begin(), ms.end());
      std::sort(cpu.begin(), cpu.end());
      const double med = ms[ms.size() / 2], p90 = ms[ms.size() * 9 / 10], min = ms.front();
      // Per frame: a call decodes one frame of each of the batch's streams.
      const double per = 1.0 / batch;
      // The bandwidth floor of one call: its weight reads (every pass's) at the rate measured above.
      const double floor_ms = bytes / (read_gbs * 1e9) * 1e3;
      std::printf(
          "{\"bench\":\"lfm3_depth\",\"format\":\"%s\",\"threads\":%d,\"batch\":%d,\"all_rows\":%d,"
          "\"amx_tiles\":%s,\"cpu\":\"%s\",\"frame_ms\":%.3f,\"min_ms\":%.3f,\"p90_ms\":%.3f,\"cpu_ms\":%.3f,"
          "\"call_ms\":%.3f,"
          "\"frames\":%d,\"weight_mb\":%.1f,\"weight_gb_per_s\":%.2f,\"read_gb_s\":%.2f,\"floor_ms\":%.3f,"
          "\"floor_fraction\":%.3f,\"load_avg\":%.2f}\n",
          format.c_str(), threads, batch, all_rows ? 1 : 0, tiles ? "true" : "false",
          bench::CpuModel().c_str(), med * per, min * per, p90 * per, cpu[cpu.size() / 2] * per, med, frames,
          bytes / 1e6, bytes / (med * 1e-3) / 1e9, read_gbs, floor_ms * per, floor_ms / med,
          bench::LoadAverage());
      std::fflush(stdout);
    }
  }
  return 0;
}
