// Files: read-only memory maps and a checked writer. Errors name the path.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace ptn {

// A read-only memory map of a whole file. Shared ownership keeps views alive.
class MappedFile {
 public:
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Reads a whole (small) file into a string, refusing files larger than max_bytes.
std::string read_text_file(const std::string& path, size_t max_bytes = 64u << 20);
bool file_exists(const std::string& path);
bool is_directory(const std::string& path);

// Buffered binary writer with checked writes; write to `path + ".tmp"` and rename on commit()
// so a failed export never leaves a half-written file under the final name.
class FileWriter {
 public:
  explicit FileWriter(const std::string& path);
  ~FileWriter();
  void write(const void* data, size_t n);
  void pad_to(uint64_t alignment);  // zero bytes up to the next multiple of alignment
  uint64_t pos() const { return pos_; }
  void commit();  // flush, close, rename into place

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  uint64_t pos_ = 0;
};

}  // namespace ptn
