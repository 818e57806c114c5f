#include "serve_main.h"

#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "server.h"

namespace lfmvox::server {

namespace {

bool ParseSize(const char* s, long lo, long hi, long* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

int Usage(const std::string& msg) {
  std::fprintf(stderr, "lfmvox serve: %s (the options: lfmvox serve --help)\n", msg.c_str());
  return 2;
}

}  // namespace

int ServeMain(int argc, char** argv) {
  ServerOptions o;
  o.threads = 0;
  if (const char* k = std::getenv("LFMVOX_API_KEY")) o.api_key = k;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    // `lfmvox serve --help` is answered by the CLI from its help table (apps/cli/help.cc).
    if (a == "--help" || a == "-h") {
      std::fputs("lfmvox-server is `lfmvox serve`: its options are listed by lfmvox serve --help\n", stdout);
      return 0;
    }
    if (a == "--no-weight-check") {
      o.model_options.check_weights = false;
      continue;
    }
    if (i + 1 >= argc)
      return Usage(a.rfind("--", 0) == 0 ? "option " + a + " needs a value" : "unexpected " + a);
    const char* v = argv[++i];
    long n = 0;
    if (a == "--model") {
      o.model_dir = v;
    } else if (a == "--host") {
      o.host = v;
    } else if (a == "--port") {
      if (!ParseSize(v, 0, 65535, &n)) return Usage("--port takes 0..65535");
      o.port = static_cast<uint16_t>(n);
    } else if (a == "--api-key") {
      o.api_key = v;
    } else if (a == "--api-key-file") {
      std::ifstream f(v);
      if (!f || !std::getline(f, o.api_key) || o.api_key.empty())
        return Usage(std::string("cannot read a key from ") + v);
    } else if (a == "--threads") {
      if (!ParseSize(v, 1, kMaxThreads, &n))
        return Usage("--threads takes 1.." + std::to_string(kMaxThreads));
      o.threads = static_cast<int>(n);
    } else if (a == "--max-sessions") {
      if (!ParseSize(v, 1, 256, &n)) return Usage("--max-sessions takes 1..256");
      o.max_sessions = static_cast<size_t>(n);
    } else if (a == "--max-queued") {
      if (!ParseSize(v, 0, 100000, &n)) return Usage("--max-queued takes 0..100000");
      o.max_queued = static_cast<size_t>(n);
    } else if (a == "--max-body-mb") {
      if (!ParseSize(v, 1, 4096, &n)) return Usage("--max-body-mb takes 1..4096");
      o.max_body_bytes = static_cast<size_t>(n) << 20;
    } else if (a == "--max-audio-seconds") {
      if (!ParseSize(v, 1, 3600, &n)) return Usage("--max-audio-seconds takes 1..3600");
      o.max_audio_seconds = static_cast<double>(n);
    } else if (a == "--max-new") {
      if (!ParseSize(v, 1, 1 << 20, &n)) return Usage("--max-new takes a positive integer");
      o.max_new_tokens = static_cast<int>(n);
    } else if (a == "--context") {
      if (!ParseSize(v, 16, 1 << 20, &n)) return Usage("--context takes an integer >= 16");
      o.context = static_cast<size_t>(n);
    } else if (a == "--weights") {
      o.model_options.weights = v;
    } else if (a == "--model-id") {
      o.model_id = v;
    } else {
      return Usage("unknown option " + a);
    }
  }
  if (o.model_dir.empty()) return Usage("serve needs --model DIR");
  if (o.threads == 0) o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  // SIGINT and SIGTERM are waited for here, not delivered to the server's threads.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto server = Server::Start(o);
  if (!server.ok()) {
    std::fprintf(stderr, "lfmvox serve: error: %s\n", server.status().message().c_str());
    return 1;
  }
  std::fprintf(stderr, "lfmvox serve: listening on http://%s:%u, loading %s\n", o.host.c_str(),
               (*server)->port(), o.model_dir.c_str());
  if (Status st = (*server)->WaitReady(); !st.ok()) {
    std::fprintf(stderr, "lfmvox serve: error: %s\n", st.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "lfmvox serve: ready%s\n", o.api_key.empty() ? "" : " (API key required)");
  for (const std::string& e : (*server)->Endpoints()) std::fprintf(stderr, "lfmvox serve:   %s\n", e.c_str());
  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "lfmvox serve: stopping (%s)\n", strsignal(sig));
  (*server)->Stop();
  return 0;
}

}  // namespace lfmvox::server
