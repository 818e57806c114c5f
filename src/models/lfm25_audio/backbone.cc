#include "models/lfm25_audio/backbone.h"

#include <algorithm>
#include <cstring>

#include "blocks/weights.h"
#include "threading/thread_team.h"

namespace lfmvox {

Result<Lfm2Backbone> Lfm2Backbone::Load(const Checkpoint& ckpt, const Lfm2Config& config, int num_codebooks,
                                        bool require_audio) {
  Lfm2Backbone b;
  LFM_ASSIGN_OR_RETURN(b.stack_, Lfm2Stack::Load(ckpt, config, "lfm."));
  const int64_t H = config.hidden_size;
  LFM_ASSIGN_OR_RETURN(TensorView emb, ckpt.Get("lfm.embed_tokens.weight"));
  if (emb.shape.rank != 2 || emb.shape[1] != H || emb.shape[0] < 1) {
    return InvalidArgument(StrFormat("tensor lfm.embed_tokens.weight has shape %s but needs [vocab, %lld]",
                                     emb.shape.ToString().c_str(), static_cast<long long>(H)));
  }
  LFM_ASSIGN_OR_RETURN(b.embed_, LoadMatrix(ckpt, "lfm.embed_tokens.weight", emb.shape[0], H));

  b.offsets_.resize(static_cast<size_t>(num_codebooks));
  if (!require_audio && !ckpt.Has("audio_embedding.embedding.weight")) return b;
  LFM_ASSIGN_OR_RETURN(TensorView audio, ckpt.Get("audio_embedding.embedding.weight"));
  if (audio.shape.rank != 2 || audio.shape[1] != H || audio.shape[0] % num_codebooks != 0) {
    return InvalidArgument(
        StrFormat("tensor audio_embedding.embedding.weight has shape %s but needs [%d·codes, %lld]",
                  audio.shape.ToString().c_str(), num_codebooks, static_cast<long long>(H)));
  }
  b.audio_vocab_ = static_cast<int>(audio.shape[0] / num_codebooks);
  // codebook_offsets [num_codebooks] (int64): where each codebook's rows
  // start. GGUF files drop it; llama.cpp then takes codebook k at
  // k · rows/codebooks, which is what liquid-audio stores.
  if (ckpt.Has("codebook_offsets")) {
    LFM_ASSIGN_OR_RETURN(TensorView off, ckpt.Get("codebook_offsets", Shape{num_codebooks}));
    if (off.dtype != DType::kI64) return InvalidArgument("tensor codebook_offsets must be I64");
    std::memcpy(b.offsets_.data(), off.data, b.offsets_.size() * 8);
  } else {
    for (int k = 0; k < num_codebooks; ++k) b.offsets_[static_cast<size_t>(k)] = int64_t{k} * b.audio_vocab_;
  }
  for (int k = 0; k < num_codebooks; ++k) {
    const int64_t o = b.offsets_[static_cast<size_t>(k)];
    if (o < 0 || o + b.audio_vocab_ > audio.shape[0]) {
      return InvalidArgument(
          StrFormat("codebook_offsets[%d] = %lld points outside audio_embedding (%lld rows)", k,
                    static_cast<long long>(o), static_cast<long long>(audio.shape[0])));
    }
  }
  LFM_ASSIGN_OR_RETURN(b.audio_, LoadMatrix(ckpt, "audio_embedding.embedding.weight", audio.shape[0], H));
  return b;
}

size_t Lfm2Backbone::step_weight_bytes() const { return stack_.weight_bytes() + embed_.bytes(); }

Status Lfm2Backbone::EmbedToken(int32_t id, float* out) const {
  if (id < 0 || id >= vocab()) {
    return InvalidArgument(StrFormat("token id %d is outside the model's vocabulary [0, %d)", id, vocab()));
  }
  std::fill(out, out + embed_.cols, 0.0f);
  AccumulateRow(embed_, static_cast<size_t>(id), out);
  return Status::Ok();
}

Status Lfm2Backbone::EmbedAudioFrame(std::span<const int32_t> codes, float* out) const {
  if (codes.size() != offsets_.size()) {
    return InvalidArgument(
        StrFormat("an audio frame holds %zu codes, not %zu", offsets_.size(), codes.size()));
  }
  if (audio_vocab_ == 0) {
    return NotFound(
        "the model was loaded without its audio embedding table (the vocoder-*.gguf file, or the mmproj's "
        "copy), so it takes no audio-out frames; add the vocoder file beside the backbone");
  }
  for (size_t k = 0; k < codes.size(); ++k) {
    if (codes[k] < 0 || codes[k] >= audio_vocab_) {
      return InvalidArgument(
          StrFormat("audio code %d (codebook %zu) is outside [0, %d)", codes[k], k, audio_vocab_));
    }
  }
  std::fill(out, out + audio_.cols, 0.0f);
  for (size_t k = 0; k < codes.size(); ++k) {
    AccumulateRow(audio_, static_cast<size_t>(codes[k] + offsets_[k]), out);
  }
  return Status::Ok();
}

void Lfm2Backbone::TextLogits(const float* h, size_t n, float* logits, ThreadTeam& team) const {
  ops::MatMul(h, n, embed_.cols, embed_, nullptr, logits, embed_.rows, team);
}

}  // namespace lfmvox
