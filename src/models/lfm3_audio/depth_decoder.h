// The LFM3-Audio depth decoder (spec LFM3_AUDIO.md §5, the cortiq seed `lfm3_speech.rs`, the
// lfm3_tiny oracle's decisions 1, 5–7): one final-normed backbone state h becomes one speech frame of C
// codes, revealed by MaskGIT in passes (config `maskgit`, [4, 4, 4]):
//   slots  = depth_linear(h) + bias                                   [C, D]
//   pass p: in_i = slots_i + (i revealed ? E_i[code_i] : mask_embedding)   E_i = depth_embeddings.i.embedding
//           x    = Stack(in), bidirectional, positions 0..C−1, fresh each pass, then its final norm
//           for the pass's codebooks i (in `want` order): head_i = RMSNorm(x_i, embedding_norm_i),
//           logits_i = E_i · head_i [V]; repetition penalty; draw (or argmax); then reveal them.
// Order: `want` of pass p is order[a_p .. a_p + maskgit[p]), order = 0..C−1 (fixed) or a Fisher–Yates
// shuffle drawn per frame from the stream's SplitMix64 (i = C−1..1, j = NextU64 % (i+1), swap): C−1
// NextU64 calls, then one NextFloat per sampled codebook in pass order and `want` order; greedy draws
// nothing (decision 7). The draw itself is blocks/sampling.h's Sampler (decision 6).
// Repetition penalty (decision 6): per codebook, every code present in that codebook among the stream's
// last `repetition_window` history frames, once (presence, not count): v < 0 ? v·p : v/p, on the full
// row before top-k. The state keeps per-codebook counts of its history ring, so the penalty costs O(V)
// per row whatever the window; the Sampler then runs without its own penalty. One difference from the
// seed remains in the Sampler: at the top-k threshold it keeps tied logits (torch's rule), the seed keeps
// exactly k (the oracle has no ties). top-k 1 at T > 0 still consumes its NextFloat, as the seed's draw.
// End of audio: a frame with the EOS code (`audio_eos`) in any codebook ends the speech. All C codes are
// still sampled (the RNG stream stays the seed's); the frame is returned with end_of_audio set, is not
// added to the history, and its feedback row is the all-EOS frame's (the seed's choice; spec §5.4 leaves
// it open).
// Feedback row (spec §5.5): Σ_i codebook_embedding[V·i + c_i] [Ht], the backbone's next input.
// Only the pass's codebooks leave the stack's last layer (Lfm3ForwardKeep): the other slots' outputs are
// never read, and the kept rows are bit-identical to a full run (Lfm3DepthScratch::set_all_rows).
//
// Weights (Lfm3DepthDecoder) are immutable and shared; Lfm3DepthState is one stream's (RNG, sampling
// settings, the history ring, the last frame); Lfm3DepthScratch holds one call's activations (a
// worker's), sized once for max_batch streams. One frame allocates nothing.
// Shapes (docs/style.md legend): C codebooks, V codes per codebook (with EOS), D depth width, Ht the
// backbone width (`text_hidden`), W the penalty window, B streams in one call, P the most codebooks a
// pass reveals.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/aligned.h"
#include "base/status.h"
#include "base/trace.h"
#include "blocks/linear.h"
#include "blocks/norm.h"
#include "blocks/sampling.h"
#include "io/safetensors.h"
#include "models/lfm3_audio/lfm3_config.h"
#include "models/lfm3_audio/lfm3_stack.h"
#include "ops/ops.h"

namespace lfmvox {

class ThreadTeam;

// How a stream samples its codes. Read from the model's files by FromJson; a caller may override any
// field before creating a state.
struct Lfm3AudioSampling {
  // Defaults when the files carry no setting: LFM3-Audio-2B's published ones (spec §7.1: the projector
  // GGUF's clip.gen.audio.sampling.* and the seed's AudioSampling::default): temperature 1.0, top-k
  // 128, repetition penalty 1.1 over the last 4096 frames, random order. LFM3-Omni-2B's files say
  // 0.4, no top-k, 1.2 over 64.
  float temperature = 1.0f;         // ≤ 0: greedy (first maximum)
  int top_k = 128;                  // 0: off
  float repetition_penalty = 1.1f;  // 1: off
  int repetition_window = 4096;     // history frames the penalty looks at
  bool fixed_order = false;         // reveal 0..C−1 in order instead of the seeded random order

