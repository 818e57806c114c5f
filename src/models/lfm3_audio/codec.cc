#include "models/lfm3_audio/codec.h"

#include <algorithm>
#include <filesystem>

#include "blocks/weights.h"
#include "threading/thread_team.h"

namespace lfmvox {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxFramesPerCall = 4096;
constexpr size_t kMaxStreams = 1024;

}  // namespace

Result<std::unique_ptr<Lfm3Codec>> Lfm3Codec::Load(const std::string& dir_in,
                                                   std::optional<WeightFormat> matrices, bool check_weights) {
  fs::path dir(dir_in);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) dir = dir.parent_path();
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path, ec)) {
    return NotFound("no LFM3 config at " + config_path.string() +
                    "; pass the folder holding config.json and model.safetensors");
  }
  LFM_ASSIGN_OR_RETURN(Lfm3Config config, Lfm3Config::Load(config_path.string()));
  LFM_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(dir.string()));
  if (check_weights) LFM_RETURN_IF_ERROR(CheckWeightsFinite(ckpt).WithContext("loading " + dir.string()));
  return Load(config, std::move(ckpt), dir.string(), "codec.", matrices);
}

Result<std::unique_ptr<Lfm3Codec>> Lfm3Codec::Load(const Lfm3Config& config, Checkpoint weights,
                                                   const std::string& where_in, const std::string& prefix,
                                                   std::optional<WeightFormat> matrices) {
  auto m = std::unique_ptr<Lfm3Codec>(new Lfm3Codec());
  m->config_ = config.codec;
  m->audio_eos_ = config.audio_eos;
  m->ckpt_.emplace(std::move(weights));
  const Checkpoint& ck = *m->ckpt_;
  const Lfm3CodecConfig& c = m->config_;
  const std::string where = "loading the LFM3 codec from " + where_in;
  const int64_t H = c.stack.hidden_size, Qd = c.quantizer_dim, L = c.latent_dim();
  auto ctx = [&](Status s) { return s.ok() ? s : s.WithContext(where); };
  LFM_RETURN_IF_ERROR(ctx(LoadLinear(ck, prefix + "quantizer.project_out", Qd, L, true, &m->project_out_)));
  LFM_RETURN_IF_ERROR(ctx(LoadLinear(ck, prefix + "from_quantizer", H, Qd, true, &m->from_quantizer_)));
  Result<Lfm3Stack> stack = Lfm3Stack::Load(ck, c.stack, prefix + "decoder.lfm.");
  if (!stack.ok()) return stack.status().WithContext(where);
  m->stack_ = std::move(stack).value();
  LFM_RETURN_IF_ERROR(ctx(LoadLinear(ck, prefix + "decoder.lin", c.spectrum_dim(), H, true, &m->lin_)));
  LFM_RETURN_IF_ERROR(ctx(LoadF32(ck, prefix + "decoder.istft.window", Shape{c.n_fft}, &m->window_)));
  if (matrices) {
    LFM_RETURN_IF_ERROR(ctx(m->stack_.ConvertMatrices(*matrices, &m->converted_)));
    for (Linear* l : {&m->project_out_, &m->from_quantizer_, &m->lin_}) {
      if (FormatRowBytes(*matrices, l->in()) == 0) continue;  // not whole blocks: kept as stored
      LFM_ASSIGN_OR_RETURN(l->w, ConvertMatrix(l->w, *matrices, &m->converted_));
    }
  }
  // The stack and the spectrum head run frame_stack rows a frame (project_out and from_quantizer one).
  LFM_RETURN_IF_ERROR(ctx(m->stack_.UseManyRowLayout(ck)));
  LFM_ASSIGN_OR_RETURN(m->lin_.w, ForManyRows(ck, m->lin_.w));
  return m;
}

size_t Lfm3Codec::weight_bytes_per_frame() const {
  return project_out_.w.bytes() + from_quantizer_.w.bytes() + stack_.weight_bytes() + lin_.w.bytes();
}

