// LiquidCodec decoder benchmark at a real LFM3-Audio size, streaming one 80 ms frame at a time.
//   bench_lfm3_codec [--model DIR] [--frames N] [--threads 1,2] [--frames-per-call 1] [--ffn F] [--kv-heads
//   K]
// Without --model it writes a random checkpoint in the lfm3_tiny layout (tools/lfm3_checkpoint_gen.h) to a
// temp folder. Published (spec/LFM3_AUDIO.md §1.3, §2.3): width 512 (encoder_dim), 8 layers, window 30,
// quantizer 256, n_fft 1280 / hop 320 / ×6, head dim 64 (the seed's fallback) → 8 heads. Assumed (not
// published): the layer layout conv, conv, attn, conv, attn, conv, attn, conv (the LFM2.5 detokenizer's), 4
// KV heads, FFN 2304, conv kernel 3, sandwich norms on every layer and per-head gates on layers 2 and 6 (as
// lfm3_tiny; an upper bound on their cost). Weights are BF16, as the released files store them. One JSON line
// per thread count:
//   {"bench":"lfm3_codec","format":"BF16","threads":…,"cpu":…,"x_realtime":…,"frames_s":…,"p50_ms":…,
//    "p99_ms":…,"frames_per_call":…,"weight_mb_per_frame":…,"gflop_per_frame":…,"cpu_ms_per_frame":…,
//    "x_realtime_per_cpu_s":…,"load":…}
// x_realtime is audio seconds per wall second; x_realtime_per_cpu_s audio seconds per CPU second of the
// process (all threads; with one thread, the rate on a core it had to itself, cache contention aside), the
// figure to read when the machine is shared (the "load" key: the 1-minute load average).
#include <time.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "models/lfm3_audio/codec.h"
#include "ops/ops.h"
#include "threading/thread_team.h"
#include "tools/lfm3_checkpoint_gen.h"

using namespace lfmvox;

