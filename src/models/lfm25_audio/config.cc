#include "models/lfm25_audio/config.h"

#include <cfloat>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/memory_budget.h"
#include "io/audio_file.h"
#include "io/json_config.h"

namespace lfmvox {

using nlohmann::json;

// ---------------------------------------------------------------------------
// depthformer

Result<DepthformerConfig> DepthformerConfig::FromJson(const json& d, const std::string& where) {
  constexpr int64_t kMaxDim = 1 << 16;  // far above any real width; stops absurd allocations
  LFM_RETURN_IF_ERROR(CheckObject(d, where));
  DepthformerConfig c;
  LFM_RETURN_IF_ERROR(GetInt(d, "layers", where, true, 1, 256, &c.layers));
  LFM_RETURN_IF_ERROR(GetInt(d, "dim", where, true, 1, kMaxDim, &c.dim));
  LFM_RETURN_IF_ERROR(GetInt(d, "heads", where, false, 1, kMaxDim, &c.heads));
  LFM_RETURN_IF_ERROR(GetInt(d, "kv_heads", where, false, 1, kMaxDim, &c.kv_heads));
  LFM_RETURN_IF_ERROR(GetBool(d, "tie", where, false, &c.tie));
  LFM_RETURN_IF_ERROR(GetDouble(d, "rope_theta", where, false, 1.0, 1e12, &c.rope_theta));
  LFM_RETURN_IF_ERROR(GetFloat(d, "norm_eps", where, false, 1e-12, 1.0, &c.eps));
  if (c.dim % c.heads != 0 || c.heads % c.kv_heads != 0) {
    return InvalidArgument(
        StrFormat("%s: dim %d, heads %d, kv_heads %d: dim must divide into the heads and heads into the "
                  "kv heads",
                  where.c_str(), c.dim, c.heads, c.kv_heads));
  }
  c.head_dim = c.dim / c.heads;
  if (c.head_dim % 2 != 0) {
    return InvalidArgument(
        StrFormat("%s: head dim %d (dim / heads) must be even for RoPE pairs", where.c_str(), c.head_dim));
  }
  return c;
}

// ---------------------------------------------------------------------------
// encoder

// Keys a section holds beyond those read below are ignored: the published files carry training-only
// fields (dropouts, loss weights) and library metadata (transformers_version, torch_dtype), and every
// key that changes inference is read and checked by value.

Result<ConformerConfig> ConformerConfig::FromJson(const json& j, const std::string& where) {
  LFM_RETURN_IF_ERROR(CheckObject(j, where));
  ConformerConfig c;
  LFM_RETURN_IF_ERROR(GetInt(j, "feat_in", where, true, 1, 4096, &c.feat_in));
  LFM_RETURN_IF_ERROR(GetInt(j, "n_layers", where, true, 1, 1024, &c.n_layers));
  LFM_RETURN_IF_ERROR(GetInt(j, "d_model", where, true, 1, 1 << 16, &c.d_model));
  LFM_RETURN_IF_ERROR(GetInt(j, "n_heads", where, true, 1, 1024, &c.n_heads));
  if (c.d_model % c.n_heads != 0) {
    return InvalidArgument(
        StrFormat("%s: n_heads %d does not divide d_model %d", where.c_str(), c.n_heads, c.d_model));
  }
  // NeMo's -1 means "as many channels as d_model".
  c.subsampling_channels = -1;
  LFM_RETURN_IF_ERROR(
      GetInt(j, "subsampling_conv_channels", where, true, -1, 1 << 16, &c.subsampling_channels));
  if (c.subsampling_channels == -1) c.subsampling_channels = c.d_model;
  if (c.subsampling_channels == 0) return OutOfRange(where + ": \"subsampling_conv_channels\" is 0");
  LFM_RETURN_IF_ERROR(GetInt(j, "ff_expansion_factor", where, true, 1, 64, &c.ff_expansion_factor));
  LFM_RETURN_IF_ERROR(GetInt(j, "conv_kernel_size", where, true, 1, 63, &c.conv_kernel_size));
  if (c.conv_kernel_size % 2 == 0) {
    return InvalidArgument(StrFormat("%s: \"conv_kernel_size\" = %d must be odd for symmetric padding",
                                     where.c_str(), c.conv_kernel_size));
  }
  // xscaling changes the numbers and NeMo's default (true) differs from
  // LFM2.5's value (false), so the file must say.
  LFM_RETURN_IF_ERROR(GetBool(j, "xscaling", where, true, &c.xscaling));
  // Checked for type only; neither changes the numbers. pos_emb_max_len is
  // NeMo's initial relative-position table length, extended for longer inputs
  // with the same values (the encoder builds the table it needs). untie_biases
  // = false shares one pos_bias_u/v parameter between the layers, but NeMo
  // still registers it in every layer, so the checkpoint holds it under each
  // layer's name and the per-layer reads are right either way.
  int pos_emb_max_len = 5000;
  bool untie_biases = true;
  LFM_RETURN_IF_ERROR(GetInt(j, "pos_emb_max_len", where, false, 1, 1 << 30, &pos_emb_max_len));
  LFM_RETURN_IF_ERROR(GetBool(j, "untie_biases", where, false, &untie_biases));

  LFM_RETURN_IF_ERROR(
      RequireValue(j, "subsampling", where, "dw_striding", false, "depthwise-separable striding"));
  LFM_RETURN_IF_ERROR(RequireValue(j, "subsampling_factor", where, 8, false, "three stride-2 stages"));
  LFM_RETURN_IF_ERROR(
      RequireValue(j, "causal_downsampling", where, false, true, "symmetric subsampling convolutions"));
  LFM_RETURN_IF_ERROR(
      RequireValue(j, "self_attention_model", where, "rel_pos", false, "Transformer-XL relative positions"));
  LFM_RETURN_IF_ERROR(
      RequireValue(j, "att_context_size", where, json::array({-1, -1}), true, "full attention"));
  LFM_RETURN_IF_ERROR(
      RequireValue(j, "conv_norm_type", where, "batch_norm", true, "BatchNorm in the conv module"));
  LFM_RETURN_IF_ERROR(RequireValue(j, "feat_out", where, -1, true, "no output projection"));
  LFM_RETURN_IF_ERROR(RequireValue(j, "reduction", where, nullptr, true, "no time reduction"));
  LFM_RETURN_IF_ERROR(RequireValue(j, "reduction_position", where, nullptr, true, "no time reduction"));
  LFM_RETURN_IF_ERROR(RequireValue(j, "reduction_factor", where, 1, true, "no time reduction"));
  const int half = (c.conv_kernel_size - 1) / 2;
  LFM_RETURN_IF_ERROR(RequireValue(j, "conv_context_size", where, json::array({half, half}), true,
                                   "symmetric conv context (k − 1)/2 each side"));
  // NeMo ConformerEncoder settings liquid-audio's dataclass does not have: a file that sets one to
  // other than the value liquid-audio runs with is a different encoder.
  LFM_RETURN_IF_ERROR(RequireValue(j, "use_bias", where, true, true, "biases in every linear and conv"));
  LFM_RETURN_IF_ERROR(RequireValue(j, "global_tokens", where, 0, true, "no global attention tokens"));
  LFM_RETURN_IF_ERROR(
      RequireValue(j, "att_context_style", where, "regular", true, "the regular attention context"));
  // dropout, dropout_pre_encoder, dropout_emb, dropout_att: identity at inference.
  return c;
}

// ---------------------------------------------------------------------------
// preprocessor

// The largest FFT (and analysis window) the front end builds: 2^16 samples, 4 s at 16 kHz, far above
// the 25 ms frames speech models use; it bounds the filterbank at 2^15 + 1 bins per mel filter.
constexpr int kMaxFftSize = 1 << 16;

Result<LogMelConfig> LogMelConfig::FromJson(const json& pre, const std::string& where) {
  LFM_RETURN_IF_ERROR(CheckObject(pre, where));
  LogMelConfig c;
  LFM_RETURN_IF_ERROR(GetInt(pre, "sample_rate", where, true, 1, kMaxAudioSampleRate, &c.sample_rate));
  LFM_RETURN_IF_ERROR(GetInt(pre, "features", where, true, 1, 4096, &c.n_mels));

  // NeMo: n_window_size = int(window_size * sample_rate), n_window_stride likewise (truncation).
  for (const auto& [key, out] :
       {std::pair{"window_size", &c.win_length}, std::pair{"window_stride", &c.hop_length}}) {
    double seconds = 0;
    LFM_RETURN_IF_ERROR(GetDouble(pre, key, where, true, std::numeric_limits<double>::lowest(),
                                  std::numeric_limits<double>::max(), &seconds));
    const double samples = seconds * c.sample_rate;
    if (!(samples >= 1.0 && samples <= kMaxFftSize)) {
      return InvalidArgument(
          StrFormat("%s: \"%s\" = %g s is %g samples at %d Hz; need at least 1 (and at "
                    "most %d, the largest FFT lfmvox builds)",
                    where.c_str(), key, seconds, samples, c.sample_rate, kMaxFftSize));
    }
    *out = static_cast<int>(samples);
  }
  // n_fft must be present; null means NeMo's 2 ** ceil(log2(win_length)).
  if (!pre.contains("n_fft"))
    return NotFound(where + " lacks the required key \"n_fft\" (null for the default)");
  if (pre.at("n_fft").is_null()) {
    c.n_fft = 1;
    while (c.n_fft < c.win_length) c.n_fft *= 2;
  } else {
    LFM_RETURN_IF_ERROR(GetInt(pre, "n_fft", where, true, 2, kMaxFftSize, &c.n_fft));
  }
  // The filterbank is [features, n_fft/2 + 1]; a mel filter needs at least one FFT bin to cover, so there are
  // no more filters than bins, and the table must fit the memory budget.
  const int bins = c.n_fft / 2 + 1;
  if (c.n_mels > bins) {
    return OutOfRange(
        StrFormat("%s: \"features\" = %d mel filters exceed the %d FFT bins of \"n_fft\" = %d; "
                  "each filter needs its own bins (lower features or raise n_fft)",
                  where.c_str(), c.n_mels, bins, c.n_fft));
  }
  LFM_RETURN_IF_ERROR(
      CheckMemoryBudget(static_cast<double>(c.n_mels) * bins * sizeof(float), where + ": the mel filterbank",
                        StrFormat("%d features x %d bins of n_fft %d", c.n_mels, bins, c.n_fft)));
  if (c.n_fft < c.win_length) {
    return InvalidArgument(StrFormat("%s: \"n_fft\" = %d is shorter than the %d-sample window", where.c_str(),
                                     c.n_fft, c.win_length));
  }
  LFM_RETURN_IF_ERROR(
      RequireValue(pre, "normalize", where, "per_feature", false, "per-feature normalisation"));
  LFM_RETURN_IF_ERROR(RequireValue(pre, "window", where, "hann", false, "a Hann window"));
  bool log = true;
  LFM_RETURN_IF_ERROR(GetBool(pre, "log", where, true, &log));
  if (!log) return Unimplemented(where + ": \"log\" = false is not supported (only true: log-mel)");
  int splicing = 0, pad_to = 0;
  LFM_RETURN_IF_ERROR(GetInt(pre, "frame_splicing", where, true, 0, 1 << 20, &splicing));
  if (splicing != 1) {
    return Unimplemented(
        StrFormat("%s: \"frame_splicing\" = %d is not supported (only 1)", where.c_str(), splicing));
  }
  LFM_RETURN_IF_ERROR(GetInt(pre, "pad_to", where, true, 0, 1 << 20, &pad_to));
  if (pad_to != 0)
    return Unimplemented(StrFormat("%s: \"pad_to\" = %d is not supported (only 0)", where.c_str(), pad_to));
  double dither = 0;  // checked only: NeMo dithers in training
  LFM_RETURN_IF_ERROR(
      GetDouble(pre, "dither", where, false, 0.0, std::numeric_limits<double>::max(), &dither));
  LFM_RETURN_IF_ERROR(GetFloat(pre, "pad_value", where, false, -FLT_MAX, FLT_MAX, &c.pad_value));
  // NeMo FilterbankFeatures settings liquid-audio's PreprocessorConfig lacks (so it runs NeMo's
  // defaults): a file that sets one otherwise describes another front end.
  LFM_RETURN_IF_ERROR(RequireValue(pre, "preemph", where, 0.97, true, "pre-emphasis 0.97"));
  LFM_RETURN_IF_ERROR(RequireValue(pre, "mag_power", where, 2.0, true, "the power spectrum"));
  LFM_RETURN_IF_ERROR(RequireValue(pre, "log_zero_guard_type", where, "add", true, "log(x + guard)"));
  LFM_RETURN_IF_ERROR(
      RequireValue(pre, "log_zero_guard_value", where, std::ldexp(1.0, -24), true, "a guard of 2^-24"));
  LFM_RETURN_IF_ERROR(RequireValue(pre, "lowfreq", where, 0, true, "mel filters from 0 Hz"));
  LFM_RETURN_IF_ERROR(RequireValue(pre, "highfreq", where, nullptr, true, "mel filters up to Nyquist"));
  if (auto mn = pre.find("mel_norm"); mn != pre.end() && *mn != "slaney") {  // null: unnormalised filters
    return Unimplemented(StrFormat("%s: \"mel_norm\" = %s is not supported (only \"slaney\")", where.c_str(),
                                   JsonPreview(*mn).c_str()));
  }
  LFM_RETURN_IF_ERROR(RequireValue(pre, "exact_pad", where, false, true, "centred STFT frames"));
  return c;
}

// ---------------------------------------------------------------------------
// audio_detokenizer/config.json

Result<Lfm25DetokenizerConfig> Lfm25DetokenizerConfig::FromJson(const json& j, const std::string& where) {
  Lfm25DetokenizerConfig c;
  LFM_ASSIGN_OR_RETURN(c.lfm, Lfm2Config::FromJson(j, where));
  // The architecture's own constants (liquid-audio detokenizer.py: 8 fused
  // codebooks, ×6 upsampling, ISTFT hop 320 at 24 kHz, Linear(512, 1282)),
  // unless the file states them.
  c.num_codebooks = 8;
  c.upsample = 6;
  c.hop = 320;
  c.sample_rate = 24000;
  c.output_size = 1282;
  constexpr int64_t kMax = 1 << 20;
  LFM_RETURN_IF_ERROR(GetInt(j, "codebooks", where, false, 1, 64, &c.num_codebooks));
  LFM_RETURN_IF_ERROR(GetInt(j, "upsample_factor", where, false, 1, 64, &c.upsample));
  LFM_RETURN_IF_ERROR(GetInt(j, "hop_length", where, false, 1, kMax, &c.hop));
  LFM_RETURN_IF_ERROR(GetInt(j, "sample_rate", where, false, 1, kMax, &c.sample_rate));
  LFM_RETURN_IF_ERROR(GetInt(j, "output_size", where, false, 4, kMax, &c.output_size));
  if (c.output_size % 2 != 0 || c.output_size < 4) {
    return InvalidArgument(where + ": output_size must be 2·(n_fft/2 + 1), an even number");
  }
  c.n_fft = c.output_size - 2;
  if (c.hop > c.n_fft || (c.n_fft - c.hop) % 2 != 0) {
    return InvalidArgument(StrFormat("%s: hop %d and n_fft %d do not allow a centred (\"same\") inverse STFT",
                                     where.c_str(), c.hop, c.n_fft));
  }
  for (LayerKind k : c.lfm.layers) {
    if (k == LayerKind::kFullAttention) {
      return InvalidArgument(where +
                             ": the detokenizer streams, so its attention layers must be "
                             "sliding_attention (a full_attention layer has no bounded state)");
    }
  }
  return c;
}

Result<Lfm25DetokenizerConfig> Lfm25DetokenizerConfig::Load(const std::string& path) {
  LFM_ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
  return FromJson(j, path);
}

// ---------------------------------------------------------------------------
// config.json

Result<Lfm25AudioConfig> Lfm25AudioConfig::FromJson(const json& j, const std::string& where) {
  LFM_RETURN_IF_ERROR(CheckObject(j, where));
  Lfm25AudioConfig c;
  auto lfm = j.find("lfm");
  if (lfm == j.end() || !lfm->is_object()) {
    return NotFound(where +
                    " lacks the \"lfm\" section (the backbone's Lfm2Config); is this an LFM2.5-Audio model?");
  }
  LFM_ASSIGN_OR_RETURN(c.lfm, Lfm2Config::FromJson(*lfm, where + " [lfm]"));
  for (LayerKind k : c.lfm.layers) {
    if (k == LayerKind::kSlidingAttention) {
      return Unimplemented(where +
                           " [lfm]: the backbone has full-attention layers only; sliding_attention is not "
                           "supported there");
    }
  }
  LFM_RETURN_IF_ERROR(GetInt(j, "codebooks", where, true, 1, 64, &c.codebooks));
  LFM_RETURN_IF_ERROR(GetInt(j, "interleaved_n_text", where, true, 1, 1 << 16, &c.interleaved_n_text));
  LFM_RETURN_IF_ERROR(GetInt(j, "interleaved_n_audio", where, true, 1, 1 << 16, &c.interleaved_n_audio));

  LFM_ASSIGN_OR_RETURN(const json* depth, GetSection(j, "depthformer", where));
  LFM_ASSIGN_OR_RETURN(c.depthformer, DepthformerConfig::FromJson(*depth, where + " [depthformer]"));
  c.depthformer.num_codebooks = c.codebooks;

  LFM_ASSIGN_OR_RETURN(const json* enc, GetSection(j, "encoder", where));
  LFM_ASSIGN_OR_RETURN(c.encoder, ConformerConfig::FromJson(*enc, where + " [encoder]"));

  LFM_ASSIGN_OR_RETURN(const json* pre, GetSection(j, "preprocessor", where));
  LFM_ASSIGN_OR_RETURN(c.preprocessor, LogMelConfig::FromJson(*pre, where + " [preprocessor]"));
  // The encoder reads the front end's mels as they are.
  if (c.encoder.feat_in != c.preprocessor.n_mels) {
    return InvalidArgument(
        StrFormat("%s: [encoder] \"feat_in\" = %d but [preprocessor] \"features\" = %d; the "
                  "encoder takes the front end's mel bins",
                  where.c_str(), c.encoder.feat_in, c.preprocessor.n_mels));
  }
  return c;
}

Result<Lfm25AudioConfig> Lfm25AudioConfig::Load(const std::string& path) {
  LFM_ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
  return FromJson(j, path);
}

}  // namespace lfmvox
