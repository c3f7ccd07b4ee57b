#include "formats/model_spec.h"

namespace ptn {

std::string layer_tensor(int64_t layer, const char* what) {
  return "blk." + std::to_string(layer) + "." + what;
}

const char* attn_kind_name(AttnKind k) {
  switch (k) {
    case AttnKind::Full: return "full";
    case AttnKind::Window: return "window";
    case AttnKind::Chunk: return "chunk";
  }
  return "unknown";
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::SiLU: return "silu";
    case Activation::GeLUTanh: return "gelu_tanh";
    case Activation::GeLU: return "gelu";
  }
  return "unknown";
}

const char* rope_scaling_name(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::None: return "none";
    case RopeScalingType::Linear: return "linear";
    case RopeScalingType::Llama3: return "llama3";
    case RopeScalingType::Yarn: return "yarn";
  }
  return "unknown";
}

}  // namespace ptn
