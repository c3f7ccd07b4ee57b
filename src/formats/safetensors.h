// safetensors reader: one file, or a sharded set described by model.safetensors.index.json.
//
// File layout: u64 little-endian header size N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [rows, cols], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"k": "v"}}
// then the data; offsets are relative to byte 8 + N. The reader checks that the header is at most
// kMaxHeader bytes, that every entry's size equals shape x dtype, and that the entries tile the
// data buffer exactly (contiguous, no gaps, no overlaps, the whole buffer covered).
// Tensors are views of the memory map. ptn computes with F32, F16 and BF16; other dtypes are
// listed but `tensor()` throws Unsupported naming the dtype and the tensor.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/file.h"
#include "core/tensor.h"

namespace ptn {

struct SafetensorsInfo {
  std::string name;
  std::string dtype;            // as written: "F32", "BF16", "I64", ...
  std::vector<int64_t> shape;
  uint64_t offset = 0;          // absolute byte offset in the file
  uint64_t nbytes = 0;
};

class SafetensorsFile {
 public:
  static constexpr uint64_t kMaxHeader = 100u << 20;
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_->size(); }
  const std::vector<SafetensorsInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const SafetensorsInfo* find(const std::string& name) const;
  Tensor tensor(const std::string& name) const;  // view; Unsupported for non-float dtypes
  Tensor u8_bytes(const std::string& name) const;  // SafetensorsSet::u8_bytes

 private:
  std::shared_ptr<MappedFile> file_;
  std::string path_;
  std::vector<SafetensorsInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// All the safetensors of an HF directory: model.safetensors.index.json's weight_map if present,
// else model.safetensors. Shard file names must be plain names inside the directory.
class SafetensorsSet {
 public:
  static std::shared_ptr<SafetensorsSet> open_dir(const std::string& dir);
  static std::shared_ptr<SafetensorsSet> open_file(const std::string& path);

  const std::vector<std::shared_ptr<SafetensorsFile>>& files() const { return files_; }
  std::vector<std::string> names() const;
  bool has(const std::string& name) const { return where_.count(name) != 0; }
  const SafetensorsInfo* find(const std::string& name) const;
  Tensor tensor(const std::string& name) const;
  // A U8 tensor's bytes (MXFP4 blocks and scales as OpenAI ships gpt-oss), viewed as I8 of the
  // same shape; throws Unsupported for any other dtype. Only for code that reads them as bytes.
  Tensor u8_bytes(const std::string& name) const;
  std::string file_of(const std::string& name) const;

 private:
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t> where_;  // tensor -> index in files_
};

// Whether the file starts like a safetensors file (a plausible header size then '{').
bool looks_like_safetensors(const std::string& path);

}  // namespace ptn

namespace ptn {

// One tensor for write_safetensors: bytes come from `produce` at write time (F32 or BF16 only).
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::function<Tensor()> produce;
};

// Writes a single-file safetensors (header padded with spaces to a multiple of 8, tensors in
// the given order, back to back), through path.tmp renamed at the end.
void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace ptn
