// Liquid's GGUF release of LFM2.5-Audio (spec GGUF_AND_MIMI.md part 1), read
// as the Hugging Face snapshot it was converted from, and written from one.
//
// The release is four files: the LFM2 backbone (arch `lfm2`, with the text
// tokenizer), the encoder `mmproj-…` (arch `clip`, projector `lfm2a`), the
// `vocoder-…` (depthformer, audio embeddings, the detokenizer's code table and
// iSTFT window) and the detokenizer `tokenizer-…` (arch `lfm2`, no vocab). The
// older "merged" vocoder, which also holds the detokenizer's layers under
// their Hugging Face names, is read too.
//
// Reading maps every GGUF tensor back to its Hugging Face name and shape, in
// place in the mmap (block formats included), so the stage loaders are the
// same for both layouts. The configuration is rebuilt from the files'
// metadata and tensor shapes; what Liquid's files do not store (the log-mel
// front end, the encoder's fixed choices, the interleaving schedule, the
// codec's hop) comes from the `lfmvox.config` / `lfmvox.detokenizer_config`
// keys lfmvox's writer adds, else from the published LFM2.5-Audio-1.5B
// config.json, which llama.cpp hard-codes the same way.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/safetensors.h"
#include "models/lfm25_audio/lfm2_config.h"
#include "tensor/matrix.h"
#include "text/tokenizer_vocab.h"

namespace lfmvox {

// The four files of one release (paths).
struct Lfm25GgufFiles {
  std::string backbone, mmproj, vocoder, detokenizer;
};

// True when `path` is a .gguf file, or a directory holding .gguf files and no
// safetensors checkpoint (model.safetensors or its index: a Hugging Face
// snapshot wins over GGUF files converted beside it; name one of those files
// to load them). A config.json beside the GGUF files is allowed.
bool LooksLikeGgufRelease(const std::string& path);

// Finds the four files by their content (architecture, tensors), not their
// names. `path` is a directory, or one file of the set (which then picks the
// set when the directory holds several quantizations: files are grouped by the
// suffix after their last '-', e.g. "Q4_0"). A part the folder lacks has an
// empty path: without the mmproj there is no speech input, without the vocoder
// (or the detokenizer file) no speech output; the model loads without it.
Result<Lfm25GgufFiles> FindLfm25GgufRelease(const std::string& path);

// An opened release: the weights under their Hugging Face names, and the
// config.json and audio_detokenizer/config.json they imply.
struct Lfm25GgufModel {
  std::optional<Checkpoint> weights;      // model.safetensors' tensors (without want_main: none)
  std::optional<Checkpoint> detokenizer;  // audio_detokenizer/model.safetensors' tensors
  nlohmann::json config;                  // as config.json
  nlohmann::json detokenizer_config;      // as audio_detokenizer/config.json (null without it)
  TokenizerVocab vocab;                   // tokenizer.ggml.* of the backbone
  std::string where;                      // the backbone's path, for messages
  bool has_encoder = false;               // the mmproj was there: the conformer and adapter
  bool has_depthformer = false;           // the vocoder was there: depthformer and audio tables
};

// Opens the files (mmap) and maps them. `want_main` false opens only what the
// detokenizer needs (vocoder + detokenizer files).
Result<Lfm25GgufModel> OpenLfm25GgufRelease(const Lfm25GgufFiles& files, bool want_main = true);

struct Lfm25GgufWriteOptions {
  // The type of every quantizable 2-D weight: kF32, kF16, kBF16, kQ8_0 or
  // kQ4_0. Per-tensor rules follow llama.cpp's converter (the float types)
  // and llama-quantize's defaults (the 8- and 4-bit ones): norms, biases,
  // 1-D tensors, the short-conv taps and the encoder's convolution module
  // stay F32, but for the pointwise convolutions, which the 8- and 4-bit
  // types quantize; with Q4_0 the tied token embedding / text head becomes
  // Q6_K; a row that is no whole number of blocks falls back to F16.
  WeightFormat type = WeightFormat::kF16;
  // Globs (fnmatch) on the GGUF tensor names kept in F32 whatever `type`
  // says, e.g. "a.blk.*.conv_pw*" or "token_embd.weight"; a glob that names
  // no tensor is an error.
  std::vector<std::string> keep_f32;
  // Adds lfmvox.config / lfmvox.detokenizer_config (the snapshot's two
  // config.json files), so that nothing falls back to the published defaults.
  // Off writes exactly the keys Liquid's files have.
  bool embed_configs = true;
  std::string name = "LFM2.5-Audio-1.5B";  // file stem; files are <prefix><name>-<TYPE>.gguf
};

// Writes the four files of a release from a Hugging Face snapshot directory
// into out_dir (created if missing). Returns the paths written. For an
// LFM2-Audio-1.5B snapshot (no audio_detokenizer/) the vocoder has no
// detokenizer tensors and `detokenizer` is Kyutai's Mimi file, copied beside.
Result<Lfm25GgufFiles> WriteLfm25GgufRelease(const std::string& snapshot_dir, const std::string& out_dir,
                                             const Lfm25GgufWriteOptions& options);

// One LFM2 GGUF file on its own (a release's backbone or detokenizer, or any
// llama.cpp LFM2 text model): its stack configuration and its tensors under
// the Hugging Face names (lfm.embed_tokens.weight, lfm.layers.N.…).
struct Lfm2Gguf {
  Lfm2Config config;
  Checkpoint weights;
};
Result<Lfm2Gguf> OpenLfm2Gguf(const std::string& path);

// Quantizing at load time: the checkpoint's matrices in `type` (kF16, kBF16,
// kQ8_0 or kQ4_0) by the per-tensor rules of WriteLfm25GgufRelease (tensors
// those rules keep in F32 stay as stored), held in memory the returned
// checkpoint owns. Costs one pass over the weights and their quantized size in RAM.
Result<Checkpoint> QuantizeCheckpoint(Checkpoint ck, WeightFormat type);

// "F16", "Q4_0", ... as used in the file names; false when `name` is none of
// the types the writer takes.
bool ParseGgufWriteType(const std::string& name, WeightFormat* out);

}  // namespace lfmvox
