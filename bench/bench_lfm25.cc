// LFM2.5-Audio backbone and depthformer at the real size (random weights in
// the real layout): prefill tokens/s, decode ms/step, depthformer ms/frame,
// at 1 and 2 threads, each against this machine's floors.
//   bench_lfm25 [--model DIR] [--threads 1,2] [--prompt N] [--steps N] [--frames N] [--json] [--load]
// DIR: a Hugging Face snapshot or a GGUF release (folder or one of its
// files). --json: one line per stage and thread count, {"bench":"backbone",
// "decode_tok_s","prefill_tok_s","floor_fraction"} and {"bench":"depthformer",
// "ms_per_frame","floor_fraction"}, against the read bandwidth measured here.
// --load: instead, the load time of the backbone (no detokenizer) without and with the NaN/inf weight scan
// (ModelOptions::check_weights), the best of 3 warm loads each: {"bench":"load","load_s","load_check_s",
// "check_s","files_gb","check_gb_s"} (the scan reads every weight byte once).
// Without --model it writes a real-size checkpoint to a temp folder once
// (tokenizer: tests/data/tokenizer/tokenizer.json, only for the names of the
// special tokens).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_util.h"
#include "models/lfm25_audio/session.h"
#include "ops/ops.h"
#include "threading/thread_team.h"
#include "tools/checkpoint_gen.h"

using namespace lfmvox;
using bench::Now;

