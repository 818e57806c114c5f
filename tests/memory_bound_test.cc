// The peak memory of a command refused for hostile input stays under twice the peak of the same command on a
// legitimate input of the same model, and no refused input makes the command run past its time limit. Each
// case runs `lfmvox` in a child (fork + exec, stdout and stderr to files) under a 60 s alarm; the child's
// peak RSS comes from wait4. The legitimate runs: `detokenize` of examples/codes.txt with
// tests/data/lfm25_detok (the codes of detok__T45__codes.npy) and `generate` of a prompt holding
// inputs/synthetic_16k.wav with tests/data/lfm25_tiny. The hostile inputs are oversized and deeply nested
// files, sizes that ask for gigabytes and over-long clips, most as sparse files, so they cost no disk.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "trace_util.h"

namespace lfmvox {
namespace {

namespace fs = std::filesystem;

constexpr unsigned kTimeLimitS = 60;

struct CliRun {
  int exit_code = -1;  // 128 + signal when killed (SIGALRM: the time limit)
  long peak_kb = 0;
  std::string err;
};

CliRun RunCli(const std::vector<std::string>& args) {
  const std::string err_path = testing::ScratchPath("memory_bound_stderr.txt");
  std::vector<char*> argv;
  std::string cli = LFMVOX_CLI;
  argv.push_back(cli.data());
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  CliRun r;
  const pid_t pid = fork();
  if (pid < 0) return r;
  if (pid == 0) {
    const int out = open("/dev/null", O_WRONLY);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0) _exit(90);
    dup2(out, 1);
    dup2(err, 2);
    alarm(kTimeLimitS);  // survives exec: a hang ends in SIGALRM
    execv(argv[0], argv.data());
    _exit(91);
  }
  int status = 0;
  rusage usage{};
  if (wait4(pid, &status, 0, &usage) != pid) return r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.peak_kb = usage.ru_maxrss;
  std::ifstream e(err_path);
  r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  return r;
}

// A copy of tests/data/<base> in a scratch folder: every entry a symlink to the original except
// `replaced`, which the caller then writes.
fs::path Variant(const std::string& name, const std::string& base, const std::string& replaced) {
  const fs::path src = fs::canonical(testing::DataPath(base));
  std::string safe = name;  // a case name may hold spaces and slashes ("config /dev/zero")
  std::replace_if(
      safe.begin(), safe.end(), [](char c) { return c == '/' || c == ' '; }, '_');
  const fs::path dir = testing::ScratchPath("membound_" + safe);
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const fs::directory_entry& e : fs::directory_iterator(src)) {
    if (e.path().filename() == replaced || e.path().filename() == "traces") continue;
    fs::create_symlink(fs::canonical(e.path()), dir / e.path().filename());
  }
  return dir;
}

std::string ReadText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// `prefix` followed by zeros up to `size` bytes, the zeros a hole in the file.
void WriteSparse(const fs::path& p, const std::string& prefix, uint64_t size) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << prefix;
  fs::resize_file(p, size);
}

std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

const std::string kCodes = std::string(LFMVOX_SOURCE_DIR) + "/examples/codes.txt";

struct Case {
  std::string name;
  std::vector<std::string> args;
};