Result<Lfm3CodecState> Lfm3CodecState::Create(const Lfm3Codec& model, size_t max_frames_per_call) {
  const Lfm3CodecConfig& c = model.config();
  if (max_frames_per_call == 0 || max_frames_per_call > kMaxFramesPerCall) {
    return InvalidArgument("max_frames_per_call must be in [1, 4096]");
  }
  Lfm3CodecState s;
  s.model_ = &model;
  s.max_frames_ = max_frames_per_call;
  LFM_ASSIGN_OR_RETURN(
      s.stack_, Lfm3State::Create(model.stack(), max_frames_per_call * static_cast<size_t>(c.frame_stack)));
  LFM_RETURN_IF_ERROR(
      s.istft_.Init(static_cast<size_t>(c.n_fft), static_cast<size_t>(c.hop), model.window()));
  return s;
}

void Lfm3CodecState::Reset() {
  stack_.Reset();
  istft_.Reset();
  frames_ = 0;
}

size_t Lfm3CodecState::live_bytes() const {
  return stack_.live_bytes() + 2 * istft_.n_fft() * sizeof(float);  // + overlap-add and envelope
}

size_t Lfm3CodecState::bytes() const { return stack_.state_bytes() + 2 * istft_.n_fft() * sizeof(float); }

Result<Lfm3CodecScratch> Lfm3CodecScratch::Create(const Lfm3Codec& model, size_t max_frames_per_call,
                                                  size_t max_streams, int max_threads) {
  const Lfm3CodecConfig& c = model.config();
  if (max_frames_per_call == 0 || max_frames_per_call > kMaxFramesPerCall) {
    return InvalidArgument("max_frames_per_call must be in [1, 4096]");
  }
  if (max_streams == 0 || max_streams > kMaxStreams)
    return InvalidArgument("max_streams must be in [1, 1024]");
  if (max_threads < 1) return InvalidArgument("max_threads must be at least 1");
  const size_t up = static_cast<size_t>(c.frame_stack);
  const size_t frames = max_frames_per_call * max_streams, rows = frames * up;
  const size_t H = static_cast<size_t>(c.stack.hidden_size);
  Lfm3CodecScratch s;
  s.model_ = &model;
  s.max_frames_per_call_ = max_frames_per_call;
  s.max_streams_ = max_streams;
  s.max_threads_ = max_threads;
  {
    // The longest cache a query of a state with max_frames_per_call frames can see.
    LFM_ASSIGN_OR_RETURN(const Lfm3State probe, Lfm3State::Create(model.stack(), max_frames_per_call * up));
    s.max_keys_ = probe.max_keys();
  }
  LFM_ASSIGN_OR_RETURN(s.stack_, Lfm3Scratch::Create(model.stack(), rows, s.max_keys_, max_threads));
  s.latent_.Reset(frames * static_cast<size_t>(c.latent_dim()));
  s.quant_.Reset(frames * static_cast<size_t>(c.quantizer_dim));
  s.emb_.Reset(frames * H);
  s.x_.Reset(rows * H);
  s.head_.Reset(rows * static_cast<size_t>(c.spectrum_dim()));
  s.states_.reserve(max_streams);
  s.rows_.reserve(max_streams);
  s.active_.reserve(max_streams);
  s.take_.reserve(max_streams);
  s.done_.reserve(max_streams);
  return s;
}

size_t Lfm3CodecScratch::bytes() const {
  return stack_.bytes() +
         (latent_.size() + quant_.size() + emb_.size() + x_.size() + head_.size()) * sizeof(float);
}