  // The optional `generation` section of config.json, in the keys cortiq's converter keeps
  // (`provenance.lfm3_audio.generation`, spec §7.1): audio_temperature, audio_top_k (null = no
  // top-k), audio_repetition_penalty, audio_repetition_window, and maskgit_order ("random" |
  // "fixed"). An absent section or key keeps the default above. Errors name `where` and the key.
  static Result<Lfm3AudioSampling> FromJson(const nlohmann::json& root, const std::string& where);
  Status Validate() const;
  bool greedy() const { return temperature <= 0; }
};

struct Lfm3DepthCodebook {
  ops::Weight embedding;  // [V, D] input rows of revealed codes; also the tied head
  RmsNorm norm;           // [D] `embedding_norm`, before the head
};

class Lfm3DepthDecoder {
 public:
  // Reads `depth_decoder.depth_linear.{weight,bias}`, `depth_decoder.mask_embedding`,
  // `depth_decoder.depth_embeddings.{i}.{embedding,embedding_norm}.weight`, the stack under
  // `depth_decoder.model.` and `codebook_embedding.weight`, each checked against `config`. The
  // checkpoint must outlive the decoder. `matrices`: convert every matrix (depth_linear, the stack's,
  // the codebook tables, codebook_embedding) at load time to this format (blocks/weights.h
  // ConvertMatrix; F16, BF16, Q8_0, Q4_0; rows that are not whole blocks stay as stored); none: as stored.
  static Result<Lfm3DepthDecoder> Load(const Checkpoint& ckpt, const Lfm3Config& config,
                                       std::optional<WeightFormat> matrices = std::nullopt);

  int codebooks() const { return codebooks_; }          // C
  int codebook_size() const { return codebook_size_; }  // V
  int eos() const { return eos_; }
  int text_hidden() const { return text_hidden_; }  // Ht
  int width() const { return width_; }              // D
  const std::vector<int>& maskgit() const { return maskgit_; }
  int max_pass() const { return max_pass_; }  // P
  const Lfm3Stack& stack() const { return stack_; }
  // Bytes of weights one frame reads: depth_linear, the stack once per pass, the C head tables, and
  // the embedding rows of the revealed codes.
  size_t weight_bytes() const;

  // row[Ht] = Σ_i codebook_embedding[V·i + codes[i]] for a frame of C codes in [0, V).
  Status FrameRow(std::span<const int32_t> codes, float* row) const;
  // The all-EOS frame's row: what an end-of-audio frame feeds back.
  void EosRow(float* row) const;

 private:
  friend class Lfm3DepthScratch;
  friend Status DecodeFrames(const Lfm3DepthDecoder&, std::span<const float* const>,
                             std::span<class Lfm3DepthState* const>, class Lfm3DepthScratch&, ThreadTeam&,
                             TraceSink*);

  int codebooks_ = 0, codebook_size_ = 0, eos_ = 0, text_hidden_ = 0, width_ = 0, max_pass_ = 0;
  std::vector<int> maskgit_;
  Linear depth_linear_;                          // [C·D, Ht] with bias
  AlignedBuffer<float> mask_;                    // [D] `mask_embedding`
  std::vector<Lfm3DepthCodebook> codebooks_t_;   // C
  Lfm3Stack stack_;                              // `depth_decoder.model.*`, bidirectional
  ops::Weight codebook_embedding_;               // [C·V, Ht]
  std::vector<std::vector<uint8_t>> converted_;  // matrices converted at load time (Load's `matrices`)
};

// One stream's depth-decoder state: its sampling settings and sampler, its RNG, the history ring for
// the repetition penalty and the last frame. Persists between frames; Reset starts the stream over.
class Lfm3DepthState {
 public:
  static Result<Lfm3DepthState> Create(const Lfm3DepthDecoder& model, const Lfm3AudioSampling& sampling,
                                       uint64_t seed);

  // Forgets the history and the last frame and reseeds the RNG.
  void Reset(uint64_t seed);
  // Changes the draw (temperature, top-k) and keeps the RNG stream, the history and the penalty; the
  // Sampler is rebuilt only when a value changes (allocates then).
  Status SetDraw(float temperature, int top_k);
  // Appends a frame emitted before (C codes in [0, V)) to the penalty history, as DecodeFrames does for
  // each frame it returns without end-of-audio; the oldest frame beyond the window is dropped.
  Status PushHistory(std::span<const int32_t> codes);
  size_t history_frames() const { return filled_; }  // ≤ W

  const Lfm3AudioSampling& sampling() const { return sampling_; }
  const Rng& rng() const { return rng_; }
  // The last frame DecodeFrames returned: C codes, the reveal order (C codebooks, pass by pass), and
  // whether it holds the EOS code.
  std::span<const int32_t> codes() const { return {codes_.data(), codes_.size()}; }
  std::span<const int32_t> order() const { return {order_.data(), order_.size()}; }
  bool end_of_audio() const { return end_of_audio_; }

 private:
  friend Status DecodeFrames(const Lfm3DepthDecoder&, std::span<const float* const>,
                             std::span<Lfm3DepthState* const>, class Lfm3DepthScratch&, ThreadTeam&,
                             TraceSink*);
  Status MakeSampler();  // sampler_ and draw_for_top1_ from sampling_

