// Audio encoder (FastConformer + adapter) speed at the real LFM2.5-Audio size:
// d_model 512, 8 heads, 17 layers, FF 2048, conv kernel 9, 256 subsampling
// channels, 128 mels, adapter 512 → 2048 → 2048. The weights are seeded
// random bf16 values written to a temporary safetensors file (≈ 230 MB);
// the input is a random mel of the requested duration (100 frames per second).
//
// Prints the time per Encode call (median of the runs) for each team size, the
// real-time factor, the matrix FLOP rate, and a per-stage split taken from
// the trace points.
//
// Usage: bench_encoder [seconds_of_audio = 10] [runs = 5] [max_threads = 2]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/lfm25_audio/conformer.h"
#include "ops/ops.h"
#include "tensor/dtype.h"
#include "threading/thread_team.h"

namespace lfmvox {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kD = 512, kHeads = 8, kLayers = 17, kFf = 4, kK = 9, kC = 256, kMels = 128, kHidden = 2048;

nlohmann::json RealConfig() {
  return {{"encoder",
           {{"feat_in", kMels},
            {"feat_out", -1},
            {"n_layers", kLayers},
            {"d_model", kD},
            {"subsampling", "dw_striding"},
            {"subsampling_factor", 8},
            {"subsampling_conv_channels", kC},
            {"causal_downsampling", false},
            {"ff_expansion_factor", kFf},
            {"self_attention_model", "rel_pos"},
            {"n_heads", kHeads},
            {"att_context_size", {-1, -1}},
            {"xscaling", false},
            {"untie_biases", true},
            {"pos_emb_max_len", 5000},
            {"conv_kernel_size", kK},
            {"conv_norm_type", "batch_norm"}}}};
}

// Seeded random bf16 tensors initialised as the oracle's were: norm weights
// 1 + 0.1·N, biases 0.05·N, matrices N(0, 1/fan_in), BatchNorm running_mean
// 0.1·N and running_var U(0.5, 1.5).
class RandomCheckpoint {
 public:
  enum Kind { kNorm, kBias, kMatrix, kMean, kVar };
  void Add(const std::string& name, std::vector<int64_t> shape, Kind kind) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    const double fan_in = kind == kMatrix ? static_cast<double>(n) / static_cast<double>(shape[0]) : 1.0;
    std::normal_distribution<double> normal(0.0, 1.0);
    std::uniform_real_distribution<double> uniform(0.5, 1.5);
    std::vector<uint16_t>& v = data_.emplace_back(n);
    for (uint16_t& x : v) {
      double f = 0;
      switch (kind) {
        case kNorm:
          f = 1.0 + 0.1 * normal(rng_);
          break;
        case kBias:
          f = 0.05 * normal(rng_);
          break;
        case kMatrix:
          f = normal(rng_) / std::sqrt(fan_in);
          break;
        case kMean:
          f = 0.1 * normal(rng_);
          break;
        case kVar:
          f = uniform(rng_);
          break;
      }
      x = F32ToBf16(static_cast<float>(f));
    }
    tensors_.push_back({name, DType::kBF16, std::move(shape), v.data(), n * 2});
  }
  void Linear(const std::string& prefix, int64_t out, int64_t in, bool bias = true) {
    Add(prefix + ".weight", {out, in}, kMatrix);
    if (bias) Add(prefix + ".bias", {out}, kBias);
  }
  void Norm(const std::string& prefix, int64_t n) {
    Add(prefix + ".weight", {n}, kNorm);
    Add(prefix + ".bias", {n}, kBias);
  }
  Status Write(const std::string& path) const { return WriteSafetensors(path, tensors_); }

 private:
  std::mt19937_64 rng_{20250101};
  std::vector<std::vector<uint16_t>> data_;  // inner buffers keep their address as the outer vector grows
  std::vector<TensorToWrite> tensors_;
};

