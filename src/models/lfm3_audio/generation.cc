#include "models/lfm3_audio/generation.h"

#include <cstring>

#include "ops/ops.h"
#include "threading/thread_team.h"

namespace lfmvox {

Result<Lfm3Generator> Lfm3Generator::Create(const Lfm3Backbone& backbone, const Lfm3DepthDecoder& depth,
                                            const Lfm3TurnTokens& tokens, int n_text, int n_audio,
                                            const Lfm3AudioSampling& sampling, uint64_t seed,
                                            size_t max_positions, size_t max_prompt, int max_threads) {
  if (depth.text_hidden() != backbone.hidden()) {
    return InvalidArgument(
        StrFormat("the depth decoder reads %d-wide backbone states but the backbone is %d wide",
                  depth.text_hidden(), backbone.hidden()));
  }
  const int V = backbone.vocab();
  for (int32_t id : {tokens.audio_start, tokens.mixed_start, tokens.text_end, tokens.im_end, tokens.eos}) {
    if (id < -1 || id >= V) {
      return InvalidArgument(StrFormat("special token id %d is outside the vocabulary [0, %d)", id, V));
    }
  }
  if (tokens.audio_start < 0) return InvalidArgument("the tokenizer lacks <|audio_start|>");
  if (n_text < 0 || n_audio < 0) return InvalidArgument("the interleave schedule needs counts >= 0");
  if (max_prompt == 0 || max_prompt > max_positions) {
    return InvalidArgument("Lfm3Generator needs 1 <= max_prompt <= max_positions");
  }
  Lfm3Generator g;
  g.backbone_ = &backbone;
  g.depth_ = &depth;
  g.turn_ = Lfm3Turn(tokens, n_text, n_audio);
  LFM_ASSIGN_OR_RETURN(g.state_, Lfm3State::Create(backbone.stack(), max_prompt, max_positions));
  LFM_ASSIGN_OR_RETURN(g.scratch_,
                       Lfm3Scratch::Create(backbone.stack(), max_prompt, g.state_.max_keys(), max_threads));
  LFM_ASSIGN_OR_RETURN(g.depth_state_, Lfm3DepthState::Create(depth, sampling, seed));
  LFM_ASSIGN_OR_RETURN(g.depth_scratch_, Lfm3DepthScratch::Create(depth, 1, max_threads));
  const size_t H = static_cast<size_t>(backbone.hidden());
  g.x_.Reset(max_prompt * H);
  g.h_.Reset(H);
  g.row_.Reset(H);
  g.logits_.Reset(static_cast<size_t>(V));
  return g;
}

Status Lfm3Generator::Run(size_t n, ThreadTeam& team) {
  const size_t H = static_cast<size_t>(backbone_->hidden());
  LFM_RETURN_IF_ERROR(Lfm3Forward(backbone_->stack(), state_, x_.data(), n, scratch_, team, nullptr));
  Lfm3FinalNorm(backbone_->stack(), x_.data() + (n - 1) * H, 1, h_.data());
  return Status::Ok();
}

Status Lfm3Turn::EnterMixed() {
  if (n_text_ == 0 || n_audio_ == 0) {
    return NotFound(
        "the interleaved turn needs the schedule config.json's \"interleaved_n_text\" and "
        "\"interleaved_n_audio\" give; the model's files do not carry it");
  }
  mode_ = Lfm3Mode::kMixed;
  slots_left_ = n_text_;
  speaking_ = false;
  text_done_ = false;
  return Status::Ok();
}

Status Lfm3Turn::Start(int32_t last) {
  if (last >= 0 && last == tokens_.mixed_start) return EnterMixed();
  mode_ = last >= 0 && last == tokens_.audio_start ? Lfm3Mode::kAudio : Lfm3Mode::kText;
  return Status::Ok();
}

void Lfm3Turn::Tick(bool interleaving) {
  if (interleaving && !text_done_ && --slots_left_ == 0) {
    speaking_ = !speaking_;
    slots_left_ = speaking_ ? n_audio_ : n_text_;
  }
}

Result<bool> Lfm3Turn::OnToken(int32_t t) {
  const bool interleaving = mode_ == Lfm3Mode::kMixed;
  if (t == tokens_.text_end && interleaving) {
    text_done_ = true;  // the interleaved turn's text is over; its speech runs on
    speaking_ = true;
  } else if (t == tokens_.text_end || t == tokens_.im_end || t == tokens_.eos) {
    return true;
  } else if (!interleaving && t == tokens_.audio_start) {
    mode_ = Lfm3Mode::kAudio;
  } else if (!interleaving && t == tokens_.mixed_start) {
    LFM_RETURN_IF_ERROR(EnterMixed());
  }
  Tick(interleaving);
  return false;
}

void Lfm3Turn::OnFrame(bool end_of_audio) {
  const bool interleaving = mode_ == Lfm3Mode::kMixed;
  if (end_of_audio) mode_ = Lfm3Mode::kText;
  Tick(interleaving);
}

Status Lfm3Generator::Begin(std::span<const int32_t> prompt, uint64_t seed, ThreadTeam& team) {
  if (prompt.empty()) return InvalidArgument("the prompt is empty");
  if (prompt.size() > state_.max_rows()) {
    return OutOfRange(
        StrFormat("a prompt of %zu tokens exceeds this generator's %zu", prompt.size(), state_.max_rows()));
  }
  const size_t H = static_cast<size_t>(backbone_->hidden());
  for (size_t i = 0; i < prompt.size(); ++i) {
    LFM_RETURN_IF_ERROR(backbone_->EmbedToken(prompt[i], x_.data() + i * H));
  }
  LFM_RETURN_IF_ERROR(turn_.Start(prompt.back()));  // before any work: fails cleanly
  state_.Reset();
  depth_state_.Reset(seed);
  ended_ = true;
  LFM_RETURN_IF_ERROR(Run(prompt.size(), team));
  ended_ = false;
  std::memcpy(row_.data(), x_.data() + (prompt.size() - 1) * H, H * sizeof(float));
  return Status::Ok();
}

Status Lfm3Generator::Step(ThreadTeam& team, Lfm3StepOut* out) {
  if (ended_) return InvalidArgument("the turn has ended (or not begun): call Begin first");
  *out = Lfm3StepOut{};
  const size_t H = static_cast<size_t>(backbone_->hidden());
  if (turn_.audio_slot()) {
    out->audio = true;
    LFM_RETURN_IF_ERROR(DecodeFrame(*depth_, h_.data(), depth_state_, depth_scratch_, team, nullptr));
    out->end_of_audio = depth_state_.end_of_audio();
    turn_.OnFrame(out->end_of_audio);
    LFM_RETURN_IF_ERROR(FeedbackRow(*depth_, depth_state_, row_.data()));
  } else {
    backbone_->TextLogits(h_.data(), 1, logits_.data(), team);
    const int32_t t = static_cast<int32_t>(ops::ArgMax(logits_.data(), logits_.size()));
    out->token = t;
    LFM_ASSIGN_OR_RETURN(const bool end, turn_.OnToken(t));
    if (end) {
      out->turn_ended = true;
      ended_ = true;
      return Status::Ok();
    }
    LFM_RETURN_IF_ERROR(backbone_->EmbedToken(t, row_.data()));
  }
  std::memcpy(x_.data(), row_.data(), H * sizeof(float));
  const Status st = Run(1, team);
  if (!st.ok()) ended_ = true;  // the slot's mode change stands but its row never ran: the turn is over
  return st;
}

}  // namespace lfmvox