namespace {

// CPU seconds this process has used (all its threads): on a shared machine, the time the decoder ran
// rather than the time it waited for a core.
double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_dir, thread_list = "1,2", format = "BF16";
  int frames = 300, per_call = 1;
  tools::Lfm3Shape shape;
  shape.with_depth = false;  // the codec only
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") {
      model_dir = v;
    } else if (k == "--frames") {
      frames = std::max(10, std::atoi(v.c_str()));
    } else if (k == "--threads") {
      thread_list = v;
    } else if (k == "--frames-per-call") {
      per_call = std::max(1, std::atoi(v.c_str()));
    } else if (k == "--ffn") {
      shape.codec_ffn = std::atoi(v.c_str());
    } else if (k == "--format") {
      format = v;
    } else if (k == "--kv-heads") {
      shape.codec_kv_heads = std::atoi(v.c_str());
    } else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  if (model_dir.empty()) {
    model_dir = (std::filesystem::temp_directory_path() /
                 ("lfmvox_bench_lfm3_codec_ffn" + std::to_string(shape.codec_ffn) + "_kv" +
                  std::to_string(shape.codec_kv_heads)))
                    .string();
    if (!std::filesystem::exists(model_dir + "/model.safetensors")) {
      std::fprintf(stderr, "writing a random real-size LFM3 codec to %s ...\n", model_dir.c_str());
      Status s = tools::WriteRandomLfm3(model_dir, shape);
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
    }
  }
  std::optional<WeightFormat> matrices;
  for (WeightFormat f : kAllWeightFormats) {
    std::string name = WeightFormatName(f), want = format;
    for (char& ch : want) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (name == want) matrices = f;
  }
  if (!matrices) {
    std::fprintf(stderr, "unknown --format %s (F32, BF16, F16, Q8_0, Q4_0)\n", format.c_str());
    return 2;
  }
  format = WeightFormatName(*matrices);
  // The random checkpoint is BF16: BF16 uses it as stored.
  if (*matrices == WeightFormat::kBF16) matrices.reset();
  bench::ApplyAmxSetting();  // LFMVOX_BENCH_AMX=0: as on a CPU without AMX
  auto model = Lfm3Codec::Load(model_dir, matrices);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  const Lfm3CodecConfig& c = (*model)->config();
  const Lfm3StackConfig& sc = c.stack;
  const size_t cb = (*model)->codebooks();
  const double frame_s = static_cast<double>(c.frame_samples) / c.sample_rate;
  const double bytes = static_cast<double>((*model)->weight_bytes_per_frame());
  // Matrix FLOPs: 2 per weight per row; the stack and lin run frame_stack rows per frame, the front one
  // (attention over ≤ 30 keys and the ISTFT add a few %).
  auto params = [](const Linear& l) { return static_cast<double>(l.out()) * static_cast<double>(l.in()); };
  double stack_params = 0;
  for (const Lfm3Layer& L : (*model)->stack().layers()) {
    for (const Linear* l : {&L.conv.in_proj, &L.conv.out_proj, &L.attn.q_proj, &L.attn.k_proj, &L.attn.v_proj,
                            &L.attn.o_proj, &L.attn.gate_proj, &L.ffn.w1, &L.ffn.w3, &L.ffn.w2}) {
      stack_params += params(*l);
    }
  }
  const double front = params((*model)->project_out()) + params((*model)->from_quantizer());
  const double flops = 2.0 * (front + (stack_params + params((*model)->lin())) * c.frame_stack);
  std::fprintf(
      stderr,
      "lfm3 codec: width %d, %d layers, heads %d/%d × %d, ffn %d, K %d, window %d; SIMD target %s; %.1f MB "
      "weights, %.2f GFLOP per frame\n",
      sc.hidden_size, sc.num_layers, sc.num_heads, sc.num_kv_heads, sc.head_dim, sc.ffn_dim, sc.conv_kernel,
      sc.window, ops::ChosenTarget(), bytes / 1e6, flops / 1e9);

  std::vector<int32_t> codes(static_cast<size_t>(frames) * cb);
  uint64_t r = 12345;
  for (auto& x : codes) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<int32_t>((r >> 33) % static_cast<uint64_t>(c.num_codes()));
  }
  const size_t pc = static_cast<size_t>(per_call);
  std::vector<float> pcm(pc * (*model)->samples_per_frame() + (*model)->tail_samples());
  const std::string cpu = bench::CpuModel();

  for (const std::string& t : bench::SplitList(thread_list)) {
    const int threads = std::max(1, std::atoi(t.c_str()));
    ThreadTeam team(threads);
    auto s = Lfm3CodecSession::Create(**model, pc, threads);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
      return 1;
    }
    std::fprintf(stderr, "state %.1f KiB live (%.1f KiB allocated), scratch %.1f KiB\n",
                 (*s)->state().live_bytes() / 1024.0, (*s)->state().bytes() / 1024.0,
                 (*s)->scratch_bytes() / 1024.0);
    for (int f = 0; f < 10; ++f)
      (void)(*s)->Step({codes.data() + static_cast<size_t>(f) * cb, cb}, pcm, team);
    (*s)->Reset();
    std::vector<double> lat;
    const double t0 = bench::Now(), c0 = ProcessCpuSeconds();
    for (size_t f = 0; f < static_cast<size_t>(frames); f += pc) {
      const size_t k = std::min(pc, static_cast<size_t>(frames) - f);
      const double a = bench::Now();
      auto w = (*s)->Step({codes.data() + f * cb, k * cb}, pcm, team);
      if (!w.ok()) {
        std::fprintf(stderr, "%s\n", w.status().ToString().c_str());
        return 1;
      }
      lat.push_back(bench::Now() - a);
    }
    (void)(*s)->Flush(pcm);
    const double wall = bench::Now() - t0, cpu_s = ProcessCpuSeconds() - c0;
    std::sort(lat.begin(), lat.end());
    const double p50 = lat[lat.size() / 2], p99 = lat[std::min(lat.size() - 1, lat.size() * 99 / 100)];
    std::printf(
        "{\"bench\":\"lfm3_codec\",\"format\":\"%s\",\"threads\":%d,\"cpu\":\"%s\",\"x_realtime\":%.1f,"
        "\"frames_s\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"frames_per_call\":%d,"
        "\"weight_mb_per_frame\":%.2f,\"gflop_per_frame\":%.3f,\"cpu_ms_per_frame\":%.3f,"
        "\"x_realtime_per_cpu_s\":%.1f,\"ffn\":%d,\"kv_heads\":%d,\"load\":%.2f}\n",
        format.c_str(), threads, cpu.c_str(), frames * frame_s / wall, frames / wall, p50 * 1e3, p99 * 1e3,
        per_call, bytes / 1e6, flops / 1e9, cpu_s / frames * 1e3, frames * frame_s / cpu_s, sc.ffn_dim,
        sc.num_kv_heads, bench::LoadAverage());
    std::fflush(stdout);
  }
  return 0;
}
