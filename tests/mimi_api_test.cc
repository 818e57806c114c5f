// Mimi behind the public API (src/api/codec_registry.cc): DetokenizerModel / DetokenizerStream decode a Mimi
// folder (the generated fixture; the oracle when ../shared is here) with the same PCM as the library's
// official-streaming session, bit for bit; an LFM2.5-Audio folder that also carries Kyutai's file stays with
// its own detokenizer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "codecs/mimi/mimi_decoder.h"
#include "lfmvox/lfmvox.h"
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

}  // namespace
}  // namespace lfmvox
