// The LFM2 backbone alone, with llama.cpp's bench protocol (the anchor in
// ../shared/anchors/llamacpp): prefill pp256 = one forward of 256 tokens from
// an empty sequence, logits of the last one, greedy argmax; decode tg64 = 64
// single-token steps from an empty sequence, each with the full tied head and
// an argmax. Token ids are the anchor's xorshift32 lists (seeds 12345 and
// 67890). One untimed warm-up per test, then --reps timed runs; the median.
//   bench_backbone --model PATH [--threads 1,2] [--pp 256] [--tg 64] [--reps 5]
// PATH: an LFM2 GGUF file (a release's backbone, or llama.cpp's text model),
// a GGUF release folder, or a Hugging Face snapshot. One JSON line per
// thread count: {"bench":"backbone","format":…,"threads":…,"decode_tok_s":…,
// "prefill_tok_s":…,"floor_fraction":…} and the measured read bandwidth; "amx": whether the kernels
// use AMX (LFMVOX_BENCH_AMX=0: as on a CPU without it, bench_util.h).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_util.h"
#include "blocks/weights.h"
#include "models/lfm25_audio/config.h"
#include "models/lfm25_audio/gguf_release.h"
#include "models/lfm25_audio/lfm2_stack.h"
#include "ops/ops.h"
#include "threading/thread_team.h"

using namespace lfmvox;
using bench::Now;

namespace {

// The anchor's token ids (capi_bench.c token_ids).
std::vector<int32_t> TokenIds(int n, uint32_t seed, int vocab) {
  std::vector<int32_t> out(static_cast<size_t>(n));
  uint32_t s = seed ? seed : 1;
  for (auto& id : out) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    id = 16 + static_cast<int32_t>(s % static_cast<uint32_t>(vocab - 16));
  }
  return out;
}

