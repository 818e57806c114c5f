// lfmvox-make-checkpoint: writes random checkpoints in the real layout.
//   lfmvox-make-checkpoint detokenizer --out DIR [--seed N] [--vocab N]
//   lfmvox-make-checkpoint lfm25-audio --out DIR --tokenizer tokenizer.json [--size real|demo] [--seed N]
//                                      [--steer-tts TEXT [--voice V]]
//   lfmvox-make-checkpoint lfm2-audio --out DIR --tokenizer tokenizer.json [--size real|demo] [--seed N]
//                                     [--steer-tts TEXT [--voice DESCRIPTION]]
//   lfmvox-make-checkpoint lfm3-audio --out DIR --tokenizer tokenizer.json [--seed N]
// lfm25-audio writes config.json, model.safetensors, tokenizer.json and
// audio_detokenizer/; lfm2-audio (LFM2-Audio-1.5B's layout) the same but for
// Kyutai's Mimi file (tokenizer-e351c8d8-checkpoint125.safetensors, random;
// a narrow one with --size demo) in place of audio_detokenizer/, steered on
// its own TTS prompt ("Perform TTS." and the voice described in words). --steer-tts edits one embedding row
// (<|audio_start|>) so that the TTS prompt for TEXT starts speech under greedy text decoding, as the
// project's oracle checkpoints do; the weights stay random, so the speech is noise. It exists so demos
// exercise the whole path. lfm3-audio writes a small whole LFM3-Audio folder (tools/lfm3_checkpoint_gen.h: a
// 256-wide backbone with the `lfm` section, the depth decoder, a real-size codec, tokenizer.json); its TTS
// prompt starts speech by construction (it ends with <|audio_start|>), the speech is noise.
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/file_write.h"
#include "io/safetensors.h"
#include "models/lfm25_audio/session.h"
#include "tensor/dtype.h"
#include "threading/thread_team.h"
#include "tools/checkpoint_gen.h"
#include "tools/lfm3_checkpoint_gen.h"
#include "tools/mimi_checkpoint_gen.h"

