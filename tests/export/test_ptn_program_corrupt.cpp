// Damaged .ptn programs: container damage (truncation, magic, version, checksums, tensor table)
// and manifest damage that a valid container can still carry (graph nodes naming missing or
// misshapen weights, golden samples with out-of-range ids, bad counts). Each one must give a
// ptn::Error that says what and where, at load or when an executor is built, never a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../runtime/program_test_util.h"
#include "core/crc32c.h"
#include "export/exporter.h"
#include "runtime/verify.h"

namespace fs = std::filesystem;

namespace ptn {
namespace {

using namespace ptn::testing;
using Bytes = std::vector<uint8_t>;
using json = nlohmann::json;

class CorruptProgram : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("ptn_test_corrupt_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    ExportOptions o;
    o.model = stories_dir() + "/hf";
    o.output = (dir_ / "good.ptn").string();
    o.max_seq_length = 16;
    o.samples = 1;
    std::ostringstream log;
    export_program(o, log);
    std::ifstream f(o.output, std::ios::binary);
    good_ = Bytes(std::istreambuf_iterator<char>(f), {});
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // Writes `b` to a file and loads it as a program (Full verification).
  static std::string put(const Bytes& b, const std::string& name = "bad.ptn") {
    const std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    return p;
  }
  static std::shared_ptr<const Program> load(const Bytes& b) { return Program::load(put(b), VerifyLevel::Full); }

  static uint64_t u64(const Bytes& b, size_t off) {
    uint64_t v;
    std::memcpy(&v, b.data() + off, 8);
    return v;
  }
  static void set_u32(Bytes& b, size_t off, uint32_t v) { std::memcpy(b.data() + off, &v, 4); }
  static void set_u64(Bytes& b, size_t off, uint64_t v) { std::memcpy(b.data() + off, &v, 8); }
  static void fix_header_crc(Bytes& b) { set_u32(b, 124, crc32c(b.data(), 124)); }

  // The stored manifest (container keys included), edited and written back with the header's
  // sizes and both CRCs fixed: the container stays valid, only the content changes.
  static Bytes with_manifest(const std::function<void(json&)>& edit) {
    Bytes b = good_;
    const uint64_t mo = u64(b, 24), ms = u64(b, 32);
    json m = json::parse(b.begin() + static_cast<long>(mo), b.begin() + static_cast<long>(mo + ms));
    edit(m);
    const std::string text = m.dump();
    b.resize(mo);
    b.insert(b.end(), text.begin(), text.end());
    set_u64(b, 16, b.size());
    set_u64(b, 32, text.size());
    set_u32(b, 40, crc32c(text.data(), text.size()));
    fix_header_crc(b);
    return b;
  }
  static json& node_with_weight(json& m, const std::string& w) {
    for (auto& n : m["graph"]["nodes"])
      if (n.contains("weights") && n["weights"][0] == w) return n;
    ADD_FAILURE() << "no node uses " << w;
    return m;
  }
  static json* tensor_entry(json& m, const std::string& name) {
    for (auto& t : m["tensors"])
      if (t["name"] == name) return &t;
    return nullptr;
  }

  static fs::path dir_;
  static Bytes good_;
};
fs::path CorruptProgram::dir_;
Bytes CorruptProgram::good_;

// Loads and builds an executor (what `ptn verify` / `ptn run` do first).
void load_and_build(const std::string& path) {
  auto p = Program::load(path, VerifyLevel::Full);
  Executor exec(p, ExecMode::Optimized, 16);
}

TEST_F(CorruptProgram, TheUnchangedFileLoadsAndVerifies) {
  auto p = load(good_);
  VerifyOptions vo;
  for (const auto& r : verify_samples(p, vo)) EXPECT_TRUE(r.pass);
  // Rewriting the manifest unchanged keeps it loadable (the helper itself is sound).
  EXPECT_NO_THROW(load(with_manifest([](json&) {})));
}

TEST_F(CorruptProgram, Truncated) {
  for (size_t keep : {size_t{0}, size_t{5}, size_t{100}, size_t{4096 + 100}, good_.size() / 2, good_.size() - 1}) {
    SCOPED_TRACE(keep);
    Bytes b(good_.begin(), good_.begin() + static_cast<long>(keep));
    expect_error([&] { load(b); }, ErrorKind::Corrupt, {"bad.ptn"});
  }
  Bytes b(good_.begin(), good_.end() - 10);
  expect_error([&] { load(b); }, ErrorKind::Corrupt, {"truncated"});
  Bytes longer = good_;
  longer.push_back(0);
  expect_error([&] { load(longer); }, ErrorKind::Corrupt, {"bad.ptn"});
}

TEST_F(CorruptProgram, BadMagicAndHeader) {
  Bytes b = good_;
  b[0] = 'X';
  expect_error([&] { load(b); }, ErrorKind::Corrupt, {"not a .ptn file"});
  b = good_;
  b[70] ^= 1;  // a reserved header byte, CRC not fixed
  expect_error([&] { load(b); }, ErrorKind::Corrupt, {"bad.ptn"});
  // A GGUF file is not a program.
  // A GGUF is named as one (and where it can be used), not called corrupt.
  expect_error([&] { Program::load(stories_dir() + "/stories260K.gguf"); }, ErrorKind::InvalidArgument,
               {"a GGUF file, not a .ptn program"});
  expect_error([&] { Program::load((dir_ / "does-not-exist.ptn").string()); }, ErrorKind::Io, {"does-not-exist.ptn"});
}

TEST_F(CorruptProgram, FutureVersions) {
  Bytes b = good_;
  set_u32(b, 8, 2);
  fix_header_crc(b);
  expect_error([&] { load(b); }, ErrorKind::Unsupported, {"format version 2", "newer"});
  // A newer manifest schema in a current container.
  expect_error([&] { load(with_manifest([](json& m) { m["schema_version"] = 99; })); }, ErrorKind::Unsupported,
               {"schema version 99", "upgrade"});
}

TEST_F(CorruptProgram, TensorTableDamage) {
  // Two tensors at the same offset.
  expect_error([&] {
    load(with_manifest([](json& m) { m["tensors"][1]["offset"] = m["tensors"][0]["offset"]; }));
  }, ErrorKind::Corrupt, {"overlap"});
  // nbytes that the dtype and shape do not imply.
  expect_error([&] {
    load(with_manifest([](json& m) { m["tensors"][0]["nbytes"] = m["tensors"][0]["nbytes"].get<uint64_t>() + 4; }));
  }, ErrorKind::Corrupt, {"blk.0.attn_k.weight"});
  // A tensor past the data segment, a negative dim, a huge dim, an unknown dtype.
  expect_error([&] { load(with_manifest([](json& m) { m["tensors"][0]["offset"] = uint64_t{1} << 40; })); },
               ErrorKind::Corrupt, {});
  expect_error([&] { load(with_manifest([](json& m) { m["tensors"][0]["shape"][0] = -3; })); }, ErrorKind::Corrupt, {});
  expect_error([&] { load(with_manifest([](json& m) { m["tensors"][0]["shape"] = {uint64_t{1} << 62, 1 << 20}; })); },
               ErrorKind::Corrupt, {});
  // An unknown dtype may come from a newer writer: Unsupported, naming it.
  expect_error([&] { load(with_manifest([](json& m) { m["tensors"][0]["dtype"] = "q9_9"; })); },
               ErrorKind::Unsupported, {"q9_9", "blk.0.attn_k.weight"});
  expect_error([&] { load(with_manifest([](json& m) { m["tensors"] = 7; })); }, ErrorKind::Corrupt, {"tensors"});
  // Damaged tensor bytes: the Full check names the tensor.
  Bytes b = good_;
  b[u64(b, 48) + 10] ^= 0x40;
  expect_error([&] { load(b); }, ErrorKind::Corrupt, {"blk.0.attn_k.weight"});
}

TEST_F(CorruptProgram, BadCountsInTheManifest) {
  expect_error([&] { load(with_manifest([](json& m) { m["max_seq_length"] = 0; })); }, ErrorKind::Corrupt,
               {"max_seq_length"});
  expect_error([&] { load(with_manifest([](json& m) { m["max_seq_length"] = "many"; })); }, ErrorKind::Corrupt,
               {"max_seq_length"});
  expect_error([&] { load(with_manifest([](json& m) { m["max_seq_length"] = 1e300; })); }, ErrorKind::Corrupt,
               {"max_seq_length"});
  expect_error([&] { load(with_manifest([](json& m) { m["max_seq_length"] = 4294967312.0; })); }, ErrorKind::Corrupt,
               {"max_seq_length"});
  expect_error([&] { load(with_manifest([](json& m) { m["model"]["rope_theta"] = 1e300; })); }, ErrorKind::Corrupt,
               {"rope_theta", "out of range"});
  expect_error([&] { load(with_manifest([](json& m) { m["cache"]["layers"].erase(0); })); }, ErrorKind::Corrupt,
               {"cache"});
  expect_error([&] { load(with_manifest([](json& m) { m["cache_mode"] = "sideways"; })); }, ErrorKind::Corrupt,
               {"cache_mode"});
  expect_error([&] { load(with_manifest([](json& m) { m.erase("graph"); })); }, ErrorKind::Corrupt, {"graph"});
  expect_error([&] { load(with_manifest([](json& m) { m["golden_samples"] = json::array(); for (int i = 0; i < 2000; ++i) m["golden_samples"].push_back(json::object()); })); },
               ErrorKind::Corrupt, {"golden_samples"});
}

TEST_F(CorruptProgram, GraphNodeNamesAMissingWeight) {
  const std::string path = put(with_manifest([](json& m) {
    node_with_weight(m, "blk.2.attn_q.weight")["weights"][0] = "blk.2.attn_nope.weight";
  }));
  expect_error([&] { load_and_build(path); }, ErrorKind::Corrupt, {"blk.2.attn_nope.weight", "missing"});
  // The weight is in the graph but its tensor was dropped from the table.
  const std::string path2 = put(with_manifest([](json& m) {
    auto& t = m["tensors"];
    for (size_t i = 0; i < t.size(); ++i)
      if (t[i]["name"] == "blk.1.ffn_up.weight") {
        t.erase(i);
        break;
      }
  }), "bad2.ptn");
  // Full verification sees the orphaned bytes as non-zero padding; a Cheap load gets as far as
  // the executor, which names the missing tensor.
  expect_error([&] { Program::load(path2, VerifyLevel::Full); }, ErrorKind::Corrupt, {"padding"});
  expect_error([&] {
    auto p = Program::load(path2, VerifyLevel::Cheap);
    Executor exec(p, ExecMode::Reference, 4);
  }, ErrorKind::Corrupt, {"blk.1.ffn_up.weight", "missing"});
}

TEST_F(CorruptProgram, GraphNodeNamesAWeightOfTheWrongShape) {
  // attn_k is [Hkv*D, hidden] = [32, 64]; attn_q [64, 64] is expected.
  const std::string path = put(with_manifest([](json& m) {
    node_with_weight(m, "blk.0.attn_q.weight")["weights"][0] = "blk.0.attn_k.weight";
  }));
  expect_error([&] { load_and_build(path); }, ErrorKind::Corrupt, {"graph node", "blk.0.attn_k.weight", "width"});
  // A norm pointing at a matrix.
  const std::string path2 = put(with_manifest([](json& m) {
    node_with_weight(m, "blk.0.attn_norm.weight")["weights"][0] = "blk.0.attn_q.weight";
  }), "bad2.ptn");
  expect_error([&] { load_and_build(path2); }, ErrorKind::Corrupt, {"norm weight"});
  // The embedding table of the wrong vocabulary.
  const std::string path3 = put(with_manifest([](json& m) { m["model"]["vocab_size"] = 600; }), "bad3.ptn");
  expect_error([&] { load_and_build(path3); }, ErrorKind::Corrupt, {});
}

TEST_F(CorruptProgram, GoldenSampleTokenOutOfRange) {
  expect_error([&] { load(with_manifest([](json& m) { m["golden_samples"][0]["prompt"][0] = 512; })); },
               ErrorKind::Corrupt, {"golden_samples.prompt", "out of range"});
  expect_error([&] { load(with_manifest([](json& m) { m["golden_samples"][0]["decode"][1] = -1; })); },
               ErrorKind::Corrupt, {"golden_samples.decode"});
  // Ids that do not fit 32 bits must not wrap around into range (2^32 + 1 -> 1).
  expect_error([&] { load(with_manifest([](json& m) { m["golden_samples"][0]["prompt"][0] = 4294967297ull; })); },
               ErrorKind::Corrupt, {"'prompt'", "out of range", "4294967297"});
  expect_error([&] { load(with_manifest([](json& m) { m["golden_samples"][0]["prompt"][0] = 1.5e300; })); },
               ErrorKind::Corrupt, {"'prompt'"});
  expect_error([&] { load(with_manifest([](json& m) { m["golden_samples"][0]["prompt"][0] = "7"; })); },
               ErrorKind::Corrupt, {"'prompt'", "wrong type"});
  // The logits tensor of the sample has the wrong shape (one decode token fewer).
  expect_error([&] { load(with_manifest([](json& m) { m["golden_samples"][0]["decode"].erase(0); })); },
               ErrorKind::Corrupt, {"golden_samples.logits", "wrong shape"});
}

}  // namespace
}  // namespace ptn
