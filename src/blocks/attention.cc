#include "blocks/attention.h"

#include <cmath>
#include <cstring>

#include "ops/ops.h"
#include "threading/thread_team.h"

namespace lfmvox {

void KvCache::Allocate(size_t rows, size_t kv_dim, size_t sliding_window) {
  capacity = rows;
  window = sliding_window;
  k.Reset(rows * kv_dim);
  v.Reset(rows * kv_dim);
  Clear();
}

void AttentionScratch::Allocate(size_t max_keys, int max_threads) {
  ld = RoundUp(max_keys, kAlign / sizeof(float));  // each thread's row starts on its own cache line
  threads = max_threads;
  scores.Reset(static_cast<size_t>(max_threads) * ld);
}

void AttendSequences(const AttentionShape& shape, const RmsNorm& q_norm, const RmsNorm& k_norm,
                     const RopeTable& rope, std::span<const AttentionSeq> seqs, float* q, size_t ldq,
                     const float* k, const float* v, size_t ldkv, float* out, size_t ldo,
                     AttentionScratch& scratch, ThreadTeam& team) {
  const size_t hd = shape.head_dim, heads = shape.heads, kv_heads = shape.kv_heads;
  const size_t KV = shape.kv_dim(), group = heads / kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  size_t rows = 0;
  for (const AttentionSeq& s : seqs) {
    KvCache& c = *s.cache;
    for (size_t r = 0; r < s.n; ++r) {
      const size_t row = s.row0 + r;
      const float* cs = s.rope + r * s.rope_ld;
      float* qr = q + row * ldq;
      q_norm.ForwardHeads(qr, 1, ldq, heads);
      rope.Apply(qr, heads, cs);
      float* kr = c.k.data() + (c.len + r) * KV;
      std::memcpy(kr, k + row * ldkv, KV * sizeof(float));
      std::memcpy(c.v.data() + (c.len + r) * KV, v + row * ldkv, KV * sizeof(float));
      k_norm.ForwardHeads(kr, 1, KV, kv_heads);
      rope.Apply(kr, kv_heads, cs);
    }
    rows += s.n;
  }
  // One task per (row, head) over every sequence; the cache row of a query is len + r (before the
  // lengths are bumped below), and it sees the keys [lo, that row] (bidirectional: [0, len + n)).
  team.Run(rows * heads, [&](size_t task, int thread) {
    size_t row = task / heads;
    const size_t h = task % heads, g = h / group;
    size_t si = 0;
    while (row >= seqs[si].n) row -= seqs[si++].n;
    const AttentionSeq& s = seqs[si];
    const KvCache& c = *s.cache;
    const size_t qi = c.len + row;
    const size_t lo = !s.bidirectional && c.window && qi + 1 > c.window ? qi + 1 - c.window : 0;
    const size_t hi = s.bidirectional ? c.len + s.n : qi + 1;  // keys [lo, hi)
    ops::AttendOne(q + (s.row0 + row) * ldq + h * hd, c.k.data() + lo * KV + g * hd, KV,
                   c.v.data() + lo * KV + g * hd, KV, hi - lo, hd, scale,
                   scratch.scores.data() + static_cast<size_t>(thread) * scratch.ld,
                   out + (s.row0 + row) * ldo + h * hd);
  });
  for (const AttentionSeq& s : seqs) {
    KvCache& c = *s.cache;
    c.len += s.n;
    if (c.window && c.len > c.window - 1) {  // keep the last window-1 rows for the next call
      const size_t drop = c.len - (c.window - 1);
      std::memmove(c.k.data(), c.k.data() + drop * KV, (c.window - 1) * KV * sizeof(float));
      std::memmove(c.v.data(), c.v.data() + drop * KV, (c.window - 1) * KV * sizeof(float));
      c.len = c.window - 1;
      c.first_pos += static_cast<int64_t>(drop);
    }
  }
}

}  // namespace lfmvox
