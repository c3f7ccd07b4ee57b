#include "runtime/kv_state.h"

#include "core/error.h"
#include "core/file.h"

namespace ptn {

uint64_t program_kv_id(const Program& program) {
  const PtnFile* f = program.file();
  if (!f)
    fail(ErrorKind::Unsupported, program.name(),
         "KV records need a program loaded from a .ptn file (its manifest checksum names it)");
  return (f->manifest_size() << 32) | f->manifest_crc32c();
}

uint64_t write_kv_file(const std::string& path, const kv::KvRecord& record) {
  const std::vector<uint8_t> bytes = kv::encode_record(record);
  FileWriter w(path);
  w.write(bytes.data(), bytes.size());
  w.commit();
  return bytes.size();
}

kv::KvRecord read_kv_file(const std::string& path) {
  auto m = MappedFile::open(path);
  if (m->size() > kMaxKvFileBytes)
    fail(ErrorKind::Corrupt, path, "larger than the limit of " + std::to_string(kMaxKvFileBytes) + " bytes");
  return kv::decode_record(m->data(), m->size(), path);
}

}  // namespace ptn