Status WriteRealCheckpoint(const std::string& path) {
  RandomCheckpoint ck;
  const std::string pre = "conformer.pre_encode.";
  for (const char* conv : {"conv.0", "conv.2", "conv.5"}) {
    ck.Add(pre + conv + ".weight", {kC, 1, 3, 3}, RandomCheckpoint::kMatrix);
    ck.Add(pre + conv + ".bias", {kC}, RandomCheckpoint::kBias);
  }
  for (const char* conv : {"conv.3", "conv.6"}) {
    ck.Add(pre + conv + ".weight", {kC, kC, 1, 1}, RandomCheckpoint::kMatrix);
    ck.Add(pre + conv + ".bias", {kC}, RandomCheckpoint::kBias);
  }
  ck.Linear(pre + "out", kD, kC * kMels / 8);
  for (int i = 0; i < kLayers; ++i) {
    const std::string p = "conformer.layers." + std::to_string(i) + ".";
    for (const char* n :
         {"norm_feed_forward1", "norm_self_att", "norm_conv", "norm_feed_forward2", "norm_out"}) {
      ck.Norm(p + n, kD);
    }
    for (const char* ff : {"feed_forward1", "feed_forward2"}) {
      ck.Linear(p + ff + ".linear1", kD * kFf, kD);
      ck.Linear(p + ff + ".linear2", kD, kD * kFf);
    }
    for (const char* l : {"linear_q", "linear_k", "linear_v", "linear_out"})
      ck.Linear(p + "self_attn." + l, kD, kD);
    ck.Linear(p + "self_attn.linear_pos", kD, kD, false);
    ck.Add(p + "self_attn.pos_bias_u", {kHeads, kD / kHeads}, RandomCheckpoint::kBias);
    ck.Add(p + "self_attn.pos_bias_v", {kHeads, kD / kHeads}, RandomCheckpoint::kBias);
    ck.Add(p + "conv.pointwise_conv1.weight", {2 * kD, kD, 1}, RandomCheckpoint::kMatrix);
    ck.Add(p + "conv.pointwise_conv1.bias", {2 * kD}, RandomCheckpoint::kBias);
    ck.Add(p + "conv.depthwise_conv.weight", {kD, 1, kK}, RandomCheckpoint::kMatrix);
    ck.Add(p + "conv.depthwise_conv.bias", {kD}, RandomCheckpoint::kBias);
    ck.Norm(p + "conv.batch_norm", kD);
    ck.Add(p + "conv.batch_norm.running_mean", {kD}, RandomCheckpoint::kMean);
    ck.Add(p + "conv.batch_norm.running_var", {kD}, RandomCheckpoint::kVar);
    ck.Add(p + "conv.pointwise_conv2.weight", {kD, kD, 1}, RandomCheckpoint::kMatrix);
    ck.Add(p + "conv.pointwise_conv2.bias", {kD}, RandomCheckpoint::kBias);
  }
  ck.Norm("audio_adapter.model.0", kD);
  ck.Linear("audio_adapter.model.1", kHidden, kD);
  ck.Linear("audio_adapter.model.3", kHidden, kHidden);
  return ck.Write(path);
}

// Records the time of every trace point, to split a run into stages.
class TimingSink : public TraceSink {
 public:
  void Record(std::string_view name, const float*, size_t, size_t, size_t) override {
    marks.emplace_back(std::string(name), Clock::now());
  }
  std::vector<std::pair<std::string, Clock::time_point>> marks;
};

// Multiply-adds of the matrix products of one call (everything else is
// linear in T'·d and small), ×2 for FLOPs.
double MatrixFlops(size_t frames) {
  const double F = static_cast<double>(frames), T = static_cast<double>((frames + 7) / 8);
  const double T1 = std::ceil(F / 2), T2 = std::ceil(T1 / 2);
  const double d = kD, C = kC, W1 = kMels / 2, W2 = W1 / 2, W3 = W2 / 2;
  double mac =
      T1 * W1 * C * 9 + T2 * W2 * C * (9 + C) + T * W3 * C * (9 + C) + T * C * W3 * d;  // subsampling
  mac += kLayers * (T * (2 * 2 * d * d * kFf + 4 * d * d + 2 * d * d + d * d + d * kK) + (2 * T - 1) * d * d +
                    3 * T * T * d);                      // FF×2, q k v out, conv pw, linear_pos, AC BD PV
  mac += T * (d * kHidden + double{kHidden} * kHidden);  // adapter
  return 2 * mac;
}

