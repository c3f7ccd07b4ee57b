// The identity of a program for KV records, and KV record files (kvcache/kv_record.h).
#pragma once
#include <cstdint>
#include <string>

#include "kvcache/kv_record.h"
#include "runtime/program.h"

namespace ptn {

// (manifest bytes << 32) | manifest CRC32C: the manifest lists every tensor's CRC, so this names
// the graph and the weights. Throws Unsupported for a program that was not loaded from a file.
uint64_t program_kv_id(const Program& program);

// The largest KV record file read_kv_file accepts.
inline constexpr uint64_t kMaxKvFileBytes = 4ull << 30;

// Writes a record to `path` (through path.tmp, renamed into place) and returns its size in
// bytes. Errors name the path.
uint64_t write_kv_file(const std::string& path, const kv::KvRecord& record);
// Reads and decodes a record file (decode_record's checks; Io/Corrupt naming the path).
kv::KvRecord read_kv_file(const std::string& path);

}  // namespace ptn