Status StepStreams(const Lfm3Codec& model, std::span<Lfm3CodecRequest> requests, Lfm3CodecScratch& sc,
                   ThreadTeam& team, TraceSink* sink) {
  const Lfm3CodecConfig& c = model.config();
  const size_t H = static_cast<size_t>(c.stack.hidden_size), cb = model.codebooks();
  const size_t up = static_cast<size_t>(c.frame_stack), spf = model.samples_per_frame();
  const size_t L = static_cast<size_t>(c.latent_dim()), Qd = static_cast<size_t>(c.quantizer_dim);
  const size_t digits = c.fsq_levels.size();
  const size_t spec = static_cast<size_t>(c.spectrum_dim()), bins = spec / 2;
  const int32_t num_codes = c.num_codes();

  // Validate everything first, so a bad request leaves every stream untouched.
  if (sc.model_ != &model) return InvalidArgument("this scratch was created for another codec");
  if (requests.size() > sc.max_streams_) {
    return OutOfRange(
        StrFormat("%zu streams in one step exceed the scratch's %zu", requests.size(), sc.max_streams_));
  }
  if (team.size() > sc.max_threads_) {
    return InvalidArgument(StrFormat("a team of %d threads exceeds the %d this scratch was sized for",
                                     team.size(), sc.max_threads_));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    const Lfm3CodecRequest& q = requests[i];
    if (q.state == nullptr) return InvalidArgument(StrFormat("request %zu has no state", i));
    if (q.state->model_ != &model) {
      return InvalidArgument(StrFormat("request %zu: its state was created for another codec", i));
    }
    if (q.state->stack_.max_keys() > sc.max_keys_) {
      return InvalidArgument(StrFormat(
          "request %zu: its state takes %zu frames per call but the scratch was sized for %zu; create the "
          "scratch with at least the states' max_frames_per_call",
          i, q.state->max_frames_, sc.max_frames_per_call_));
    }
    for (size_t j = 0; j < i; ++j) {
      if (requests[j].state == q.state) return InvalidArgument("a stream appears twice in one step");
    }
    if (q.codes.size() % cb != 0) {
      return InvalidArgument(
          StrFormat("got %zu codes; a frame holds exactly %zu (one per codebook)", q.codes.size(), cb));
    }
    const size_t frames = q.codes.size() / cb;
    if (q.out.size() < frames * spf) {
      return InvalidArgument(StrFormat("the output span holds %zu samples; %zu frames need %zu", q.out.size(),
                                       frames, frames * spf));
    }
    for (size_t k = 0; k < q.codes.size(); ++k) {
      const int32_t code = q.codes[k];
      if (code == model.audio_eos()) {
        return InvalidArgument(
            StrFormat("code %d at frame %zu, codebook %zu is the end-of-audio code, which the codec never "
                      "decodes; stop "
                      "before the frame that holds it",
                      code, q.state->frames_ + k / cb, k % cb));
      }
      if (code < 0 || code >= num_codes) {
        return InvalidArgument(StrFormat("code %d at frame %zu, codebook %zu is outside [0, %d)", code,
                                         q.state->frames_ + k / cb, k % cb, num_codes));
      }
    }
  }
  sc.done_.assign(requests.size(), 0);
  for (Lfm3CodecRequest& q : requests) q.written = 0;

  for (;;) {
    // Who runs in this pass, and how many frames each.
    sc.states_.clear();
    sc.rows_.clear();
    sc.active_.clear();
    sc.take_.clear();
    size_t total = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      const Lfm3CodecRequest& q = requests[i];
      const size_t left = q.codes.size() / cb - sc.done_[i];
      const size_t n =
          std::min({left, q.state->max_frames_, sc.max_frames_per_call_, sc.max_frames() - total});
      if (n == 0) continue;
      sc.states_.push_back(&q.state->stack_);
      sc.rows_.push_back(n * up);
      sc.active_.push_back(i);
      sc.take_.push_back(n);
      total += n;
    }
    if (total == 0) break;
    const size_t rows = total * up;

    // FSQ digits → latents: position i·digits + j = (⌊c_i / b_j⌋ mod L_j − ⌊L_j/2⌋) / ⌊L_j/2⌋.
    float* lat = sc.latent_.data();  // [total, L]: the streams' frames one after the other
    for (size_t a = 0, t = 0; a < sc.active_.size(); ++a) {
      const int32_t* codes = requests[sc.active_[a]].codes.data() + sc.done_[sc.active_[a]] * cb;
      for (size_t f = 0; f < sc.take_[a]; ++f, ++t) {
        for (size_t i = 0; i < cb; ++i) {
          const int32_t code = codes[f * cb + i];
          for (size_t j = 0; j < digits; ++j) {
            const int32_t level = c.fsq_levels[j];
            const float half = static_cast<float>(level / 2);
            const float digit = static_cast<float>((code / c.fsq_basis[j]) % level);
            lat[t * L + i * digits + j] = (digit - half) / half;
          }
        }
      }
    }
    if (sink) sink->Record("fsq_latents", lat, total, L, L);
    float* quant = sc.quant_.data();  // [total, Qd]
    model.project_out().Forward(lat, total, L, quant, Qd, team);
    if (sink) sink->Record("project_out", quant, total, Qd, Qd);
    float* emb = sc.emb_.data();  // [total, H]
    model.from_quantizer().Forward(quant, total, Qd, emb, H, team);
    if (sink) sink->Record("from_quantizer", emb, total, H, H);

    // ×frame_stack repeat: row r of the stack input is frame r / up.
    float* x = sc.x_.data();  // [rows, H]
    for (size_t r = 0; r < rows; ++r) std::copy_n(emb + (r / up) * H, H, x + r * H);
    if (sink) sink->Record("stacked", x, rows, H, H);

    LFM_RETURN_IF_ERROR(Lfm3Forward(model.stack(), sc.states_, sc.rows_, x, sc.stack_, team, sink));
    Lfm3FinalNorm(model.stack(), x, rows, x);
    if (sink) sink->Record("final_norm", x, rows, H, H);

    float* head = sc.head_.data();  // [rows, n_fft + 2]: log|S| bins, then phases
    model.lin().Forward(x, rows, H, head, spec, team);
    if (sink) sink->Record("lin_out", head, rows, spec, spec);

    for (size_t a = 0, r = 0; a < sc.active_.size(); ++a) {
      Lfm3CodecRequest& q = requests[sc.active_[a]];
      float* out = q.out.data();
      for (size_t end = r + sc.take_[a] * up; r < end; ++r) {
        const float* z = head + r * spec;
        q.written += static_cast<size_t>(q.state->istft_.Step(z, z + bins, out + q.written));
      }
      q.state->frames_ += sc.take_[a];
      sc.done_[sc.active_[a]] += sc.take_[a];
    }
  }
  return Status::Ok();
}

