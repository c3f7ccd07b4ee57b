// Bounded little-endian reader over bytes in memory (usually an mmap'ed file). Every read is
// checked against what remains; errors name the source, the byte offset and the field.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/error.h"

namespace ptn {

class ByteReader {
 public:
  ByteReader(const void* data, size_t size, std::string source)
      : base_(static_cast<const uint8_t*>(data)), size_(size), source_(std::move(source)) {}

  size_t pos() const { return pos_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - pos_; }
  const std::string& source() const { return source_; }
  const uint8_t* base() const { return base_; }

  template <class T>
  T read(const char* field) {
    static_assert(std::is_trivially_copyable_v<T>);
    require(sizeof(T), field);
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  // A pointer to the next n bytes, which are consumed.
  const uint8_t* bytes(uint64_t n, const char* field) {
    require(n, field);
    const uint8_t* p = base_ + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }
  // A string of n bytes (n given by the caller, checked against max_len and what remains).
  std::string_view string(uint64_t n, uint64_t max_len, const char* field) {
    if (n > max_len)
      fail(ErrorKind::Corrupt, where(field),
           "length " + std::to_string(n) + " exceeds the limit of " + std::to_string(max_len));
    return {reinterpret_cast<const char*>(bytes(n, field)), static_cast<size_t>(n)};
  }
  void skip(uint64_t n, const char* field) { bytes(n, field); }
  void seek(uint64_t off, const char* field) {
    if (off > size_) fail(ErrorKind::Corrupt, where(field), "offset " + std::to_string(off) + " is past the end");
    pos_ = static_cast<size_t>(off);
  }
  // Align the position up to a multiple of `alignment`, which must be a power of two (it often
  // comes from the file itself, so anything else is a Corrupt error, not a division by zero).
  void align(uint64_t alignment, const char* field) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
      fail(ErrorKind::Corrupt, where(field), "alignment " + std::to_string(alignment) + " is not a power of two");
    if (alignment - 1 > UINT64_MAX - pos_)
      fail(ErrorKind::Corrupt, where(field), "alignment " + std::to_string(alignment) + " is past the end");
    uint64_t p = (pos_ + alignment - 1) / alignment * alignment;
    seek(p, field);
  }

  std::string where(const char* field) const {
    return source_ + " at byte " + std::to_string(pos_) + " (" + field + ")";
  }
  [[noreturn]] void corrupt(const char* field, const std::string& detail) const {
    fail(ErrorKind::Corrupt, where(field), detail);
  }

 private:
  void require(uint64_t n, const char* field) const {
    if (n > remaining())
      fail(ErrorKind::Corrupt, where(field),
           "truncated: needs " + std::to_string(n) + " bytes, " + std::to_string(remaining()) + " remain");
  }
  const uint8_t* base_;
  size_t size_;
  size_t pos_ = 0;
  std::string source_;
};

}  // namespace ptn
