// Grouped-query attention core shared by the LFM2 stack and the depthformer, over rows of several
// independent sequences at once (batched sessions): per-head q/k RMSNorm, RoPE at each row's own
// position, the new keys/values appended to the row's sequence cache, then every query against the
// keys of its own sequence (causal, optionally a sliding window, or bidirectional). The projections around it
// are the caller's (separate q/k/v in LFM2, one fused qkv in the depthformer). Shapes (docs/style.md legend):
// R rows in the call, hd head dim, Q = heads·hd, KV = kv_heads·hd.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/aligned.h"
#include "base/status.h"
#include "blocks/norm.h"
#include "blocks/rope.h"

namespace lfmvox {

class ThreadTeam;

struct AttentionShape {
  size_t heads = 0;
  size_t kv_heads = 0;
  size_t head_dim = 0;
  size_t q_dim() const { return heads * head_dim; }
  size_t kv_dim() const { return kv_heads * head_dim; }
};

// One sequence's keys and values for one layer: rows [0, len) hold positions
// [first_pos, first_pos + len). Full attention grows to the capacity; a sliding window keeps only
// the last window-1 rows between calls (a ring kept linear by one small shift per call).
struct KvCache {
  AlignedBuffer<float> k;  // [capacity, KV] after k_norm and RoPE
  AlignedBuffer<float> v;  // [capacity, KV]
  size_t capacity = 0;
  size_t window = 0;  // keys per query for sliding attention; 0 = full causal
  size_t len = 0;
  int64_t first_pos = 0;

  void Allocate(size_t rows, size_t kv_dim, size_t sliding_window);
  void Clear() {
    len = 0;
    first_pos = 0;
  }
  int64_t next_position() const { return first_pos + static_cast<int64_t>(len); }
  // Rows a call of n new positions needs before the window shift.
  bool Fits(size_t n) const { return len + n <= capacity; }
  size_t bytes() const { return (k.size() + v.size()) * sizeof(float); }
};

// A sequence's share of a batched call: rows [row0, row0 + n), whose rotary angles are the rows
// of `rope` ([n, hd] cos | sin, or one row for all when rope_ld == 0). `bidirectional`: every query
// sees every key of its cache, the call's later rows included (the cache's window is ignored; the
// LFM3 depth decoder clears the cache before each call).
struct AttentionSeq {
  KvCache* cache = nullptr;
  size_t row0 = 0;
  size_t n = 0;
  const float* rope = nullptr;
  size_t rope_ld = 0;
  bool bidirectional = false;
};

// Per-thread attention scores, sized once for the longest cache a call may see.
struct AttentionScratch {
  AlignedBuffer<float> scores;  // [threads, ld]
  size_t ld = 0;
  int threads = 0;
  void Allocate(size_t max_keys, int max_threads);
};

// q [R, ldq] (Q wide) is normed and rotated in place; k, v [R, ldkv] are the raw key and value
// projections; out [R, ldo] receives the attention output (Q wide). Every cache must fit its rows
// (KvCache::Fits) and hold at most scratch.ld keys; the caller checks, this does not.
void AttendSequences(const AttentionShape& shape, const RmsNorm& q_norm, const RmsNorm& k_norm,
                     const RopeTable& rope, std::span<const AttentionSeq> seqs, float* q, size_t ldq,
                     const float* k, const float* v, size_t ldkv, float* out, size_t ldo,
                     AttentionScratch& scratch, ThreadTeam& team);

}  // namespace lfmvox