namespace {

using namespace lfmvox;

// Far above any LFM tokenizer (65 536) and small enough that the embedding table stays bounded.
constexpr long long kMaxVocab = 1 << 18;

int Fail(const std::string& m) {
  std::fprintf(stderr, "lfmvox-make-checkpoint: error: %s\n", m.c_str());
  return 1;
}

// Sets embed_tokens[<|audio_start|>] = √H · unit(h), h the final hidden state
// of the TTS prompt, so greedy decoding's first token is <|audio_start|>.
// `lfm2`: LFM2-Audio-1.5B's prompt ("Perform TTS.", the voice description on a second line if any).
Status SteerTts(const std::string& dir, const std::string& voice, const std::string& text, bool lfm2) {
  int32_t row = 0;
  std::vector<float> h;
  {
    LFM_ASSIGN_OR_RETURN(auto model, Lfm25AudioModel::Load(dir, {.load_detokenizer = false}));
    LFM_ASSIGN_OR_RETURN(auto session, Lfm25Session::Create(*model, {.threads = 1, .context = 1024}));
    if (lfm2) {
      LFM_RETURN_IF_ERROR(session->StartConversation());
      LFM_RETURN_IF_ERROR(session->StartTurn("system"));
      LFM_RETURN_IF_ERROR(session->AppendText(
          voice.empty() ? "Perform TTS." : "Perform TTS.\nUse the following voice: " + voice));
      LFM_RETURN_IF_ERROR(session->EndTurn());
      LFM_RETURN_IF_ERROR(session->StartTurn("user"));
      LFM_RETURN_IF_ERROR(session->AppendText(text));
      LFM_RETURN_IF_ERROR(session->EndTurn());
      LFM_RETURN_IF_ERROR(session->StartTurn("assistant"));
    } else {
      LFM_RETURN_IF_ERROR(session->AppendTtsPrompt(voice, text));
    }
    ThreadTeam team(1);
    LFM_ASSIGN_OR_RETURN(const float* last, session->Prefill(team));
    h.assign(last, last + model->config().lfm.hidden_size);
    row = model->special().audio_start;
  }
  double norm = 0;
  for (float v : h) norm += static_cast<double>(v) * v;
  const double scale = std::sqrt(static_cast<double>(h.size()) / norm);
  const std::string path = dir + "/model.safetensors";
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  LFM_ASSIGN_OR_RETURN(SafetensorsHeader header, ParseSafetensorsHeader(bytes));
  for (const SafetensorsEntry& e : header.tensors) {
    if (e.name != "lfm.embed_tokens.weight") continue;
    if (e.dtype != DType::kBF16) return Unimplemented("steering expects BF16 embeddings");
    const size_t off = header.data_offset + e.begin + static_cast<size_t>(row) * h.size() * 2;
    for (size_t i = 0; i < h.size(); ++i) {
      const uint16_t b = F32ToBf16(static_cast<float>(h[i] * scale));
      std::memcpy(&bytes[off + 2 * i], &b, 2);
    }
    return WriteWholeFile(path, bytes);
  }
  return NotFound("lfm.embed_tokens.weight");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string kUsage =
      "usage: lfmvox-make-checkpoint detokenizer --out DIR [--seed N] [--vocab N]\n"
      "       lfmvox-make-checkpoint lfm25-audio --out DIR --tokenizer FILE [--size real|demo] [--seed N]\n"
      "                                          [--steer-tts TEXT] [--voice V]\n"
      "       lfmvox-make-checkpoint lfm2-audio --out DIR --tokenizer FILE [--size real|demo] [--seed N]\n"
      "                                         [--steer-tts TEXT] [--voice DESCRIPTION]\n"
      "       lfmvox-make-checkpoint lfm3-audio --out DIR --tokenizer FILE [--seed N]\n";
  if (argc < 2) {
    std::fputs(kUsage.c_str(), stderr);
    return 2;
  }
  const std::string what = argv[1];
  if (what != "detokenizer" && what != "lfm25-audio" && what != "lfm2-audio" && what != "lfm3-audio") {
    std::fprintf(stderr, "lfmvox-make-checkpoint: unknown checkpoint kind %s\n%s", what.c_str(),
                 kUsage.c_str());
    return 2;
  }
  // Every option is checked before anything is written, so a bad one leaves no partial checkpoint.
  const auto usage = [&](const std::string& m) {
    std::fprintf(stderr, "lfmvox-make-checkpoint: %s\n%s", m.c_str(), kUsage.c_str());
    return 2;
  };
  const bool lfm2 = what == "lfm2-audio";
  std::string out, tokenizer, size = "real", steer, voice = lfm2 ? "" : "US female";
  uint64_t seed = 1;
  int vocab = 0;
  bool voice_set = false;
  for (int i = 2; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) return usage("option " + k + " needs a value");
    const std::string v = argv[i + 1];
    if (k == "--out") {
      out = v;
    } else if (k == "--seed") {
      // Digits only: strtoull alone takes "abc" as 0 and "-1" as 2^64 - 1.
      char* end = nullptr;
      errno = 0;
      const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || !std::isdigit(static_cast<unsigned char>(v[0])) || errno != 0 || *end != '\0')
        return usage("--seed takes an integer in [0, 18446744073709551615], not " + v);
      seed = x;
    } else if (k == "--vocab") {
      char* end = nullptr;
      errno = 0;
      const long long x = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || errno != 0 || *end != '\0' || x < 1 || x > kMaxVocab)
        return usage("--vocab takes an integer in [1, " + std::to_string(kMaxVocab) + "], not " + v);
      vocab = static_cast<int>(x);
    } else if (k == "--tokenizer") {
      tokenizer = v;
    } else if (k == "--size") {
      size = v;
    } else if (k == "--steer-tts") {
      steer = v;
    } else if (k == "--voice") {
      voice = v;
      voice_set = true;
    } else {
      return usage("unknown option " + k);
    }
  }
  if (out.empty()) return usage(what + " needs --out DIR");
  if (what == "detokenizer" && (!tokenizer.empty() || !steer.empty() || voice_set || size != "real"))
    return usage("--tokenizer, --size, --steer-tts and --voice are for lfm25-audio, not detokenizer");
  if (what == "lfm3-audio" && (vocab > 0 || !steer.empty() || voice_set || size != "real"))
    return usage("--vocab, --size, --steer-tts and --voice are not for lfm3-audio");
  if (what == "lfm25-audio" || lfm2 || what == "lfm3-audio") {
    if (tokenizer.empty()) return Fail(what + " needs --tokenizer FILE (a tokenizer.json to ship with it)");
    std::error_code ec;
    if (!std::filesystem::is_regular_file(tokenizer, ec))
      return Fail("the tokenizer " + tokenizer + " does not exist or is not a file; nothing was written");
    if (size != "real" && size != "demo") return usage("--size takes real or demo, not " + size);
    if (voice_set && steer.empty()) return usage("--voice needs --steer-tts TEXT");
  }
  {
    std::error_code ec;
    if (std::filesystem::exists(out, ec) && !std::filesystem::is_directory(out, ec))
      return Fail(out + " exists and is not a folder; nothing was written");
  }
  if (what == "detokenizer") {
    tools::DetokenizerShape shape;
    shape.seed = seed;
    if (vocab > 0) shape.vocab = vocab;
    if (Status s = tools::WriteRandomDetokenizer(out, shape); !s.ok()) return Fail(s.message());
  } else if (what == "lfm25-audio" || lfm2) {
    tools::Lfm25AudioShape shape = size == "real" ? tools::Lfm25AudioShape{} : tools::Lfm25AudioShape::Demo();
    shape.seed = seed;
    if (vocab > 0) shape.vocab = vocab;
    tools::DetokenizerShape detok;
    detok.seed = seed + 1;
    if (size == "demo") {  // a small detokenizer too
      detok.hidden = 128;
      detok.heads = 4;
      detok.kv_heads = 2;
      detok.ffn = 256;
      detok.vocab = 16;
    }
    if (Status s = tools::WriteRandomLfm25Audio(out, shape); !s.ok()) return Fail(s.message());
    if (lfm2) {
      // Kyutai's layout (no config: get_mimi's heads and context); the demo's stages are narrow.
      tools::MimiShape mimi = size == "demo" ? tools::MimiShape::Lfm2Demo() : tools::MimiShape{};
      mimi.kyutai_layout = true;
      mimi.seed = seed + 1;
      mimi.codebooks = shape.codebooks;
      if (Status s = tools::WriteRandomMimi(out, mimi); !s.ok()) return Fail(s.message());
    } else if (Status s = tools::WriteRandomDetokenizer(out, detok); !s.ok()) {
      return Fail(s.message());
    }
    std::error_code ec;
    std::filesystem::copy_file(tokenizer, out + "/tokenizer.json",
                               std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) return Fail("cannot copy " + tokenizer + ": " + ec.message());
    if (!steer.empty()) {
      if (Status s = SteerTts(out, voice, steer, lfm2); !s.ok()) return Fail(s.message());
    }
  } else if (what == "lfm3-audio") {
    tools::Lfm3Shape shape;
    shape.seed = seed;
    shape.text_hidden = 256;
    shape.depth_hidden = 256;
    shape.depth_heads = 8;
    shape.depth_kv_heads = 4;
    shape.depth_ffn = 512;
    shape.with_backbone = true;
    shape.backbone_ffn = 512;
    shape.tokenizer = tokenizer;
    shape.interleaved_n_text = 6;  // LFM3-Audio's config.json (spec §1.2)
    shape.interleaved_n_audio = 12;
    if (Status s = tools::WriteRandomLfm3(out, shape); !s.ok()) return Fail(s.message());
  } else {
    std::fputs(kUsage.c_str(), stderr);
    return 2;
  }
  std::fprintf(stderr, "wrote %s\n", out.c_str());
  return 0;
}
