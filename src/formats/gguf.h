// GGUF reader (versions 2 and 3, little-endian): metadata key/values of every type (nested
// arrays too), tensor infos, and tensors as views of the memory-mapped file.
//
// Layout: "GGUF", u32 version, u64 n_tensors, u64 n_kv, then n_kv x (string key, u32 type, value),
// then n_tensors x (string name, u32 n_dims, u64 dims[n_dims] fastest-first, u32 type, u64 offset),
// padding to `general.alignment` (default 32), then the data; tensor offsets are relative to it.
// Strings are u64 length + bytes (no NUL). GGUF dims [64, 512] mean row-major [512][64]: ptn
// shapes list them outermost first, {512, 64}.
//
// Everything read from the file is bounded (see the limits below) and validated when the file is
// opened, so later accessors only fail for a missing key or a wrong type.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/file.h"
#include "core/tensor.h"

namespace ptn {

enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
  String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* gguf_type_name(GgufType t);
// Bytes of one scalar of type t (0 for String and Array).
size_t gguf_scalar_size(GgufType t);

struct GgufLimits {
  static constexpr uint64_t kMaxTensors = 1u << 20;
  static constexpr uint64_t kMaxKv = 1u << 20;
  static constexpr uint64_t kMaxArray = 1u << 26;   // elements of one array
  static constexpr uint64_t kMaxString = 1u << 24;  // bytes of one string
  static constexpr int kMaxArrayDepth = 8;          // nested arrays
  static constexpr uint64_t kMaxAlignment = 1u << 20;
};

// One metadata value. Scalars are widened (integers to u/i 64, floats to double); strings and
// numeric array elements point into the mapped file, which the owning GgufFile keeps alive.
struct GgufValue {
  GgufType type = GgufType::U8;
  uint64_t u = 0;        // unsigned integers and bool
  int64_t i = 0;         // signed integers
  double f = 0;          // F32 / F64
  std::string_view str;  // String

  // Array
  GgufType elem_type = GgufType::U8;
  uint64_t count = 0;
  const uint8_t* raw = nullptr;             // numeric/bool elements, little-endian, count x size
  std::vector<std::string_view> strings;    // String elements
  std::vector<GgufValue> items;             // Array elements (nested arrays)

  std::string_view encoded;  // the value's bytes as stored (after the type field), for copying

  bool is_integer() const;
  bool is_float() const { return type == GgufType::F32 || type == GgufType::F64; }
  // Short human description: "u32 5", "string \"llama\"", "array[512] of string", ...
  std::string describe(size_t max_items = 8) const;
};

struct GgufTensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // ptn order: outermost first
  uint64_t offset = 0;         // absolute byte offset in the file
  uint64_t nbytes = 0;
};

class GgufFile {
 public:
  // Opens and validates the whole header; throws ptn::Error (Corrupt/Unsupported/Io) naming the
  // file and the field.
  static std::shared_ptr<GgufFile> open(const std::string& path);
  // Parses bytes in memory (tests); `keep_alive` owns them.
  static std::shared_ptr<GgufFile> parse(std::shared_ptr<MappedFile> file);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const;

  // Metadata, in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }

  // Typed accessors: throw Corrupt naming the file and key when missing or of the wrong type.
  // Integer accessors accept any integer type whose value fits.
  const GgufValue& get(const std::string& key) const;
  uint32_t get_u32(const std::string& key) const;
  uint64_t get_u64(const std::string& key) const;
  int64_t get_i64(const std::string& key) const;
  int32_t get_i32(const std::string& key) const;
  float get_f32(const std::string& key) const;  // F32 or F64
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<float> get_f32_array(const std::string& key) const;
  std::vector<int64_t> get_int_array(const std::string& key) const;

  // Optional variants: nullopt when the key is absent (still throw on a wrong type).
  std::optional<uint32_t> opt_u32(const std::string& key) const;
  std::optional<uint64_t> opt_u64(const std::string& key) const;
  std::optional<float> opt_f32(const std::string& key) const;
  std::optional<bool> opt_bool(const std::string& key) const;
  std::optional<std::string> opt_string(const std::string& key) const;

  // Tensors, in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // A view of the tensor's bytes in the mapping (keeps the mapping alive); throws if absent.
  Tensor tensor(const std::string& name) const;

  // "file.gguf: key 'llama.block_count'"
  std::string where_key(const std::string& key) const;

 private:
  std::shared_ptr<MappedFile> file_;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// True if the file starts with the GGUF magic (reads 4 bytes; false if unreadable).
bool looks_like_gguf(const std::string& path);

}  // namespace ptn
