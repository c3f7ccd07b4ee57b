#include "core/dtype.h"

#include <algorithm>
#include <cctype>

#include "core/blocks.h"
#include "core/error.h"

namespace ptn {

std::optional<DTypeTraits> dtype_traits(uint32_t id) {
  switch (static_cast<DType>(id)) {
    case DType::F32: return DTypeTraits{"f32", 1, 4, false};
    case DType::F16: return DTypeTraits{"f16", 1, 2, false};
    case DType::BF16: return DTypeTraits{"bf16", 1, 2, false};
    case DType::F64: return DTypeTraits{"f64", 1, 8, false};
    case DType::I8: return DTypeTraits{"i8", 1, 1, false};
    case DType::I16: return DTypeTraits{"i16", 1, 2, false};
    case DType::I32: return DTypeTraits{"i32", 1, 4, false};
    case DType::I64: return DTypeTraits{"i64", 1, 8, false};
    case DType::Q4_0: return DTypeTraits{"q4_0", QK4_0, sizeof(BlockQ4_0), true};
    case DType::Q4_1: return DTypeTraits{"q4_1", QK4_1, sizeof(BlockQ4_1), true};
    case DType::Q5_0: return DTypeTraits{"q5_0", QK5_0, sizeof(BlockQ5_0), true};
    case DType::Q5_1: return DTypeTraits{"q5_1", QK5_1, sizeof(BlockQ5_1), true};
    case DType::IQ4_NL: return DTypeTraits{"iq4_nl", QK4_NL, sizeof(BlockIQ4_NL), true};
    case DType::Q8_0: return DTypeTraits{"q8_0", QK8_0, sizeof(BlockQ8_0), true};
    case DType::MXFP4: return DTypeTraits{"mxfp4", QK_MXFP4, sizeof(BlockMXFP4), true};
    case DType::Q2_K: return DTypeTraits{"q2_k", QK_K, sizeof(BlockQ2K), true};
    case DType::Q3_K: return DTypeTraits{"q3_k", QK_K, sizeof(BlockQ3K), true};
    case DType::IQ4_XS: return DTypeTraits{"iq4_xs", QK_K, sizeof(BlockIQ4XS), true};
    case DType::IQ1_S: return DTypeTraits{"iq1_s", QK_K, sizeof(BlockIQ1S), true};
    case DType::IQ1_M: return DTypeTraits{"iq1_m", QK_K, sizeof(BlockIQ1M), true};
    case DType::IQ2_XXS: return DTypeTraits{"iq2_xxs", QK_K, sizeof(BlockIQ2XXS), true};
    case DType::IQ2_XS: return DTypeTraits{"iq2_xs", QK_K, sizeof(BlockIQ2XS), true};
    case DType::IQ2_S: return DTypeTraits{"iq2_s", QK_K, sizeof(BlockIQ2S), true};
    case DType::IQ3_XXS: return DTypeTraits{"iq3_xxs", QK_K, sizeof(BlockIQ3XXS), true};
    case DType::IQ3_S: return DTypeTraits{"iq3_s", QK_K, sizeof(BlockIQ3S), true};
    case DType::Q4_K: return DTypeTraits{"q4_k", QK_K, sizeof(BlockQ4K), true};
    case DType::Q5_K: return DTypeTraits{"q5_k", QK_K, sizeof(BlockQ5K), true};
    case DType::Q6_K: return DTypeTraits{"q6_k", QK_K, sizeof(BlockQ6K), true};
    case DType::Q8_K: return DTypeTraits{"q8_k", QK_K, sizeof(BlockQ8K), true};
    case DType::TQ1_0: return DTypeTraits{"tq1_0", QK_K, sizeof(BlockTQ1_0), true};
    case DType::TQ2_0: return DTypeTraits{"tq2_0", QK_K, sizeof(BlockTQ2_0), true};
  }
  return std::nullopt;
}

const DTypeTraits& traits(DType t) {
  static const DTypeTraits unknown{"unknown", 1, 0, false};
  static DTypeTraits table[64];
  static bool init = [] {
    for (uint32_t i = 0; i < 64; ++i) table[i] = dtype_traits(i).value_or(unknown);
    return true;
  }();
  (void)init;
  uint32_t id = static_cast<uint32_t>(t);
  if (id >= 64 || table[id].block_bytes == 0)
    fail(ErrorKind::Internal, "dtype", "unknown dtype id " + std::to_string(id));
  return table[id];
}

std::optional<DType> dtype_from_name(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  for (uint32_t i = 0; i < 64; ++i) {
    auto t = dtype_traits(i);
    if (t && n == t->name) return static_cast<DType>(i);
  }
  return std::nullopt;
}

size_t row_bytes(DType t, int64_t n, const std::string& where) {
  const DTypeTraits& tr = traits(t);
  if (n < 0 || n % tr.block_size != 0)
    fail(ErrorKind::InvalidArgument, where,
         "row of " + std::to_string(n) + " elements is not a multiple of the " + tr.name +
             " block size " + std::to_string(tr.block_size));
  return checked_mul(static_cast<uint64_t>(n / tr.block_size), tr.block_bytes, where);
}

}  // namespace ptn
