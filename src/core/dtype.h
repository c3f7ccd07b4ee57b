// Element and block types. The numeric values are GGUF's tensor type ids (ggml_type), so a
// GGUF tensor's type field maps to a DType without a table, and .ptn files use the same ids.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace ptn {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,  // activation format of the K-quant integer kernels (not a weight type)
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

struct DTypeTraits {
  const char* name;      // "f32", "q4_k", ...
  int64_t block_size;    // elements per block (1 for plain types)
  size_t block_bytes;    // bytes per block
  bool quantized;
};

// Traits of a known type; nullopt for a GGUF type id ptn does not know.
std::optional<DTypeTraits> dtype_traits(uint32_t id);
const DTypeTraits& traits(DType t);  // t must be a known DType
inline const char* dtype_name(DType t) { return traits(t).name; }
// Parses "f32", "F16", "q4_k", "Q8_0", ...; nullopt if unknown.
std::optional<DType> dtype_from_name(const std::string& name);

// Bytes of a row of n elements; throws InvalidArgument (naming `where`) if n is not a
// multiple of the block size or the size overflows.
size_t row_bytes(DType t, int64_t n, const std::string& where = "row_bytes");

}  // namespace ptn
