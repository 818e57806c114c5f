// A C++ program using the installed lfmvox (tests/install/install_test.sh): prints the library's version
// and decodes a codes file with the detokenizer, comparing the PCM with the oracle's trace.
// usage: consumer DETOKENIZER_DIR CODES_FILE ORACLE_PCM.npy
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "lfmvox/audio_io.h"
#include "lfmvox/lfmvox.h"

namespace {

// A little-endian float32 .npy array, flattened (the oracle's traces are such arrays).
std::vector<float> ReadNpyF32(const char* path) {
  std::ifstream f(path, std::ios::binary);
  char magic[10];
  if (!f.read(magic, 10) || std::memcmp(magic, "\x93NUMPY", 6) != 0) return {};
  const size_t header = static_cast<unsigned char>(magic[8]) | static_cast<unsigned char>(magic[9]) << 8;
  std::string h(header, '\0');
  f.read(h.data(), static_cast<std::streamsize>(header));
  if (h.find("'<f4'") == std::string::npos) return {};
  std::vector<float> v;
  float x;
  while (f.read(reinterpret_cast<char*>(&x), sizeof x)) v.push_back(x);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s DETOKENIZER_DIR CODES_FILE ORACLE_PCM.npy\n", argv[0]);
    return 2;
  }
  std::printf("version %s\n", lfmvox::Version());
  std::printf("header_version %s\n", LFMVOX_VERSION_STRING);
  // A wrong path is an error value, not an exception or a crash.
  auto missing = lfmvox::DetokenizerModel::Load("/nonexistent/lfmvox/model");
  std::printf("missing_model_error %s\n",
              missing.ok() ? "none" : lfmvox::StatusCodeName(missing.status().code()));

  auto model = lfmvox::DetokenizerModel::Load(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  auto codes = lfmvox::LoadCodes(argv[2], (*model)->num_codebooks());
  if (!codes.ok()) {
    std::fprintf(stderr, "%s\n", codes.status().ToString().c_str());
    return 1;
  }
  auto stream = lfmvox::DetokenizerStream::Create(*model, {.threads = 1, .max_frames_per_call = 1});
  if (!stream.ok()) {
    std::fprintf(stderr, "%s\n", stream.status().ToString().c_str());
    return 1;
  }
  const size_t cb = static_cast<size_t>((*model)->num_codebooks());
  std::vector<float> pcm, chunk(static_cast<size_t>((*model)->samples_per_frame()));
  for (size_t f = 0; f * cb < codes->size(); ++f) {
    auto n = (*stream)->Push({codes->data() + f * cb, cb}, chunk);
    if (!n.ok()) {
      std::fprintf(stderr, "%s\n", n.status().ToString().c_str());
      return 1;
    }
    pcm.insert(pcm.end(), chunk.begin(), chunk.begin() + static_cast<long>(*n));
  }
  auto n = (*stream)->Flush(chunk);
  if (!n.ok()) return 1;
  pcm.insert(pcm.end(), chunk.begin(), chunk.begin() + static_cast<long>(*n));
  std::printf("samples %zu\n", pcm.size());

  const std::vector<float> ref = ReadNpyF32(argv[3]);
  if (ref.size() != pcm.size()) {
    std::fprintf(stderr, "oracle has %zu samples\n", ref.size());
    return 1;
  }
  double sig = 0, err = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    sig += static_cast<double>(ref[i]) * ref[i];
    err += (static_cast<double>(pcm[i]) - ref[i]) * (static_cast<double>(pcm[i]) - ref[i]);
  }
  std::printf("snr_db %.1f\n", err > 0 ? 10.0 * std::log10(sig / err) : 400.0);
  return 0;
}
