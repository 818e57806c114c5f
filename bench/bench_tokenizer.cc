// Tokenizer speed: load time of the LFM2 surrogate and of a synthetic file the size of the real LFM2
// tokenizer.json (64,400 ids, ~63,700 merges, ~4.7 MB), and encode / decode / streaming-decode throughput.
//   bench_tokenizer [tokenizer.json]   (default: the surrogate in tests/data/tokenizer)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Fills the surrogate's id hole (6400..64393) with tokens made by merging two existing ones, so the file has
// the real vocabulary size, merge count and byte size; load cost depends on those, not on which merges.
std::string SyntheticFullSize(const std::string& surrogate) {
  json j = json::parse(surrogate);
  json& vocab = j["model"]["vocab"];
  json& merges = j["model"]["merges"];
  std::vector<std::string> tokens;
  for (const auto& [token, id] : vocab.items()) {
    if (token.find("<|") == std::string::npos && token != "python" && token != "Mathias") {
      tokens.push_back(token);
    }
  }
  std::mt19937 rng(7);
  int32_t next_id = 6400;
  while (next_id < 64394) {
    if (next_id == 64011 || next_id == 64014) {
      ++next_id;
      continue;
    }
    const std::string& a = tokens[rng() % tokens.size()];
    const std::string& b = tokens[rng() % tokens.size()];
    const std::string ab = a + b;
    if (ab.size() > 24 || vocab.contains(ab)) continue;
    vocab[ab] = next_id++;
    merges.push_back(json::array({a, b}));
    tokens.push_back(ab);
  }
  return j.dump(2);
}

template <typename F>
double BestOf(int n, F&& f) {
  double best = 1e30;
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, Seconds(t0, Clock::now()));
  }
  return best;
}

void BenchFile(const char* name, const std::string& text_json, const std::string& corpus) {
  lfmvox::Result<lfmvox::Tokenizer> loaded = lfmvox::Tokenizer::LoadJson(text_json);
  if (!loaded.ok()) {
    std::printf("%s: %s\n", name, loaded.status().ToString().c_str());
    return;
  }
  const double load_s = BestOf(5, [&] { (void)lfmvox::Tokenizer::LoadJson(text_json); });
  const lfmvox::Tokenizer& t = *loaded;
  std::vector<int32_t> ids;
  const double encode_s = BestOf(5, [&] { ids = t.Encode(corpus).value(); });
  std::string decoded;
  const double decode_s = BestOf(5, [&] { decoded = t.Decode(ids); });
  const double stream_s = BestOf(5, [&] {
    lfmvox::Tokenizer::StreamDecoder d(t);
    std::string out;
    for (const int32_t id : ids) d.Push(id, &out);
    out += d.Finish();
  });
  std::printf("%s: %.2f MB, vocab_size %d\n", name, text_json.size() / 1e6, t.vocab_size());
  std::printf("  load          %8.1f ms\n", load_s * 1e3);
  std::printf("  encode        %8.2f M tokens/s  (%.1f MB/s, %zu tokens, %.2f bytes/token)%s\n",
              ids.size() / encode_s / 1e6, corpus.size() / encode_s / 1e6, ids.size(),
              static_cast<double>(corpus.size()) / ids.size(),
              decoded == corpus ? "" : "  ROUND TRIP FAILED");
  std::printf("  decode        %8.2f M tokens/s\n", ids.size() / decode_s / 1e6);
  std::printf("  stream decode %8.2f M tokens/s\n", ids.size() / stream_s / 1e6);
  // Short prompts: the per-call overhead a chat turn sees.
  const std::string prompt =
      "<|im_start|>user\nTranscribe the audio, please.<|im_end|>\n<|im_start|>assistant\n";
  const double prompt_s = BestOf(5, [&] {
    for (int i = 0; i < 10000; ++i) (void)t.Encode(prompt);
  });
  std::printf("  chat prompt   %8.2f us per encode\n", prompt_s / 10000 * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path =
      argc > 1 ? argv[1] : std::string(LFMVOX_TEST_DATA_DIR) + "/tokenizer/tokenizer.json";
  const std::string surrogate = ReadText(path);
  // Corpus: every golden input (English, code, digits, 20 scripts, emoji, specials), repeated to ~2 MB.
  const json goldens = json::parse(ReadText(std::string(LFMVOX_TEST_DATA_DIR) + "/tokenizer/goldens.json"));
  std::string corpus;
  while (corpus.size() < 2'000'000) {
    for (const json& c : goldens["encode"]) corpus += c["input"].get<std::string>() + "\n";
  }
  BenchFile(path.c_str(), surrogate, corpus);
  if (argc <= 1) BenchFile("synthetic full-size LFM2 file", SyntheticFullSize(surrogate), corpus);
  return 0;
}
