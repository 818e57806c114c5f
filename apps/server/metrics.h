// The server's Prometheus metrics: requests by endpoint and status, active sessions, queue depth,
// audio seconds in and out, time to first audio and real-time factor histograms. Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace lfmvox::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void Observe(double v);
  void Render(const std::string& name, const std::string& help, std::string* out) const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void CountRequest(const std::string& endpoint, int status);
  void AddAudioIn(double seconds);
  void AddAudioOut(double seconds);
  void CountVadTurn() { vad_turns_.fetch_add(1); }  // realtime: a speech start the server VAD heard
  void CountBargeIn() { barge_ins_.fetch_add(1); }  // realtime: a response cancelled by that speech
  Histogram& time_to_first_audio() { return ttfa_; }
  Histogram& real_time_factor() { return rtf_; }
  // The text of GET /metrics, with the scheduler's gauges.
  std::string Render(size_t active_sessions, size_t queue_depth, size_t connections) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  double audio_in_ = 0, audio_out_ = 0;
  Histogram ttfa_, rtf_;
  std::atomic<uint64_t> vad_turns_{0}, barge_ins_{0};
};

}  // namespace lfmvox::server