int Main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 10.0;
  const int runs = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  const int max_threads = argc > 3 ? std::max(1, std::atoi(argv[3])) : 2;
  const size_t frames = static_cast<size_t>(seconds * 100.0) + 1;  // hop 160 at 16 kHz, centred frames

  char dir[] = "/tmp/bench_encoder_XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    std::fprintf(stderr, "cannot create a temporary directory\n");
    return 1;
  }
  const std::string path = std::string(dir) + "/model.safetensors";
  Status st = WriteRealCheckpoint(path);
  auto config = ConformerConfig::FromJson(RealConfig()["encoder"], "bench_encoder config [encoder]");
  if (!config.ok()) st = config.status();
  auto ck = st.ok() ? Checkpoint::Open(path) : Result<Checkpoint>(st);
  auto enc = ck.ok() ? AudioEncoder::Load(*ck, *config, kHidden) : Result<AudioEncoder>(ck.status());
  if (!enc.ok()) {
    std::fprintf(stderr, "%s\n", enc.status().ToString().c_str());
    return 1;
  }
  auto scratch = EncoderScratch::Create(*enc, frames, max_threads);
  if (!scratch.ok()) {
    std::fprintf(stderr, "%s\n", scratch.status().ToString().c_str());
    return 1;
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> mel(static_cast<size_t>(kMels) * frames);  // [128, F]
  for (float& v : mel) v = normal(rng);
  const size_t t = ConformerConfig::SubsampledFrames(frames);
  std::vector<float> out(t * kHidden);  // [T', H]

  std::printf("encoder at the real size: %.1f s of audio = %zu mel frames -> %zu frames; target %s\n",
              seconds, frames, t, ops::ChosenTarget());
  std::printf("weights %.1f MB (bf16 matrices), scratch %.1f MB, %.2f GFLOP of matrix products per call\n",
              enc->weight_bytes() / 1e6, (*scratch)->bytes() / 1e6, MatrixFlops(frames) / 1e9);
  for (int threads = 1; threads <= max_threads; threads *= 2) {
    ThreadTeam team(threads);
    std::vector<double> ms;
    TimingSink last;
    for (int r = 0; r <= runs; ++r) {  // run 0 warms up
      TimingSink sink;
      const auto t0 = Clock::now();
      st = enc->Encode(mel.data(), frames, out.data(), **scratch, team, &sink);
      const auto t1 = Clock::now();
      if (!st.ok()) {
        std::fprintf(stderr, "%s\n", st.ToString().c_str());
        return 1;
      }
      if (r == 0) continue;
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      sink.marks.insert(sink.marks.begin(), {"start", t0});
      last = std::move(sink);
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    std::printf("threads %2d: %8.1f ms per call (min %.1f, max %.1f), real-time factor %.4f, %.1f GFLOP/s\n",
                threads, med, ms.front(), ms.back(), med / (seconds * 1000.0),
                MatrixFlops(frames) / med / 1e6);
    // Stage split of the last run: subsampling, the layers, the adapter.
    auto at = [&](const std::string& name) {
      for (const auto& [n, tp] : last.marks) {
        if (n == name) return tp;
      }
      return last.marks.back().second;
    };
    auto span = [](Clock::time_point a, Clock::time_point b) {
      return std::chrono::duration<double, std::milli>(b - a).count();
    };
    std::printf("            subsampling %.1f ms, %d layers %.1f ms (%.1f each), adapter %.1f ms\n",
                span(at("start"), at("pre_encode_out")), kLayers, span(at("pos_emb"), at("out")),
                span(at("pos_emb"), at("out")) / kLayers, span(at("out"), at("adapter_out")));
  }
  std::remove(path.c_str());
  rmdir(dir);
  return 0;
}

}  // namespace
}  // namespace lfmvox

int main(int argc, char** argv) { return lfmvox::Main(argc, argv); }
