// SHA-256 (FIPS 180-4) for provenance: the hashes of the files a model was imported from.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ptn {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  std::string hex_digest();  // finishes the hash: 64 lowercase hex digits

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string sha256_hex(const void* data, size_t n);
// Hashes a file through a memory map; throws Io naming the path.
std::string sha256_file(const std::string& path);

}  // namespace ptn
