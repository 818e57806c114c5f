// lfmvox-mimi-checkpoint --out DIR [--size tiny|real] [--layout oracle|kyutai] [--bf16] [--seed N]
// Writes a random Mimi decoder checkpoint (tools/mimi_checkpoint_gen.h).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tools/mimi_checkpoint_gen.h"

int main(int argc, char** argv) {
  const char* usage =
      "usage: lfmvox-mimi-checkpoint --out DIR [--size tiny|real] [--layout oracle|kyutai] [--bf16] [--seed "
      "N]\n";
  lfmvox::tools::MimiShape s;
  std::string out, size = "real", layout = "oracle";
  bool bf16 = false;
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--bf16") {
      bf16 = true;
      continue;
    }
    if (i + 1 >= argc) return std::fprintf(stderr, "option %s needs a value\n%s", k.c_str(), usage), 2;
    const std::string v = argv[++i];
    if (k == "--out") {
      out = v;
    } else if (k == "--size" && (v == "tiny" || v == "real")) {
      size = v;
    } else if (k == "--layout" && (v == "oracle" || v == "kyutai")) {
      layout = v;
    } else if (k == "--seed" && !v.empty() && v.find_first_not_of("0123456789") == std::string::npos &&
               v.size() < 20) {
      seed = std::strtoull(v.c_str(), nullptr, 10);
    } else {
      return std::fprintf(stderr, "bad option %s %s\n%s", k.c_str(), v.c_str(), usage), 2;
    }
  }
  if (out.empty()) return std::fprintf(stderr, "--out DIR is required\n%s", usage), 2;
  if (size == "tiny") s = lfmvox::tools::MimiShape::Tiny();
  s.bf16 = bf16;
  s.seed = seed;
  s.kyutai_layout = layout == "kyutai";
  const lfmvox::Status st = lfmvox::tools::WriteRandomMimi(out, s);
  if (!st.ok()) return std::fprintf(stderr, "lfmvox-mimi-checkpoint: %s\n", st.ToString().c_str()), 1;
  return 0;
}
