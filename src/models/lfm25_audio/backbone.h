// The LFM2 backbone of LFM2.5-Audio: token and audio-frame embeddings, the
// LFM2 stack (full causal attention), and the tied text head.
//   text position:      x = embed_tokens[id]
//   audio-out position: x = Σ_k audio_embedding[code_k + codebook_offsets[k]]
//   audio-in position:  x = adapter output (the encoder's)
//   text logits:        embed_tokens · final_norm(h)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "io/safetensors.h"
#include "models/lfm25_audio/lfm2_stack.h"

namespace lfmvox {

class ThreadTeam;

class Lfm2Backbone {
 public:
  // Reads lfm.* (stack, embed_tokens), audio_embedding.embedding.weight and
  // codebook_offsets. The checkpoint must outlive the backbone. With
  // `require_audio` false a checkpoint without the audio table loads (a GGUF
  // backbone alone: text and speech in only); audio_vocab() is then 0 and an
  // audio-out position is refused.
  static Result<Lfm2Backbone> Load(const Checkpoint& ckpt, const Lfm2Config& config, int num_codebooks,
                                   bool require_audio = true);

  const Lfm2Stack& stack() const { return stack_; }
  int hidden() const { return stack_.config().hidden_size; }
  int vocab() const { return static_cast<int>(embed_.rows); }  // rows of embed_tokens = text logits
  int num_codebooks() const { return static_cast<int>(offsets_.size()); }
  // Codes per codebook in the audio embedding (2049: 2048 codes + end-of-audio).
  int audio_vocab() const { return audio_vocab_; }
  // Bytes of weights one decode step reads (stack + one text head pass).
  size_t step_weight_bytes() const;

  // out [H] = embed_tokens[id]; id must be in [0, vocab()).
  Status EmbedToken(int32_t id, float* out) const;
  // out [H] = Σ_k audio_embedding[codes[k] + offset_k]; codes in [0, audio_vocab()).
  Status EmbedAudioFrame(std::span<const int32_t> codes, float* out) const;
  // logits [n, V] = h · embed_tokensᵀ for n final-normed hidden states h [n, H] (each row
  // independent of the others: batched sessions get their own logits bit for bit).
  void TextLogits(const float* h, size_t n, float* logits, ThreadTeam& team) const;
  void TextLogits(const float* h, float* logits, ThreadTeam& team) const { TextLogits(h, 1, logits, team); }

 private:
  Lfm2Stack stack_;
  ops::Weight embed_;             // [V, H] (V the text vocab)
  ops::Weight audio_;             // [C·audio_vocab, H]
  std::vector<int64_t> offsets_;  // [num_codebooks] row offset of each codebook in audio_
  int audio_vocab_ = 0;
};

}  // namespace lfmvox
