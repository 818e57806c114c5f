#include "models/lfm3_audio/backbone.h"

#include <algorithm>

#include "blocks/weights.h"
#include "threading/thread_team.h"

namespace lfmvox {

namespace {
constexpr const char* kEmbed = "lfm.embed_tokens.weight";
constexpr const char* kHead = "lfm.lm_head.weight";
}  // namespace

Result<Lfm3Backbone> Lfm3Backbone::Load(const Checkpoint& ckpt, const Lfm3BackboneConfig& config) {
  Lfm3Backbone b;
  b.config_ = config;
  LFM_ASSIGN_OR_RETURN(b.stack_, Lfm3Stack::Load(ckpt, config.stack, "lfm."));
  const int64_t H = config.stack.hidden_size, V = config.vocab_size;
  LFM_ASSIGN_OR_RETURN(TensorView emb, ckpt.Get(kEmbed));
  if (emb.shape.rank != 2 || emb.shape[0] != V || emb.shape[1] != H) {
    return InvalidArgument(StrFormat(
        "tensor %s has shape %s but the config (vocab_size, hidden_size) needs "
        "[%lld, %lld]",
        kEmbed, emb.shape.ToString().c_str(), static_cast<long long>(V), static_cast<long long>(H)));
  }
  LFM_ASSIGN_OR_RETURN(b.embed_, LoadMatrix(ckpt, kEmbed, V, H));
  if (config.tie_word_embeddings) {
    if (ckpt.Has(kHead)) {
      return InvalidArgument(StrFormat(
          "the config ties the text head to the embedding (\"tie_word_embeddings\": true) but the checkpoint "
          "has %s",
          kHead));
    }
    b.head_ = b.embed_;
  } else {
    if (!ckpt.Has(kHead)) {
      return InvalidArgument(StrFormat(
          "the config's \"tie_word_embeddings\" is false but the checkpoint lacks the text head %s", kHead));
    }
    LFM_ASSIGN_OR_RETURN(b.head_, LoadMatrix(ckpt, kHead, V, H));
  }
  return b;
}

Status Lfm3Backbone::EmbedToken(int32_t id, float* out) const {
  if (id < 0 || id >= vocab()) {
    return InvalidArgument(StrFormat("token id %d is outside the model's vocabulary [0, %d)", id, vocab()));
  }
  std::fill(out, out + embed_.cols, 0.0f);
  AccumulateRow(embed_, static_cast<size_t>(id), out);
  return Status::Ok();
}

void Lfm3Backbone::TextLogits(const float* h, size_t n, float* logits, ThreadTeam& team) const {
  ops::MatMul(h, n, head_.cols, head_, nullptr, logits, head_.rows, team);
}

}  // namespace lfmvox
