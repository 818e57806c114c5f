// Mimi behind the public API (src/api/codec_registry.cc): DetokenizerModel / DetokenizerStream decode a Mimi
// folder (the generated fixture; the oracle when ../shared is here) with the same PCM as the library's
// official-streaming session, bit for bit; an LFM2.5-Audio folder that also carries Kyutai's file stays with
// its own detokenizer. And LFM2-Audio-1.5B end to end: its snapshot layout (no audio_detokenizer/, Kyutai's
// Mimi file beside the weights) speaks through AudioModel / Conversation with Mimi as its codec.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "codecs/mimi/mimi_decoder.h"
#include "lfmvox/lfmvox.h"
#include "pipeline_util.h"
#include "threading/thread_team.h"
#include "tools/mimi_checkpoint_gen.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

std::vector<int32_t> Codes(size_t n, int bins) {
  std::vector<int32_t> c(n);
  uint32_t s = 99;
  for (auto& x : c)
    x = static_cast<int32_t>(((s = s * 1664525u + 1013904223u) >> 8) % static_cast<uint32_t>(bins));
  return c;
}

void ApiEqualsLibrary(const std::string& dir) {
  Result<std::shared_ptr<const DetokenizerModel>> api = DetokenizerModel::Load(dir);
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  auto lib = MimiDecoder::Load(dir);
  ASSERT_TRUE(lib.ok());
  EXPECT_EQ((*api)->num_codebooks(), static_cast<int>((*lib)->codebooks()));
  EXPECT_EQ((*api)->codebook_size(), static_cast<int>((*lib)->codebook_size()));
  EXPECT_EQ((*api)->samples_per_frame(), static_cast<int>((*lib)->samples_per_frame()));
  EXPECT_EQ((*api)->tail_samples(), 0);
  const size_t C = (*lib)->codebooks(), spf = (*lib)->samples_per_frame(), T = 9;
  const std::vector<int32_t> codes = Codes(T * C, (*api)->codebook_size());
  auto stream = DetokenizerStream::Create(*api, {.threads = 1, .max_frames_per_call = 1});
  ASSERT_TRUE(stream.ok());
  std::vector<float> a(T * spf), b(T * spf);
  for (size_t t = 0; t < T; ++t) {
    Result<size_t> n =
        (*stream)->Push(std::span(codes).subspan(t * C, C), std::span(a).subspan(t * spf, spf));
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, spf);
  }
  std::vector<float> tail(1);
  EXPECT_EQ(*(*stream)->Flush(tail), 0u);
  ThreadTeam team(1);
  auto s = MimiSession::Create(**lib, 3, 1, MimiWindow::kStreaming);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Step(codes, b, team).ok());
  EXPECT_EQ(a, b);
}

TEST(MimiApi, FixtureFolderDecodesWithMimi) {
  const std::string dir = testing::ScratchPath("mimi_api");
  ASSERT_TRUE(tools::WriteRandomMimi(dir, tools::MimiShape::Tiny()).ok());
  ApiEqualsLibrary(dir);
}

TEST(MimiApi, OracleFolderDecodesWithMimi) {
  const std::string dir = LFMVOX_MIMI_ORACLE_DIR;
  if (!std::filesystem::exists(dir + "/model.safetensors"))
    GTEST_SKIP() << "the Mimi oracle is not here (" << dir << "); clone the project beside ../shared";
  ApiEqualsLibrary(dir);
}

// LFM2.5-Audio ships Kyutai's file beside audio_detokenizer/: its speech decoder stays the LFM2.5
// detokenizer.
TEST(MimiApi, NeverClaimsAnLfm25Folder) {
  const std::string dir = testing::ScratchPath("mimi_lfm25");
  std::filesystem::create_directories(dir + "/audio_detokenizer");
  std::ofstream(dir + "/" + kMimiCheckpointName) << "not read";
  EXPECT_TRUE(MimiDecoder::Recognizes(dir));
  Result<std::shared_ptr<const DetokenizerModel>> m = DetokenizerModel::Load(dir);
  ASSERT_FALSE(m.ok());  // the LFM2.5 loader's own error: its audio_detokenizer/ is empty
  EXPECT_EQ(m.status().message().find("Mimi"), std::string::npos) << m.status().ToString();
}