int main(int argc, char** argv) {
  std::string dir, threads_arg = "1,2";
  int prompt = 128, steps = 16, frames = 8;
  bool json = false, load = false;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--json" || k == "--load") {
      (k == "--json" ? json : load) = true;
      continue;
    }
    if (i + 1 >= argc) break;
    const char* v = argv[++i];
    if (k == "--model")
      dir = v;
    else if (k == "--prompt")
      prompt = std::max(1, std::atoi(v));
    else if (k == "--steps")
      steps = std::max(1, std::atoi(v));
    else if (k == "--frames")
      frames = std::max(1, std::atoi(v));
    else if (k == "--threads")
      threads_arg = v;
  }
  if (dir.empty()) {
    dir = (std::filesystem::temp_directory_path() / "lfmvox_bench_real").string();
    std::fprintf(stderr, "using a random real-size LFM2.5-Audio checkpoint in %s (written once, 2.9 GB)\n",
                 dir.c_str());
    Status s = tools::EnsureRealSizeModel(
        dir, std::string(LFMVOX_SOURCE_DIR) + "/tests/data/tokenizer/tokenizer.json");
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  if (load) {
    double best[2] = {1e30, 1e30};
    // What the scan reads: the model's tensor files (a GGUF folder's detokenizer file is counted too).
    double file_bytes = 0;
    std::error_code ec;
    const std::filesystem::path root = std::filesystem::is_directory(dir, ec)
                                           ? std::filesystem::path(dir)
                                           : std::filesystem::path(dir).parent_path();
    for (const auto& e : std::filesystem::directory_iterator(root, ec)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".safetensors" || ext == ".gguf")) file_bytes += e.file_size();
    }
    for (int rep = 0; rep < 4; ++rep) {  // the first pair warms the page cache
      for (int check = 0; check < 2; ++check) {
        const double t0 = Now();
        auto m = Lfm25AudioModel::Load(dir, {.load_detokenizer = false, .check_weights = check == 1});
        const double t = Now() - t0;
        if (!m.ok()) {
          std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
          return 1;
        }
        if (rep > 0) best[check] = std::min(best[check], t);
      }
    }
    const double check_s = std::max(0.0, best[1] - best[0]);
    std::printf(
        "{\"bench\":\"load\",\"format\":\"%s\",\"cpu\":\"%s\",\"simd\":\"%s\",\"load_s\":%.3f,"
        "\"load_check_s\":%.3f,\"check_s\":%.3f,\"files_gb\":%.3f,\"check_gb_s\":%.2f}\n",
        bench::ModelFormat(dir).c_str(), bench::CpuModel().c_str(), ops::ChosenTarget(), best[0], best[1],
        check_s, file_bytes / 1e9, check_s > 0 ? file_bytes / check_s / 1e9 : 0.0);
    return 0;
  }
  auto model = Lfm25AudioModel::Load(dir, {.load_detokenizer = false});
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  const Lfm2Backbone& bb = (*model)->backbone();
  const Lfm2Config& c = (*model)->config().lfm;
  const double stack_bytes = static_cast<double>(bb.stack().weight_bytes());
  const double step_bytes = static_cast<double>(bb.step_weight_bytes());  // stack + text head
  const double depth_bytes = static_cast<double>((*model)->depthformer().weight_bytes());
  const std::string format = bench::ModelFormat(dir);
  if (!json)
    std::printf(
        "backbone: hidden %d, %d layers, ffn %d, vocab %d; %.0f MB stack + %.0f MB text head per step; "
        "depthformer %.0f MB per frame; SIMD %s\n",
        c.hidden_size, c.num_layers, c.ffn_dim, bb.vocab(), stack_bytes / 1e6,
        (step_bytes - stack_bytes) / 1e6, depth_bytes / 1e6, ops::ChosenTarget());

  std::vector<int32_t> ids(static_cast<size_t>(prompt));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(1000 + (i * 7919) % 50000);
  for (const std::string& tok : bench::SplitList(threads_arg)) {
    const int threads = std::max(1, std::atoi(tok.c_str()));
    ThreadTeam team(threads);
    const double bw = bench::MeasureReadBandwidth(team);
    auto s = Lfm25Session::Create(**model, {.threads = threads, .context = 1024, .prefill_chunk = 128});
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
      return 1;
    }
    // Prefill.
    (void)(*s)->AppendTokens(ids);
    double t0 = Now();
    if (auto r = (*s)->Prefill(team); !r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return 1;
    }
    const double prefill = Now() - t0;
    // Decode: one token fed per step, then the text head (what a text step costs).
    std::vector<float> logits(static_cast<size_t>(bb.vocab()));
    t0 = Now();
    for (int i = 0; i < steps; ++i) {
      const int32_t id = 2000 + i;
      (void)(*s)->AppendTokens({&id, 1});
      auto h = (*s)->Prefill(team);
      bb.TextLogits(*h, logits.data(), team);
    }
    const double step = (Now() - t0) / steps;
    // Depthformer frames from the last hidden state.
    auto depth = DepthformerScratch::Create((*model)->depthformer(), 1, threads);
    auto sampler = Sampler::Create(SamplingParams::Lfm25TtsAudio(), static_cast<size_t>(bb.audio_vocab()));
    Rng rng(1);
    std::vector<int32_t> codes(static_cast<size_t>((*model)->config().codebooks));
    const float* h = *(*s)->Prefill(team);
    t0 = Now();
    for (int f = 0; f < frames; ++f) {
      (void)SampleAudioFrame((*model)->depthformer(), *depth, h, *sampler, rng, codes.data(), team, nullptr);
    }
    const double frame = (Now() - t0) / frames;
    if (json) {
      std::printf(
          "{\"bench\":\"backbone\",\"format\":\"%s\",\"threads\":%d,\"cpu\":\"%s\",\"simd\":\"%s\","
          "\"prefill_tok_s\":%.2f,\"decode_tok_s\":%.2f,\"decode_ms\":%.2f,\"read_gb_s\":%.2f,"
          "\"floor_fraction\":%.3f}\n",
          format.c_str(), threads, bench::CpuModel().c_str(), ops::ChosenTarget(), prompt / prefill, 1 / step,
          step * 1e3, bw / 1e9, step_bytes / bw / step);
      std::printf(
          "{\"bench\":\"depthformer\",\"format\":\"%s\",\"threads\":%d,\"cpu\":\"%s\",\"ms_per_frame\":%.2f,"
          "\"weight_mb\":%.1f,\"floor_fraction\":%.3f}\n",
          format.c_str(), threads, bench::CpuModel().c_str(), frame * 1e3, depth_bytes / 1e6,
          depth_bytes / bw / frame);
    } else {
      std::printf(
          "threads %d: prefill %d tokens %.2f s = %.1f tokens/s | decode %.1f ms/step = %.2f tokens/s, %.1f "
          "GB/s "
          "(floor %.1f ms at %.1f GB/s read: %.0f%%) | depthformer %.1f ms/frame, %.1f GB/s (floor %.1f ms: "
          "%.0f%%)\n",
          threads, prompt, prefill, prompt / prefill, step * 1e3, 1 / step, step_bytes / step / 1e9,
          step_bytes / bw * 1e3, bw / 1e9, 100 * step_bytes / bw / step, frame * 1e3,
          depth_bytes / frame / 1e9, depth_bytes / bw * 1e3, 100 * depth_bytes / bw / frame);
    }
    std::fflush(stdout);
  }
  return 0;
}
