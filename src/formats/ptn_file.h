// The .ptn container: a fixed 128-byte header, a data segment of aligned tensors, and a JSON
// manifest at the end of the file. This layer knows nothing about graphs or models: it stores
// a manifest (any JSON object the caller builds) plus named binary tensors, and validates all
// of it on load. The byte layout is documented in docs/ptn-format.md.
//
// Writing: tensors stream into `path.tmp` as they are added (each CRC32C'd on the way), then
// finish(manifest) appends the manifest, writes the header and renames the file into place. A
// writer destroyed (or failed) before finish() removes its partial file.
//
// Reading: open() maps the file and checks the header, every offset and size (overflow-safe),
// and the manifest's structure; VerifyLevel::Full also checks every tensor's CRC32C. Every
// failure is a ptn::Error naming the file, the field (and tensor) and what was wrong.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace ptn {

struct PtnLimits {
  static constexpr uint32_t kFormatVersion = 1;          // the newest version this code reads
  static constexpr uint64_t kHeaderSize = 128;
  static constexpr uint64_t kDataSegmentAlignment = 4096;
  static constexpr uint64_t kDefaultAlignment = 64;      // tensor alignment inside the data
  static constexpr uint64_t kMinAlignment = 32;
  static constexpr uint64_t kMaxAlignment = 1u << 20;
  static constexpr uint64_t kMaxManifestBytes = 256ull << 20;
  static constexpr uint64_t kMaxTensors = 1u << 20;
  static constexpr size_t kMaxNameBytes = 1024;          // bytes of one tensor name (UTF-8)
  static constexpr int kMaxJsonDepth = 128;              // nesting of manifest arrays/objects
};

// Keys of the manifest that belong to the container; the caller's manifest may not use them.
inline constexpr const char* kPtnTensorsKey = "tensors";
inline constexpr const char* kPtnAlignmentKey = "alignment";

// One entry of the manifest's tensor table, validated.
struct PtnTensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // outermost first, at most 4 dims
  uint64_t offset = 0;         // bytes, relative to the start of the data segment
  uint64_t nbytes = 0;
  uint32_t crc32c = 0;
};

class PtnWriter {
 public:
  // Creates `path + ".tmp"`; `alignment` (a power of two in [32, 1 MiB]) aligns every tensor.
  explicit PtnWriter(const std::string& path, uint64_t alignment = PtnLimits::kDefaultAlignment);
  ~PtnWriter();  // removes the partial file unless finish() succeeded
  PtnWriter(const PtnWriter&) = delete;
  PtnWriter& operator=(const PtnWriter&) = delete;

  // Writes the tensor's bytes now (it must be contiguous). Names are unique, non-empty, at most
  // kMaxNameBytes of valid UTF-8 without control characters.
  void add_tensor(const std::string& name, const Tensor& t);
  void add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
                  size_t nbytes);
  // `manifest` must be a JSON object without the container keys ("tensors", "alignment"); it is
  // stored with them added. Writes the header and renames the file into place.
  void finish(const nlohmann::json& manifest);

  uint64_t bytes_written() const { return pos_; }
  size_t tensor_count() const { return tensors_.size(); }

 private:
  void write(const void* data, size_t n);
  void pad_to(uint64_t alignment);
  void check_usable(const char* what) const;
  void abandon() noexcept;

  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  uint64_t alignment_;
  uint64_t data_offset_;
  uint64_t pos_ = 0;
  bool failed_ = false, finished_ = false;
  std::vector<PtnTensorInfo> tensors_;
  std::unordered_set<std::string> names_;
};

enum class VerifyLevel {
  Cheap,  // header, bounds, manifest CRC and structure; tensor bytes are not read
  Full,   // Cheap + the CRC32C of every tensor
};

class PtnFile {
 public:
  // Memory-maps the file and validates it at `level`.
  static std::shared_ptr<PtnFile> open(const std::string& path, VerifyLevel level = VerifyLevel::Cheap);
  // The same from bytes in memory (copied into a page-aligned buffer); `name` is used in errors.
  // Any input either loads or throws ptn::Error: suitable for a fuzz target.
  static std::shared_ptr<PtnFile> from_memory(std::vector<uint8_t> bytes, const std::string& name,
                                              VerifyLevel level = VerifyLevel::Cheap);

  // The caller's manifest exactly as given to PtnWriter::finish (container keys removed).
  const nlohmann::json& manifest() const { return manifest_; }
  // The full stored manifest, container keys included (for inspection tools).
  const nlohmann::json& raw_manifest() const { return raw_manifest_; }
  uint32_t format_version() const { return format_version_; }
  uint32_t flags() const { return flags_; }
  uint64_t file_size() const { return size_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t alignment() const { return alignment_; }
  // The stored manifest's size and CRC32C (the manifest lists every tensor's CRC, so the pair
  // names the program's graph and weights: KV records use it as the program's identity).
  uint64_t manifest_size() const { return manifest_size_; }
  uint32_t manifest_crc32c() const { return manifest_crc_; }
  const std::string& name() const { return name_; }

  bool has_tensor(const std::string& name) const;
  // A view into the mapping; the view keeps the mapping alive. Throws InvalidArgument if absent.
  Tensor tensor(const std::string& name) const;
  const PtnTensorInfo& tensor_info(const std::string& name) const;
  const std::vector<PtnTensorInfo>& tensor_infos() const { return tensors_; }  // in file order
  std::vector<std::string> tensor_names() const;                               // in file order
  // What VerifyLevel::Full adds at load: checks every tensor's CRC32C, throwing Corrupt naming
  // the first tensor whose bytes do not match, and that the padding between tensors (and
  // between header, data and manifest) is zero, so every byte of the file has been checked.
  void verify_checksums() const;

 private:
  PtnFile() = default;
  static std::shared_ptr<PtnFile> load(std::shared_ptr<const void> storage, const uint8_t* data,
                                       uint64_t size, const std::string& name, VerifyLevel level);
  void parse_header();
  void parse_manifest();
  void parse_tensor_table(const nlohmann::json& table);
  size_t index_of(const std::string& name) const;
  void verify_padding() const;

  std::shared_ptr<const void> storage_;  // owns the bytes (mapping or buffer)
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::string name_;
  uint32_t format_version_ = 0, flags_ = 0;
  uint64_t manifest_offset_ = 0, manifest_size_ = 0;
  uint32_t manifest_crc_ = 0;
  uint64_t data_offset_ = 0, data_size_ = 0;
  uint64_t alignment_ = 0;
  nlohmann::json manifest_, raw_manifest_;
  std::vector<PtnTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> by_name_;
  std::vector<size_t> by_offset_;  // tensor indices sorted by offset
};

// True when `data` (n bytes) starts with the 8 magic bytes of a .ptn file ("PTN\0PROG").
bool has_ptn_magic(const void* data, size_t n);

}  // namespace ptn