// An LFM2-Audio-1.5B snapshot as published: config.json (the published key set), model.safetensors,
// tokenizer.json and Kyutai's tokenizer-e351c8d8-checkpoint125.safetensors, no audio_detokenizer/. The
// backbone, encoder and depthformer are the lfm25_tiny oracle's (the model code of both releases is one,
// spec LFM2_AUDIO.md §2), the Mimi file a random one of 8 codebooks of 2048 codes in Kyutai's layout.
std::string Lfm2AudioSnapshot() {
  namespace fs = std::filesystem;
  const std::string dir = testing::ScratchPath("lfm2_audio_snapshot");
  fs::remove_all(dir);
  EXPECT_TRUE(tools::WriteRandomMimi(dir, tools::MimiShape::Lfm2Demo()).ok());
  const fs::path src = testing::DataPath("lfm25_tiny");
  for (const char* n : {"config.json", "model.safetensors", "tokenizer.json"})
    fs::copy_file(src / n, fs::path(dir) / n);
  return dir;
}

// One greedy turn through the public API: the oracle prompt `group` (its text ids, and `wav` where its
// modality flags say AUDIO_IN), `n` items in `mode`; the frames (codes as generated) and the PCM.
struct Turn {
  std::vector<std::vector<int32_t>> frames;
  std::vector<float> pcm;
};
Turn RunTurn(const std::shared_ptr<const AudioModel>& model, const std::string& group, const char* wav, int n,
             GenerationMode mode) {
  Turn t;
  auto c = Conversation::Create(model);
  EXPECT_TRUE(c.ok());
  const std::vector<int64_t> ids =
      testing::LoadTrace("lfm25_tiny/traces/" + group + "__text_ids.npy").ToInt64();
  const std::vector<int64_t> flags =
      testing::LoadTrace("lfm25_tiny/traces/" + group + "__modality_flag.npy").ToInt64();
  size_t ti = 0;
  for (size_t p = 0; p < flags.size();) {
    size_t q = p;
    while (q < flags.size() && flags[q] == flags[p]) ++q;
    if (flags[p] == 1) {
      std::vector<int32_t> run(ids.begin() + static_cast<long>(ti),
                               ids.begin() + static_cast<long>(ti + q - p));
      ti += q - p;
      EXPECT_TRUE((*c)->AddTokens(run).ok());
    } else {
      EXPECT_TRUE((*c)->AddAudioFile(testing::DataPath(std::string("inputs/") + wav)).ok());
    }
    p = q;
  }
  GenerateOptions g;
  g.mode = mode;
  g.max_new_tokens = n;
  OutputCallbacks cb;
  cb.on_audio_frame = [&](std::span<const int32_t> f, bool) {
    t.frames.emplace_back(f.begin(), f.end());
    return Status::Ok();
  };
  cb.on_pcm = [&](std::span<const float> p) {
    t.pcm.insert(t.pcm.end(), p.begin(), p.end());
    return Status::Ok();
  };
  Result<GenerateSummary> r = (*c)->Generate(g, cb);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return t;
}

// The frames of an oracle generation trace ([n, 9] rows, audio rows [1, c0..c7]).
std::vector<std::vector<int32_t>> TraceFrames(const std::string& trace) {
  const std::vector<int64_t> w = testing::LoadTrace("lfm25_tiny/traces/" + trace + ".npy").ToInt64();
  std::vector<std::vector<int32_t>> out;
  for (size_t r = 0; r < w.size() / 9; ++r)
    if (w[r * 9] == 1)
      out.emplace_back(w.begin() + static_cast<long>(r * 9 + 1), w.begin() + static_cast<long>(r * 9 + 9));
  return out;
}

