// safetensors: one file (header JSON, tiling of the data), and a directory whose
// model.safetensors.index.json is the second part of the input (after a "\n--index--\n" line),
// pointing at the first part as its shard. Any input must either load or throw ptn::Error.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "formats/safetensors.h"
#include "fuzz_common.h"

namespace {

void touch(const ptn::SafetensorsSet& set) {
  for (const auto& name : set.names()) {
    try {
      (void)set.tensor(name);
    } catch (const ptn::Error&) {
    }
  }
}

}  // namespace

namespace ptn::fuzz {

// 1 if the input was accepted all the way, 0 if a stage rejected it with a documented error.
int run_safetensors(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    std::string d = ptn::fuzz::scratch_dir() + "/st";
    (void)::mkdir(d.c_str(), 0700);
    return d;
  }();
  auto [shard, index] = ptn::fuzz::split(data, size, "\n--index--\n");
  const std::string shard_path = dir + "/model-00001-of-00001.safetensors";
  ptn::fuzz::write_file(shard_path, reinterpret_cast<const uint8_t*>(shard.data()), shard.size());
  int ok = 1;
  try {
    touch(*ptn::SafetensorsSet::open_file(shard_path));
  } catch (const ptn::Error&) {
    ok = 0;
  }
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (index.empty()) {
    ::unlink(index_path.c_str());
    return ok;
  }
  ptn::fuzz::write_file(index_path, reinterpret_cast<const uint8_t*>(index.data()), index.size());
  try {
    touch(*ptn::SafetensorsSet::open_dir(dir));
  } catch (const ptn::Error&) {
    ok = 0;
  }
  return ok;
}

}  // namespace ptn::fuzz

PTN_FUZZ_ENTRY(run_safetensors)
