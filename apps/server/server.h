// `lfmvox serve`: an OpenAI-compatible HTTP server over the public API (include/lfmvox).
//
// Endpoints: GET /v1/models, /livez, /readyz, /health, /metrics; POST /v1/audio/speech,
// /v1/audio/transcriptions, /v1/chat/completions (see README.md, "lfmvox serve"). Network threads
// parse and validate requests and stream replies; one scheduler thread owns the Engine and steps
// every active session together (scheduler.h).
//
// Thread safety: Start/Stop from one thread; port() and WaitReady() from any.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lfmvox/lfmvox.h"

namespace lfmvox::server {

struct ServerOptions {
  // The model: loaded from model_dir after the socket is listening (/readyz answers 503 until it is),
  // or given already loaded.
  std::string model_dir;
  ModelOptions model_options;
  std::shared_ptr<const AudioModel> model;
  std::string model_id;  // the id /v1/models lists; "" = the last component of model_dir

  std::string host = "127.0.0.1";  // loopback unless told otherwise
  uint16_t port = 8080;            // 0: an ephemeral port (see port())
  std::string api_key;  // non-empty: every endpoint but the probes needs "Authorization: Bearer KEY"
  int threads = 1;      // the engine's pool
  int io_threads = 1;   // network threads

  // Limits: every request over one gets a 4xx (or 503 when the server is full).
  size_t max_sessions = 4;            // sessions generating at once (batched in each step)
  size_t max_queued = 16;             // admitted requests waiting for a session
  size_t max_connections = 256;       // open sockets
  size_t max_body_bytes = 32u << 20;  // request body
  size_t max_text_chars = 4096;       // text of one input (speech input, a chat message part)
  double max_audio_seconds = 60;      // one uploaded clip
  int max_new_tokens = 0;             // 0: each task's preset; otherwise the cap on every generation
  size_t context = 4096;              // positions of each session
  double read_timeout_seconds = 30;   // to receive a whole request (headers and body), and idle keep-alive
  double write_timeout_seconds = 60;  // for each write to a client
};

class Server {
 public:
  // Binds and listens (errors: a bad host, a port in use), then loads the model in the background.
  static Result<std::unique_ptr<Server>> Start(const ServerOptions& options);
  ~Server();  // Stop()

  uint16_t port() const;
  // Blocks until the model is loaded (OK) or failed to load (its error).
  Status WaitReady();
  // After WaitReady: each endpoint, and why one the model's files do not allow is not served.
  std::vector<std::string> Endpoints() const;
  // Stops accepting, cancels every session, closes every connection. Idempotent.
  void Stop();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace lfmvox::server