// Every case must fail with exit 1 (an error, not a signal) and a message, within the time limit and
// at most twice the legitimate run's peak.
void ExpectBounded(const CliRun& legit, const std::vector<Case>& cases) {
  ASSERT_EQ(legit.exit_code, 0) << legit.err;
  ASSERT_GT(legit.peak_kb, 0);
  for (const Case& c : cases) {
    const CliRun r = RunCli(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.name << " (128 + 14 is the " << kTimeLimitS << " s limit): " << r.err;
    EXPECT_NE(r.err.find("error"), std::string::npos) << c.name << ": " << r.err;
    EXPECT_LE(r.peak_kb, 2 * legit.peak_kb)
        << c.name << ": peak " << r.peak_kb << " KB against " << legit.peak_kb << " KB legitimately";
    std::printf("%-28s peak %7ld KB (legitimate %ld KB)\n", c.name.c_str(), r.peak_kb, legit.peak_kb);
  }
}

TEST(MemoryBound, RefusedDetokenizerInputsStayUnderTwiceTheLegitimatePeak) {
  const std::string wav = testing::ScratchPath("membound.wav");
  const CliRun legit =
      RunCli({"detokenize", "--model", testing::DataPath("lfm25_detok"), "--codes", kCodes, "-o", wav});
  const std::string config = ReadText(testing::DataPath("lfm25_detok/config.json"));
  std::vector<Case> cases;
  auto with_config = [&](const std::string& name, auto&& write) {
    const fs::path dir = Variant(name, "lfm25_detok", "config.json");
    write(dir / "config.json");
    cases.push_back({name, {"detokenize", "--model", dir.string(), "--codes", kCodes, "-o", wav}});
  };
  with_config("config 200 MB", [&](const fs::path& p) { WriteSparse(p, config, 200ull << 20); });
  with_config("config /dev/zero", [&](const fs::path& p) { fs::create_symlink("/dev/zero", p); });
  with_config("config FIFO", [&](const fs::path& p) { ASSERT_EQ(mkfifo(p.c_str(), 0644), 0); });
  with_config("config directory", [&](const fs::path& p) { fs::create_directories(p); });
  with_config("config nested 100000", [&](const fs::path& p) {
    std::string c = config;
    const std::string key = "\"sliding_window\": 30";
    const size_t at = c.find(key);
    ASSERT_NE(at, std::string::npos);
    c.replace(at, key.size(), "\"sliding_window\": " + Nested(100000));
    std::ofstream(p) << c;
  });
  with_config("window 8000000", [&](const fs::path& p) {
    std::string c = config;
    for (const auto& [from, to] :
         {std::pair<std::string, std::string>{"\"sliding_window\": 30", "\"sliding_window\": 8000000"},
          {"\"max_position_embeddings\": 128000", "\"max_position_embeddings\": 8000000"}}) {
      const size_t at = c.find(from);
      ASSERT_NE(at, std::string::npos) << from;
      c.replace(at, from.size(), to);
    }
    std::ofstream(p) << c;
  });
  // A safetensors header just under its 100 MiB cap, of empty objects; one nested 100000 deep.
  auto with_header = [&](const std::string& name, const std::string& header) {
    const fs::path dir = Variant(name, "lfm25_detok", "model.safetensors");
    std::string file(8, '\0');
    for (int b = 0; b < 8; ++b) file[b] = static_cast<char>((header.size() >> (8 * b)) & 0xff);
    std::ofstream(dir / "model.safetensors", std::ios::binary) << file << header;
    cases.push_back({name, {"detokenize", "--model", dir.string(), "--codes", kCodes, "-o", wav}});
  };
  {
    std::string h = "{";
    for (int i = 0; h.size() < (99u << 20); ++i) h += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":{}";
    with_header("header 99 MB of {}", h + "}");
  }
  with_header("header shape nested",
              R"({"t":{"dtype":"F32","shape":)" + Nested(100000) + R"(,"data_offsets":[0,4]}})");
  // Codes: a 900 MB file of NULs; a line of a million codes.
  const std::string nul_codes = testing::ScratchPath("membound_nul_codes.txt");
  WriteSparse(nul_codes, "", 900ull << 20);
  cases.push_back(
      {"codes 900 MB of NUL",
       {"detokenize", "--model", testing::DataPath("lfm25_detok"), "--codes", nul_codes, "-o", wav}});
  ExpectBounded(legit, cases);
  EXPECT_FALSE(fs::exists(wav + ".tmp"));
}

TEST(MemoryBound, RefusedSpeechInputsStayUnderTwiceTheLegitimatePeak) {
  const std::string prompt = testing::ScratchPath("membound_prompt.json");
  std::ofstream(prompt) << "[{\"audio\": \"" << testing::DataPath("inputs/synthetic_16k.wav") << "\"}]";
  auto generate = [&](const std::string& model, const std::string& prompt_file) {
    return std::vector<std::string>{"generate",  "--model", model,       "--prompt", prompt_file,
                                    "--max-new", "8",       "--threads", "1",        "--quiet"};
  };
  const CliRun legit = RunCli(generate(testing::DataPath("lfm25_tiny"), prompt));
  std::vector<Case> cases;
  {
    const fs::path dir = Variant("tokenizer_300mb", "lfm25_tiny", "tokenizer.json");
    WriteSparse(dir / "tokenizer.json", "{\"model\":", 300ull << 20);
    cases.push_back({"tokenizer 300 MB", generate(dir.string(), prompt)});
  }
  {
    const fs::path dir = Variant("tokenizer_nested", "lfm25_tiny", "tokenizer.json");
    std::ofstream(dir / "tokenizer.json") << "{\"model\":" << Nested(100000) << "}";
    cases.push_back({"tokenizer nested 100000", generate(dir.string(), prompt)});
  }
  {
    const fs::path dir = Variant("n_fft", "lfm25_tiny", "config.json");
    std::string c = ReadText(testing::DataPath("lfm25_tiny/config.json"));
    for (const auto& [from, to] :
         {std::pair<std::string, std::string>{"\"n_fft\": 512", "\"n_fft\": 1048576"},
          {"\"features\": 128", "\"features\": 4096"},
          {"\"feat_in\": 128", "\"feat_in\": 4096"}}) {
      const size_t at = c.find(from);
      ASSERT_NE(at, std::string::npos) << from;
      c.replace(at, from.size(), to);
    }
    std::ofstream(dir / "config.json") << c;
    cases.push_back({"n_fft 2^20", generate(dir.string(), prompt)});
  }
  {
    // A 16 kHz mono s16 WAV whose header (and sparse body) holds 59 minutes, and one at 1 MHz, 268 s, as
    // audio segments of a prompt (a clip of at most 60 s).
    for (const auto& [name, rate, seconds] :
         {std::tuple<const char*, uint32_t, uint32_t>{"wav 59 min", 16000, 59 * 60},
          {"wav 268 s at 1 MHz", 1000000, 268}}) {
      const uint32_t data = rate * seconds * 2;
      std::string h = "RIFF";
      auto u32 = [&](uint32_t v) {
        for (int b = 0; b < 4; ++b) h += static_cast<char>((v >> (8 * b)) & 0xff);
      };
      auto u16 = [&](uint16_t v) {
        h += static_cast<char>(v & 0xff);
        h += static_cast<char>(v >> 8);
      };
      u32(36 + data);
      h += "WAVEfmt ";
      u32(16);
      u16(1);
      u16(1);
      u32(rate);
      u32(rate * 2);
      u16(2);
      u16(16);
      h += "data";
      u32(data);
      const std::string path = testing::ScratchPath(std::string("membound_") + std::to_string(rate) + ".wav");
      WriteSparse(path, h, h.size() + data);
      const std::string prompt =
          testing::ScratchPath(std::string("membound_") + std::to_string(rate) + ".json");
      std::ofstream(prompt) << "[{\"audio\": \"" << path << "\"}]";
      cases.push_back({name, generate(testing::DataPath("lfm25_tiny"), prompt)});
    }
  }
  ExpectBounded(legit, cases);
}

}  // namespace
}  // namespace lfmvox