  const Lfm3DepthDecoder* model_ = nullptr;
  Lfm3AudioSampling sampling_;
  Sampler sampler_;  // temperature, top-k and the draw (the penalty is applied before, from counts_)
  Rng rng_;
  bool draw_for_top1_ = false;   // top-k 1 at T > 0: one NextFloat per code, as the seed's draw
  size_t window_ = 0;            // W (0 when the penalty is off)
  AlignedBuffer<int32_t> ring_;  // [W, C] the last W history frames, a ring
  size_t next_ = 0;              // the ring row the next frame goes to
  size_t filled_ = 0;
  AlignedBuffer<uint32_t> counts_;  // [C, V] how often each code occurs per codebook in the ring
  std::vector<int32_t> codes_;      // [C]
  std::vector<int32_t> order_;      // [C]
  std::vector<uint8_t> revealed_;   // [C]
  bool end_of_audio_ = false;
};

// Activations of one call over up to max_batch streams, owned by the worker that runs it.
class Lfm3DepthScratch {
 public:
  static Result<Lfm3DepthScratch> Create(const Lfm3DepthDecoder& model, size_t max_batch, int max_threads);
  size_t max_batch() const { return max_batch_; }
  size_t bytes() const;
  // false (the default): only the codebooks a pass reveals leave the stack's last layer (its o_proj,
  // gate, norms and FFN run on 4 rows of 12, ~20 % of the stack's work saved; the frames are the same
  // bit for bit). true: every slot does, so "pass{p}/layer{L-1}_out" and "pass{p}/final_norm" trace
  // all C rows of each stream (parity tests against the oracle).
  void set_all_rows(bool all) { all_rows_ = all; }

 private:
  friend Status DecodeFrames(const Lfm3DepthDecoder&, std::span<const float* const>,
                             std::span<Lfm3DepthState* const>, Lfm3DepthScratch&, ThreadTeam&, TraceSink*);
  bool all_rows_ = false;
  const Lfm3DepthDecoder* model_ = nullptr;
  size_t max_batch_ = 0;
  int max_threads_ = 0;
  AlignedBuffer<float> h_;               // [B, Ht] the streams' hidden states, gathered
  AlignedBuffer<float> slots_;           // [B·C, D]
  AlignedBuffer<float> x_;               // [B·C, D] a pass's input, then the stack's output (final-normed)
  AlignedBuffer<float> head_;            // [B·P, D] a pass's head_norm rows in (stream, want) order
  AlignedBuffer<float> logits_;          // [B·P, V] raw, then penalized in place
  AlignedBuffer<float> gather_;          // [B, D] the head_norm rows of one codebook over the streams
  AlignedBuffer<float> glogits_;         // [B, V] their logits
  std::vector<size_t> rows_;             // [B] rows per stream for the stack (C each)
  std::vector<size_t> pick_;             // [B] which (stream, want) row each gathered row is
  std::vector<size_t> keep_;             // [B·P] the slots kept through the last layer, per stream ascending
  std::vector<Lfm3State> stack_states_;  // [B] fresh each pass
  std::vector<Lfm3State*> state_ptrs_;   // [B]
  Lfm3Scratch stack_scratch_;
};

// One frame per stream, all streams in one batched pass (each weight read once per pass for the whole
// batch); h[b] is stream b's final-normed backbone state [Ht]. Each stream's frame equals what it gets
// alone, bit for bit. The frames are in each state (codes(), order(), end_of_audio()).
// Traces (sink != null; rows of all streams, stream-major): "slots" [B·C, D]; per pass p:
// "pass{p}/in" [B·C, D], "pass{p}/layer{l}_out", "pass{p}/final_norm" [B·C, D] (the stack's own names
// under the prefix; with set_all_rows(false) the last layer's and final_norm hold only the kept rows
// [B·n, D], each stream's wanted slots ascending), "pass{p}/head_norm" [B·n, D], "pass{p}/logits",
// "pass{p}/logits_penalized" [B·n, V] (n = the pass's codebooks, rows in want order). Allocates nothing.
Status DecodeFrames(const Lfm3DepthDecoder& model, std::span<const float* const> h,
                    std::span<Lfm3DepthState* const> states, Lfm3DepthScratch& scratch, ThreadTeam& team,
                    TraceSink* sink);
// One stream.
Status DecodeFrame(const Lfm3DepthDecoder& model, const float* h, Lfm3DepthState& state,
                   Lfm3DepthScratch& scratch, ThreadTeam& team, TraceSink* sink);

// The feedback row for the state's last frame: FrameRow of its codes, or EosRow at end of audio.
Status FeedbackRow(const Lfm3DepthDecoder& model, const Lfm3DepthState& state, float* row);

}  // namespace lfmvox
