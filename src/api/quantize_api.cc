// lfmvox::QuantizeModel: the GGUF release writer of the model family.
#include "base/guard.h"
#include "lfmvox/lfmvox.h"
#include "models/lfm25_audio/gguf_release.h"

namespace lfmvox {

Result<QuantizeResult> QuantizeModel(const std::string& model_dir, const std::string& out_dir,
                                     const std::string& type, const std::vector<std::string>& keep_f32) {
  return Guard("QuantizeModel", [&]() -> Result<QuantizeResult> {
    Lfm25GgufWriteOptions o;
    o.keep_f32 = keep_f32;
    if (!ParseGgufWriteType(type, &o.type))
      return InvalidArgument("--type " + type + " is not one of f32, f16, bf16, q8_0, q4_0");
    LFM_ASSIGN_OR_RETURN(Lfm25GgufFiles f, WriteLfm25GgufRelease(model_dir, out_dir, o));
    return QuantizeResult{{f.backbone, f.mmproj, f.vocoder, f.detokenizer}};
  });
}

}  // namespace lfmvox