// The PCM the official demo's loop makes of `frames`: one mimi.streaming context for the turn, one frame
// per call, the end-of-audio frame not decoded; a stray 2048 in codebooks 1-7 decoded as 2047 (the codes
// Mimi has; the demo skips such a frame, lfmvox keeps every frame 80 ms long).
std::vector<float> MimiOfFrames(const std::string& dir, const std::vector<std::vector<int32_t>>& frames) {
  auto mimi = MimiDecoder::Load(dir);
  EXPECT_TRUE(mimi.ok()) << mimi.status().ToString();
  auto s = MimiSession::Create(**mimi, 1, 1, MimiWindow::kStreaming);
  EXPECT_TRUE(s.ok());
  ThreadTeam team(1);
  std::vector<float> pcm, one((*mimi)->samples_per_frame());
  for (std::vector<int32_t> f : frames) {
    if (f[0] == 2048) continue;
    for (int32_t& c : f) c = std::min(c, 2047);
    EXPECT_TRUE((*s)->Step(f, one, team).ok());
    pcm.insert(pcm.end(), one.begin(), one.end());
  }
  return pcm;
}

// LFM2-Audio-1.5B end to end: the greedy codes of the oracle's TTS prompt (tts__sequential) and of its
// interleaved answer to the synthetic clip (gen__interleaved) are the traces' exactly, and the speech is
// Mimi's official streaming decode of those codes, bit for bit; its TTS prompt takes a free-text voice and
// refuses LFM2.5's presets.
TEST(Lfm2Audio, SnapshotSpeaksThroughMimi) {
  const std::string dir = Lfm2AudioSnapshot();
  auto model = AudioModel::Load(dir);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->family(), "LFM2-Audio");
  EXPECT_TRUE((*model)->voices().empty());
  EXPECT_EQ((*model)->default_voice(), "");
  EXPECT_EQ((*model)->sample_rate(), 24000);
  EXPECT_EQ((*model)->samples_per_frame(), 1920);
  EXPECT_TRUE((*model)->CanSpeak().ok());
  EXPECT_TRUE((*model)->CanListen().ok());
  for (auto [group, wav, trace, mode, n] :
       {std::tuple{"tts", "", "tts__sequential", GenerationMode::kSequential, 24},
        std::tuple{"prefill", "synthetic_16k.wav", "gen__interleaved", GenerationMode::kInterleaved, 16}}) {
    const Turn t = RunTurn(*model, group, wav, n, mode);
    EXPECT_EQ(t.frames, TraceFrames(trace)) << trace;
    ASSERT_FALSE(t.pcm.empty()) << trace;
    EXPECT_EQ(t.pcm, MimiOfFrames(dir, t.frames)) << trace;
  }
  // `lfmvox quantize` of this snapshot: backbone, mmproj, a vocoder without detokenizer tensors, and the
  // Mimi file beside them; at F32 the same turn, bit for bit.
  const std::string gguf = testing::ScratchPath("lfm2_audio_gguf");
  std::filesystem::remove_all(gguf);
  auto q = QuantizeModel(dir, gguf, "f32");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ASSERT_EQ(q->files.size(), 4u);
  EXPECT_EQ(std::filesystem::path(q->files[3]).filename(), kMimiCheckpointName);
  auto gm = AudioModel::Load(gguf);
  ASSERT_TRUE(gm.ok()) << gm.status().ToString();
  EXPECT_EQ((*gm)->family(), "LFM2-Audio");
  const Turn snap = RunTurn(*model, "tts", "", 24, GenerationMode::kSequential);
  const Turn from_gguf = RunTurn(*gm, "tts", "", 24, GenerationMode::kSequential);
  EXPECT_EQ(from_gguf.frames, snap.frames);
  EXPECT_EQ(from_gguf.pcm, snap.pcm);
  std::filesystem::remove_all(gguf);
  auto c = Conversation::Create(*model);
  ASSERT_TRUE(c.ok());
  const Status preset = (*c)->StartSpeech("US female", "Hello.");
  EXPECT_EQ(preset.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(preset.message().find("describe the voice"), std::string::npos) << preset.ToString();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lfmvox