int Argmax(const float* x, size_t n) {
  size_t b = 0;
  for (size_t i = 1; i < n; ++i)
    if (x[i] > x[b]) b = i;
  return static_cast<int>(b);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The stack and the tied head of whatever PATH is.
struct Model {
  Lfm2Config config;
  std::optional<Checkpoint> ckpt;
  std::optional<Lfm2Stack> stack;
  ops::Weight embed;
};

Result<Model> Open(const std::string& path) {
  Model m;
  std::error_code ec;
  std::string file = path;
  if (std::filesystem::is_directory(path, ec) && LooksLikeGgufRelease(path)) {
    LFM_ASSIGN_OR_RETURN(Lfm25GgufFiles f, FindLfm25GgufRelease(path));
    file = f.backbone;
  }
  if (std::filesystem::is_regular_file(file, ec)) {
    LFM_ASSIGN_OR_RETURN(Lfm2Gguf g, OpenLfm2Gguf(file));
    m.config = g.config;
    m.ckpt.emplace(std::move(g.weights));
  } else {
    LFM_ASSIGN_OR_RETURN(Lfm25AudioConfig c, Lfm25AudioConfig::Load(path + "/config.json"));
    m.config = c.lfm;
    LFM_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::Open(path));
    m.ckpt.emplace(std::move(ck));
  }
  LFM_ASSIGN_OR_RETURN(Lfm2Stack s, Lfm2Stack::Load(*m.ckpt, m.config, "lfm."));
  m.stack.emplace(std::move(s));
  LFM_ASSIGN_OR_RETURN(TensorView e, m.ckpt->Get("lfm.embed_tokens.weight"));
  LFM_ASSIGN_OR_RETURN(m.embed,
                       LoadMatrix(*m.ckpt, "lfm.embed_tokens.weight", e.shape[0], m.config.hidden_size));
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, threads_arg = "1,2";
  int pp = 256, tg = 64, reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--model") path = argv[i + 1];
    if (k == "--threads") threads_arg = argv[i + 1];
    if (k == "--pp") pp = std::max(1, std::atoi(argv[i + 1]));
    if (k == "--tg") tg = std::max(1, std::atoi(argv[i + 1]));
    if (k == "--reps") reps = std::max(1, std::atoi(argv[i + 1]));
  }
  if (path.empty()) {
    std::fprintf(stderr, "usage: bench_backbone --model PATH [--threads 1,2] [--pp N] [--tg N] [--reps N]\n");
    return 2;
  }
  const bool amx = bench::ApplyAmxSetting();
  Result<Model> model = Open(path);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  const Lfm2Stack& stack = *model->stack;
  const ops::Weight& embed = model->embed;
  const size_t H = static_cast<size_t>(model->config.hidden_size), V = embed.rows;
  // Weight bytes one decode step reads: the stack and the head (the embedding row is noise).
  const double step_bytes = static_cast<double>(stack.weight_bytes() + embed.bytes());
  Result<TensorView> ffn = model->ckpt->Get("lfm.layers.0.feed_forward.w1.weight");
  const std::string format = ffn.ok() ? DTypeName(ffn->dtype) : "?";
  const std::vector<int32_t> pp_ids = TokenIds(pp, 12345, static_cast<int>(V));
  const std::vector<int32_t> tg_ids = TokenIds(tg, 67890, static_cast<int>(V));
  std::vector<float> x(static_cast<size_t>(pp) * H), logits(V);

  for (const std::string& tok : bench::SplitList(threads_arg)) {
    const int threads = std::max(1, std::atoi(tok.c_str()));
    ThreadTeam team(threads);
    const double bw = bench::MeasureReadBandwidth(team);
    auto state = Lfm2State::Create(stack, static_cast<size_t>(pp), static_cast<size_t>(pp + tg + 64));
    auto scratch =
        Lfm2Scratch::Create(stack, static_cast<size_t>(pp), static_cast<size_t>(pp + tg + 64), threads);
    if (!state.ok() || !scratch.ok()) {
      std::fprintf(stderr, "%s\n", (state.ok() ? scratch.status() : state.status()).ToString().c_str());
      return 1;
    }
    auto embed_rows = [&](const int32_t* ids, size_t n) {
      std::fill(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n * H), 0.0f);
      for (size_t i = 0; i < n; ++i) AccumulateRow(embed, static_cast<size_t>(ids[i]), x.data() + i * H);
    };
    auto prefill = [&]() {
      state->Reset();
      embed_rows(pp_ids.data(), pp_ids.size());
      (void)Lfm2Forward(stack, *state, x.data(), pp_ids.size(), *scratch, team, nullptr);
      float* last = x.data() + (pp_ids.size() - 1) * H;
      Lfm2FinalNorm(stack, last, 1, last);
      ops::MatMul(last, 1, H, embed, nullptr, logits.data(), V, team);
      (void)Argmax(logits.data(), V);
    };
    auto decode = [&]() {
      state->Reset();
      for (int32_t id : tg_ids) {
        embed_rows(&id, 1);
        (void)Lfm2Forward(stack, *state, x.data(), 1, *scratch, team, nullptr);
        Lfm2FinalNorm(stack, x.data(), 1, x.data());
        ops::MatMul(x.data(), 1, H, embed, nullptr, logits.data(), V, team);
        (void)Argmax(logits.data(), V);
      }
    };
    std::vector<double> pp_t, tg_t;
    prefill();
    for (int r = 0; r < reps; ++r) {
      const double t0 = Now();
      prefill();
      pp_t.push_back(Now() - t0);
    }
    decode();
    for (int r = 0; r < reps; ++r) {
      const double t0 = Now();
      decode();
      tg_t.push_back(Now() - t0);
    }
    const double pp_rate = pp / Median(pp_t), tg_rate = tg / Median(tg_t);
    const double floor_rate = bw / step_bytes;  // decode tokens/s if every step streamed its weights at bw
    std::printf(
        "{\"bench\":\"backbone\",\"engine\":\"lfmvox\",\"file\":\"%s\",\"format\":\"%s\",\"head_format\":\"%"
        "s\","
        "\"threads\":%d,\"cpu\":\"%s\",\"simd\":\"%s\",\"amx\":%s,\"pp\":%d,\"tg\":%d,\"prefill_tok_s\":%.2f,"
        "\"decode_tok_s\":%.2f,\"step_bytes\":%.0f,\"read_gb_s\":%.2f,\"decode_floor_tok_s\":%.2f,"
        "\"floor_fraction\":%.3f,\"loadavg\":%.2f}\n",
        path.c_str(), format.c_str(), WeightFormatName(embed.format), threads, bench::CpuModel().c_str(),
        ops::ChosenTarget(), amx ? "true" : "false", pp, tg, pp_rate, tg_rate, step_bytes, bw / 1e9,
        floor_rate, tg_rate / floor_rate, bench::LoadAverage());
    std::fflush(stdout);
  }
  return 0;
}
