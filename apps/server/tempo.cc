#include "tempo.h"

#include <soundtouch/SoundTouch.h>

#include <exception>
#include <new>

namespace lfmvox::server {

struct TempoStretcher::Impl {
  soundtouch::SoundTouch st;
  std::vector<float> buf = std::vector<float>(4096);

  // Every sample SoundTouch has ready, appended to *out.
  void Drain(std::vector<float>* out) {
    for (;;) {
      const unsigned n = st.receiveSamples(buf.data(), static_cast<unsigned>(buf.size()));
      if (n == 0) return;
      out->insert(out->end(), buf.begin(), buf.begin() + n);
    }
  }
};

namespace {

// SoundTouch reports bad parameters by throwing; nothing may leave the server's handlers that way.
template <typename F>
Status Guarded(F&& f) {
  try {
    f();
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return OutOfMemory("out of memory while changing the speech's speed");
  } catch (const std::exception& e) {
    return Internal(std::string("changing the speech's speed failed: ") + e.what());
  }
}

}  // namespace

TempoStretcher::TempoStretcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TempoStretcher::~TempoStretcher() = default;

Result<std::unique_ptr<TempoStretcher>> TempoStretcher::Create(int sample_rate, double speed) {
  if (!(speed >= 0.25 && speed <= 4.0)) return InvalidArgument("speed must be in [0.25, 4.0]");
  if (sample_rate < 8000 || sample_rate > 192000)
    return InvalidArgument("sample rate must be in [8000, 192000]");
  auto impl = std::make_unique<Impl>();
  Status s = Guarded([&] {
    impl->st.setSampleRate(static_cast<unsigned>(sample_rate));
    impl->st.setChannels(1);
    impl->st.setTempo(speed);  // tempo only: pitch and rate unchanged
  });
  if (!s.ok()) return s;
  return std::unique_ptr<TempoStretcher>(new TempoStretcher(std::move(impl)));
}

Status TempoStretcher::Push(std::span<const float> in, std::vector<float>* out) {
  return Guarded([&] {
    impl_->st.putSamples(in.data(), static_cast<unsigned>(in.size()));
    impl_->Drain(out);
  });
}

Status TempoStretcher::Finish(std::vector<float>* out) {
  return Guarded([&] {
    impl_->st.flush();
    impl_->Drain(out);
  });
}

}  // namespace lfmvox::server
