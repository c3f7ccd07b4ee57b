// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of .ptn files.
// crc32c("123456789") == 0xE3069283. A portable slicing-by-8 version and an SSE4.2 version
// (the CPU's crc32 instruction) give identical results; crc32c() picks one at run time.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ptn {

// CRC of `n` bytes continuing from a previous result `crc` (0 to start):
// crc32c_extend(crc32c(a), b) == crc32c(a ++ b).
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n);
inline uint32_t crc32c(const void* data, size_t n) { return crc32c_extend(0, data, n); }

// The two implementations, for tests and benchmarks. crc32c_extend_sse42 may only be called
// when crc32c_sse42_available() is true.
uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t n);
uint32_t crc32c_extend_sse42(uint32_t crc, const void* data, size_t n);
bool crc32c_sse42_available();
// "sse4.2" or "portable": the implementation crc32c_extend uses on this CPU.
const char* crc32c_implementation();

}  // namespace ptn