Result<size_t> Step(const Lfm3Codec& model, Lfm3CodecState& state, std::span<const int32_t> codes,
                    std::span<float> out, Lfm3CodecScratch& scratch, ThreadTeam& team, TraceSink* sink) {
  Lfm3CodecRequest request[1] = {{&state, codes, out, 0}};
  LFM_RETURN_IF_ERROR(StepStreams(model, request, scratch, team, sink));
  return request[0].written;
}

Result<size_t> Flush(const Lfm3Codec& model, Lfm3CodecState& state, std::span<float> out) {
  if (state.model_ != &model) return InvalidArgument("this state was created for another codec");
  if (out.size() < model.tail_samples()) {
    return InvalidArgument(
        StrFormat("Flush needs room for %zu samples, got %zu", model.tail_samples(), out.size()));
  }
  const size_t n = state.frames_ == 0 ? 0 : static_cast<size_t>(state.istft_.Flush(out.data()));
  state.Reset();
  return n;
}

void Reset(Lfm3CodecState& state) { state.Reset(); }

Result<std::unique_ptr<Lfm3CodecSession>> Lfm3CodecSession::Create(const Lfm3Codec& model,
                                                                   size_t max_frames_per_call,
                                                                   int max_threads) {
  LFM_ASSIGN_OR_RETURN(Lfm3CodecState state, Lfm3CodecState::Create(model, max_frames_per_call));
  LFM_ASSIGN_OR_RETURN(Lfm3CodecScratch scratch,
                       Lfm3CodecScratch::Create(model, max_frames_per_call, 1, max_threads));
  return std::unique_ptr<Lfm3CodecSession>(new Lfm3CodecSession(model, std::move(state), std::move(scratch)));
}

Result<size_t> Lfm3CodecSession::Step(std::span<const int32_t> codes, std::span<float> out, ThreadTeam& team,
                                      TraceSink* sink) {
  return lfmvox::Step(model_, state_, codes, out, scratch_, team, sink);
}

Result<size_t> Lfm3CodecSession::Flush(std::span<float> out) { return lfmvox::Flush(model_, state_, out); }

void Lfm3CodecSession::Reset() { state_.Reset(); }

}  // namespace lfmvox
