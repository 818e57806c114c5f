// The LFM3-Audio generation loop (spec/LFM3_AUDIO.md §7.3, the seed's `speak`, read as a
// specification): one backbone position per step, each step a text slot (the greedy token of the text
// head) or an audio slot (a frame from the depth decoder), whose embedding is fed back as the next input.
// The mode comes from the prompt's last token: `<|audio_start|>` → audio (frames until an end-of-audio
// frame, then text), `<|mixed_start|>` → the interleaved turn (n_text text slots, n_audio audio slots,
// alternating, until `<|text_end|>`, then audio until end of audio), anything else → text (a free-text
// task prompt). In text mode a generated `<|audio_start|>` / `<|mixed_start|>` switches the mode;
// `<|text_end|>` outside the interleaved turn, `<|im_end|>` and the EOS token end the turn (not fed).
// An end-of-audio frame feeds the all-EOS row (Lfm3DepthDecoder::EosRow) and switches to text.
//
// Token ids come from the tokenizer (the caller resolves the names: Lfm3TurnTokens), the EOS id and the
// interleave schedule from config.json (eos_token_id, interleaved_n_text / interleaved_n_audio).
// Lfm3Generator: one sequence, its state and its scratch held together (a model-level loop; the batched,
// multi-turn form behind the public API is Lfm3Session, session.h, on the same Lfm3Turn rules). Begin and
// Step allocate nothing.
#pragma once

#include <cstdint>
#include <span>

#include "base/aligned.h"
#include "base/status.h"
#include "models/lfm3_audio/backbone.h"
#include "models/lfm3_audio/depth_decoder.h"
#include "models/lfm3_audio/lfm3_stack.h"

namespace lfmvox {

class ThreadTeam;

// Special tokens, resolved from the tokenizer by the caller; −1 where the tokenizer lacks one (the
// mode it would select is then never entered; a missing audio_start is an error at Create).
struct Lfm3TurnTokens {
  int32_t audio_start = -1;  // `<|audio_start|>`
  int32_t mixed_start = -1;  // `<|mixed_start|>`
  int32_t text_end = -1;     // `<|text_end|>`
  int32_t im_end = -1;       // `<|im_end|>`
  int32_t eos = -1;          // Lfm3BackboneConfig::eos_token_id
};

enum class Lfm3Mode { kText, kAudio, kMixed };

// What one step produced.
struct Lfm3StepOut {
  bool audio = false;         // an audio slot (frame() holds the codes) or a text slot (token)
  int32_t token = -1;         // the greedy text token (text slots)
  bool end_of_audio = false;  // the frame holds the EOS code; its all-EOS row was fed
  bool turn_ended = false;    // the token ended the turn; nothing was fed, Step refuses until Begin
};

// The loop's slot rules (spec §7.3, above), shared by Lfm3Generator and Lfm3Session: which kind of slot
// comes next and how each slot's item moves the mode and the interleave counter. No model, no buffers.
class Lfm3Turn {
 public:
  Lfm3Turn() = default;
  // n_text, n_audio: the interleave schedule (0 = not in the files).
  Lfm3Turn(const Lfm3TurnTokens& tokens, int n_text, int n_audio)
      : tokens_(tokens), n_text_(n_text), n_audio_(n_audio) {}

  // Starts a turn whose input ends with token `last` (−1: no token): `<|audio_start|>` → audio,
  // `<|mixed_start|>` → the interleaved turn, anything else → text. Fails, changing nothing, when the
  // interleaved turn needs a schedule the files do not carry.
  Status Start(int32_t last);
  // The next slot is an audio slot (a frame from the depth decoder), else a text slot.
  bool audio_slot() const { return mode_ == Lfm3Mode::kAudio || (mode_ == Lfm3Mode::kMixed && speaking_); }
  // A text slot produced `t`. Returns true when `t` ends the turn (it is not fed); fails (changing nothing)
  // when `t` enters the interleaved turn without a schedule.
  Result<bool> OnToken(int32_t t);
  // An audio slot produced a frame (end_of_audio: it holds the EOS code; the mode goes back to text).
  void OnFrame(bool end_of_audio);
  Lfm3Mode mode() const { return mode_; }

 private:
  Status EnterMixed();
  void Tick(bool interleaving);  // the interleave counter, for a slot that began in the interleaved turn

  Lfm3TurnTokens tokens_;
  int n_text_ = 0, n_audio_ = 0;
  Lfm3Mode mode_ = Lfm3Mode::kText;
  int slots_left_ = 0;
  bool speaking_ = false, text_done_ = false;
};

class Lfm3Generator {
 public:
  // n_text, n_audio: the interleave schedule (Lfm3Config::interleaved_n_*; 0 = not in the files,
  // then entering the interleaved turn fails naming the key). max_positions: the context (prompt and
  // every step); max_prompt: the most prompt tokens one Begin takes. The models must outlive the
  // generator.
  static Result<Lfm3Generator> Create(const Lfm3Backbone& backbone, const Lfm3DepthDecoder& depth,
                                      const Lfm3TurnTokens& tokens, int n_text, int n_audio,
                                      const Lfm3AudioSampling& sampling, uint64_t seed, size_t max_positions,
                                      size_t max_prompt, int max_threads);

  // Starts a turn at position 0: runs the prompt's token ids as one prefill and takes the mode from its
  // last token. The depth decoder's history and RNG start over (seed).
  Status Begin(std::span<const int32_t> prompt, uint64_t seed, ThreadTeam& team);
  // One slot, then its input row through the backbone. Fails once the turn has ended; a step that
  // finds the context full fails and ends the turn.
  Status Step(ThreadTeam& team, Lfm3StepOut* out);

  Lfm3Mode mode() const { return turn_.mode(); }
  bool turn_ended() const { return ended_; }
  int64_t position() const { return state_.position(); }
  // The final-normed backbone state of the last position [H] (what the next slot reads).
  std::span<const float> hidden() const { return {h_.data(), h_.size()}; }
  // The row the last Step fed [H] (a token's embedding, a frame's row or the EOS row).
  std::span<const float> last_input() const { return {row_.data(), row_.size()}; }
  // The last audio slot's codes [C].
  std::span<const int32_t> frame() const { return depth_state_.codes(); }

 private:
  Status Run(size_t n, ThreadTeam& team);  // x_ [n, H] through the backbone; h_ = final norm of the last row

  const Lfm3Backbone* backbone_ = nullptr;
  const Lfm3DepthDecoder* depth_ = nullptr;
  Lfm3Turn turn_;
  Lfm3State state_;
  Lfm3Scratch scratch_;
  Lfm3DepthState depth_state_;
  Lfm3DepthScratch depth_scratch_;
  AlignedBuffer<float> x_;       // [max_prompt, H]
  AlignedBuffer<float> h_;       // [H]
  AlignedBuffer<float> row_;     // [H]
  AlignedBuffer<float> logits_;  // [V]
  bool ended_ = true;
};

}  // namespace lfmvox
