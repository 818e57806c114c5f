// lfmvox-make-checkpoint: writes a random checkpoint in the real layout.
//   lfmvox-make-checkpoint detokenizer --out DIR [--seed N] [--vocab N]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tools/checkpoint_gen.h"

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != "detokenizer") {
    std::fprintf(stderr, "usage: lfmvox-make-checkpoint detokenizer --out DIR [--seed N] [--vocab N]\n");
    return 2;
  }
  std::string out;
  lfmvox::tools::DetokenizerShape shape;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--out") out = v;
    else if (k == "--seed") shape.seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--vocab") shape.vocab = std::atoi(v.c_str());
    else { std::fprintf(stderr, "unknown option %s\n", k.c_str()); return 2; }
  }
  if (out.empty() || shape.vocab < 1) {
    std::fprintf(stderr, "lfmvox-make-checkpoint: --out DIR is required (and --vocab must be positive)\n");
    return 2;
  }
  lfmvox::Status s = lfmvox::tools::WriteRandomDetokenizer(out, shape);
  if (!s.ok()) {
    std::fprintf(stderr, "lfmvox-make-checkpoint: error: %s\n", s.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "wrote %s/audio_detokenizer\n", out.c_str());
  return 0;
}
