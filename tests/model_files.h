// The oracle models as the model tests load them: the safetensors snapshots in
// tests/data, or, when LFMVOX_TEST_WEIGHTS is "gguf-f32" or "gguf-f16",
// Liquid's four-file GGUF release written from that snapshot by lfmvox's
// writer (once per process, in the test temp folder). tests/CMakeLists.txt
// registers the model suites once per variant, so every oracle trace they
// check is checked on the GGUF path too.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "io/json_config.h"
#include "io/safetensors.h"
#include "models/lfm25_audio/gguf_release.h"
#include "trace_util.h"

namespace lfmvox::testing {

// "" (safetensors), "gguf-f32" or "gguf-f16".
inline std::string WeightsVariant() {
  const char* v = std::getenv("LFMVOX_TEST_WEIGHTS");
  return v == nullptr ? std::string() : std::string(v);
}

// The folders this process wrote, removed when it exits (ctest runs every
// test case in a process of its own, several at once).
struct WrittenReleases {
  std::map<std::string, std::string> dirs;
  ~WrittenReleases() {
    std::error_code ec;
    for (const auto& [key, dir] : dirs) std::filesystem::remove_all(dir, ec);
  }
};

// Writes the release of snapshot `src` into the temp folder (once per name).
inline std::string GgufReleaseOf(const std::string& src, const std::string& key) {
  static WrittenReleases releases;
  std::map<std::string, std::string>& written = releases.dirs;
  auto it = written.find(key);
  if (it != written.end()) return it->second;
  const std::string variant = WeightsVariant();
  Lfm25GgufWriteOptions o;
  EXPECT_TRUE(ParseGgufWriteType(variant.substr(5), &o.type)) << variant;
  const std::string out = ::testing::TempDir() + "/lfmvox_gguf_" + key + "_" + variant.substr(5) + "_" +
                          std::to_string(::getpid());
  std::filesystem::remove_all(out);
  Result<Lfm25GgufFiles> f = WriteLfm25GgufRelease(src, out, o);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  written[key] = out;
  return out;
}

// A model folder every Load accepts: tests/data/<name> or its GGUF release.
inline std::string ModelDir(const std::string& name) {
  const std::string variant = WeightsVariant();
  if (variant.empty()) return DataPath(name);
  EXPECT_TRUE(variant == "gguf-f32" || variant == "gguf-f16") << "LFMVOX_TEST_WEIGHTS=" << variant;
  return GgufReleaseOf(DataPath(name), name);
}

// A detokenizer-only oracle (tests/data/lfm25_detok) in the test's format:
// for GGUF, a snapshot with lfm25_tiny's main model and this detokenizer.
inline std::string DetokenizerDir(const std::string& name) {
  if (WeightsVariant().empty()) return DataPath(name);
  namespace fs = std::filesystem;
  const fs::path snap = ScratchPath("snapshot_" + name);
  fs::create_directories(snap);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"}) {
    std::error_code ec;
    fs::remove(snap / f, ec);
    fs::create_symlink(fs::path(DataPath("lfm25_tiny")) / f, snap / f);
  }
  std::error_code ec;
  fs::remove(snap / "audio_detokenizer", ec);
  fs::create_directory_symlink(DataPath(name), snap / "audio_detokenizer");
  return GgufReleaseOf(snap.string(), name);
}

// The main checkpoint and config.json object of an oracle model.
struct ModelFiles {
  std::string where;      // for messages
  nlohmann::json config;  // config.json (or what the GGUF metadata implies)
  std::optional<Checkpoint> weights;
};

inline ModelFiles OpenModelFiles(const std::string& name) {
  ModelFiles m;
  const std::string dir = ModelDir(name);
  m.where = dir;
  if (WeightsVariant().empty()) {
    Result<nlohmann::json> cfg = ReadJsonFile(dir + "/config.json");
    EXPECT_TRUE(cfg.ok()) << cfg.status().ToString();
    if (cfg.ok()) m.config = *cfg;
    Result<Checkpoint> ck = Checkpoint::Open(dir);
    EXPECT_TRUE(ck.ok()) << ck.status().ToString();
    if (ck.ok()) m.weights.emplace(std::move(ck).value());
    return m;
  }
  Result<Lfm25GgufFiles> files = FindLfm25GgufRelease(dir);
  EXPECT_TRUE(files.ok()) << files.status().ToString();
  if (!files.ok()) return m;
  Result<Lfm25GgufModel> g = OpenLfm25GgufRelease(*files);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return m;
  m.config = g->config;
  m.weights.emplace(std::move(*g->weights));
  return m;
}

}  // namespace lfmvox::testing
