// The LFM3 backbone (LFM3-1.7B inside LFM3-Audio, spec/LFM3_AUDIO.md §2.1): the token embedding, the
// LFM3 stack in its per-layer causal mode (conv layers, full-causal attention with partial rotary,
// sliding-window attention with its own RoPE base; sandwich norms and per-head gates where the tensors
// have them), the final norm and the text head.
//   text position:      x = embed_tokens[id]
//   audio-out position: x = Lfm3DepthDecoder::FrameRow(codes) (Σ codebook_embedding rows)
//   text logits:        head · final_norm(h), head = embed_tokens (tied) or lm_head
// Tensors: `lfm.layers.{i}.*`, `lfm.embedding_norm.weight`, `lfm.embed_tokens.weight` [V, H] and, untied,
// `lfm.lm_head.weight` [V, H]. The `lfm.` prefix is the one llama.cpp's converter strips from LFM3-Audio's
// text model (spec §1.4); the untied head's name is assumed (no released file has been read).
// There is no oracle for the backbone: what is verified is listed in this folder's README.
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"
#include "io/safetensors.h"
#include "models/lfm3_audio/lfm3_config.h"
#include "models/lfm3_audio/lfm3_stack.h"

namespace lfmvox {

class ThreadTeam;

class Lfm3Backbone {
 public:
  // Reads the tensors above with the shapes the config implies; the checkpoint must outlive the
  // backbone. The embedding's rows must be the config's vocab_size; a tied config with an lm_head
  // tensor, or an untied one without, is an error naming the tensor.
  static Result<Lfm3Backbone> Load(const Checkpoint& ckpt, const Lfm3BackboneConfig& config);

  const Lfm3BackboneConfig& config() const { return config_; }
  const Lfm3Stack& stack() const { return stack_; }
  int hidden() const { return config_.stack.hidden_size; }
  int vocab() const { return config_.vocab_size; }
  bool tied() const { return config_.tie_word_embeddings; }

  // out [H] = embed_tokens[id]; id must be in [0, vocab()).
  Status EmbedToken(int32_t id, float* out) const;
  // logits [n, V] = h · headᵀ for n final-normed hidden states h [n, H], each row independent of the
  // others (the MatMul contract).
  void TextLogits(const float* h, size_t n, float* logits, ThreadTeam& team) const;

 private:
  Lfm3BackboneConfig config_;
  Lfm3Stack stack_;
  ops::Weight embed_;  // [V, H]
  ops::Weight head_;   // [V, H]: embed_ when tied
};

}  // namespace lfmvox
