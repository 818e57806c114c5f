#include "metrics.h"

#include <cstdio>

namespace lfmvox::server {

namespace {

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

}  // namespace

void Histogram::Observe(double v) {
  std::lock_guard lock(mu_);
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::Render(const std::string& name, const std::string& help, std::string* out) const {
  std::lock_guard lock(mu_);
  *out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    *out += name + "_bucket{le=\"" + Num(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  *out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  *out += name + "_sum " + Num(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : ttfa_({0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10}),
      rtf_({0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10}) {}

void Metrics::CountRequest(const std::string& endpoint, int status) {
  std::lock_guard lock(mu_);
  ++requests_[{endpoint, status}];
}

void Metrics::AddAudioIn(double s) {
  std::lock_guard lock(mu_);
  audio_in_ += s;
}

void Metrics::AddAudioOut(double s) {
  std::lock_guard lock(mu_);
  audio_out_ += s;
}

std::string Metrics::Render(size_t active, size_t queued, size_t connections) const {
  std::string out;
  {
    std::lock_guard lock(mu_);
    out += "# HELP lfmvox_http_requests_total HTTP requests by endpoint and status code.\n";
    out += "# TYPE lfmvox_http_requests_total counter\n";
    for (const auto& [key, n] : requests_) {
      out += "lfmvox_http_requests_total{endpoint=\"" + key.first + "\",status=\"" +
             std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
    }
    out += "# HELP lfmvox_audio_input_seconds_total Seconds of audio received.\n";
    out += "# TYPE lfmvox_audio_input_seconds_total counter\nlfmvox_audio_input_seconds_total " +
           Num(audio_in_) + "\n";
    out += "# HELP lfmvox_audio_output_seconds_total Seconds of speech produced.\n";
    out += "# TYPE lfmvox_audio_output_seconds_total counter\nlfmvox_audio_output_seconds_total " +
           Num(audio_out_) + "\n";
  }
  out += "# HELP lfmvox_realtime_vad_turns_total Speech starts heard by the realtime server VAD.\n";
  out += "# TYPE lfmvox_realtime_vad_turns_total counter\nlfmvox_realtime_vad_turns_total " +
         std::to_string(vad_turns_.load()) + "\n";
  out += "# HELP lfmvox_realtime_barge_ins_total Realtime responses cancelled by the user's speech.\n";
  out += "# TYPE lfmvox_realtime_barge_ins_total counter\nlfmvox_realtime_barge_ins_total " +
         std::to_string(barge_ins_.load()) + "\n";
  out += "# HELP lfmvox_active_sessions Sessions the engine is stepping.\n";
  out += "# TYPE lfmvox_active_sessions gauge\nlfmvox_active_sessions " + std::to_string(active) + "\n";
  out += "# HELP lfmvox_queue_depth Requests waiting for a session slot.\n";
  out += "# TYPE lfmvox_queue_depth gauge\nlfmvox_queue_depth " + std::to_string(queued) + "\n";
  out += "# HELP lfmvox_open_connections Open client connections.\n";
  out +=
      "# TYPE lfmvox_open_connections gauge\nlfmvox_open_connections " + std::to_string(connections) + "\n";
  ttfa_.Render("lfmvox_time_to_first_audio_seconds", "From the request's admission to its first PCM sample.",
               &out);
  rtf_.Render("lfmvox_real_time_factor", "Generation wall time over seconds of speech produced.", &out);
  return out;
}

}  // namespace lfmvox::server
