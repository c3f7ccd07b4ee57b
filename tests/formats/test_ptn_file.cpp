// Tests of the .ptn container: CRC32C, writer/reader round trips, and a catalogue of corrupt
// files (built here by patching a valid file at the byte offsets docs/ptn-format.md gives),
// each of which must be refused with a ptn::Error naming the field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/fp16.h"
#include "formats/ptn_file.h"

using nlohmann::json;
using namespace ptn;
namespace fs = std::filesystem;

namespace {

// Header offsets, written down independently of ptn_file.cpp from docs/ptn-format.md.
constexpr size_t kVersion = 8, kFlags = 12, kFileSize = 16, kManOff = 24, kManSize = 32, kManCrc = 40,
                 kDataOff = 48, kDataSize = 56, kReserved = 64, kHeaderCrc = 124;

// Bit-at-a-time CRC-32C straight from the definition, the oracle for both implementations.
uint32_t crc_reference(const uint8_t* p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return ~c;
}

template <class T>
T get(const std::vector<uint8_t>& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}
template <class T>
void set(std::vector<uint8_t>& b, size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof v);
}
void fix_header_crc(std::vector<uint8_t>& b) { set<uint32_t>(b, kHeaderCrc, crc_reference(b.data(), kHeaderCrc)); }

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::string manifest_text(const std::vector<uint8_t>& b) {
  uint64_t off = get<uint64_t>(b, kManOff), n = get<uint64_t>(b, kManSize);
  return std::string(reinterpret_cast<const char*>(b.data() + off), n);
}

// Replaces the manifest by `text` and fixes sizes and checksums so only the manifest is wrong.
std::vector<uint8_t> with_manifest_text(std::vector<uint8_t> b, const std::string& text) {
  uint64_t off = get<uint64_t>(b, kManOff);
  b.resize(off);
  b.insert(b.end(), text.begin(), text.end());
  set<uint64_t>(b, kManSize, text.size());
  set<uint32_t>(b, kManCrc, crc_reference(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  set<uint64_t>(b, kFileSize, b.size());
  fix_header_crc(b);
  return b;
}
std::vector<uint8_t> with_manifest(std::vector<uint8_t> b, const json& m) { return with_manifest_text(std::move(b), m.dump()); }
json raw_manifest(const std::vector<uint8_t>& b) { return json::parse(manifest_text(b)); }

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("ptn_file_test_" + std::to_string(getpid()));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(rng());
  return v;
}

// A small valid file with three tensors: "a" f32[2, 8], "b" q8_0[2, 32], "c" i32[4].
struct Sample {
  std::vector<uint8_t> a = pattern(64, 1), b = pattern(2 * 34, 2), c = pattern(16, 3);
  json meta = {{"model", {{"arch", "llama"}, {"layers", 2}}}, {"note", "unit test"}};
};

std::vector<uint8_t> sample_file(const TempDir& dir, const Sample& s = Sample()) {
  std::string path = dir.file("sample.ptn");
  PtnWriter w(path);
  w.add_tensor("a", DType::F32, {2, 8}, s.a.data(), s.a.size());
  w.add_tensor("b", DType::Q8_0, {2, 32}, s.b.data(), s.b.size());
  w.add_tensor("c", DType::I32, {4}, s.c.data(), s.c.size());
  w.finish(s.meta);
  return read_bytes(path);
}

// Loads bytes expecting a ptn::Error of `kind` whose message contains every one of `parts`.
void expect_error(const std::vector<uint8_t>& bytes, ErrorKind kind, std::initializer_list<const char*> parts,
                  VerifyLevel level = VerifyLevel::Cheap) {
  try {
    PtnFile::from_memory(bytes, "bad.ptn", level);
    ADD_FAILURE() << "loaded without error";
  } catch (const Error& e) {
    EXPECT_EQ(error_kind_name(e.kind()), std::string(error_kind_name(kind))) << e.what();
    std::string msg = e.what();
    EXPECT_NE(msg.find("bad.ptn"), std::string::npos) << msg;
    for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// CRC32C

TEST(Crc32c, KnownVectors) {
  // "123456789" is the standard check value; the 32-byte vectors are RFC 3720's (iSCSI) B.4.
  const char* check = "123456789";
  uint8_t zeros[32] = {}, ones[32], inc[32], dec[32];
  for (int i = 0; i < 32; ++i) ones[i] = 0xff, inc[i] = static_cast<uint8_t>(i), dec[i] = static_cast<uint8_t>(31 - i);
  struct Case { const void* p; size_t n; uint32_t want; };
  const Case cases[] = {{check, 9, 0xE3069283u}, {zeros, 32, 0x8A9136AAu}, {ones, 32, 0x62A8AB43u},
                        {inc, 32, 0x46DD794Eu},  {dec, 32, 0x113FDB5Cu},   {check, 0, 0u}};
  for (const Case& c : cases) {
    EXPECT_EQ(crc32c_extend_portable(0, c.p, c.n), c.want);
    EXPECT_EQ(crc32c(c.p, c.n), c.want);
    if (crc32c_sse42_available()) {
      EXPECT_EQ(crc32c_extend_sse42(0, c.p, c.n), c.want);
    }
  }
}

TEST(Crc32c, ImplementationsAgreeWithDefinitionOnAllLengthsAndAlignments) {
  auto data = pattern(40000, 42);  // long enough for several 3-lane (12 KiB) steps
  std::mt19937 rng(7);
  std::vector<size_t> lengths = {0, 1, 7, 8, 9, 15, 16, 63, 64, 65, 4095, 4096, 12287, 12288, 12289, 24576, 36963};
  for (int i = 0; i < 40; ++i) lengths.push_back(rng() % (data.size() - 8));
  for (size_t n : lengths)
    for (size_t misalign : {0, 1, 3, 7}) {
      const uint8_t* p = data.data() + misalign;
      const uint32_t want = crc_reference(p, n);
      EXPECT_EQ(crc32c_extend_portable(0, p, n), want) << n << " " << misalign;
      if (crc32c_sse42_available()) {
        EXPECT_EQ(crc32c_extend_sse42(0, p, n), want) << n << " " << misalign;
      }
      EXPECT_EQ(crc32c(p, n), want);
    }
}

TEST(Crc32c, ExtendEqualsCrcOfConcatenation) {
  auto data = pattern(40000, 9);
  const uint32_t whole = crc_reference(data.data(), data.size());
  for (size_t cut : {0, 1, 8, 1000, 12288, 20001, 40000}) {
    uint32_t c = crc32c(data.data(), cut);
    EXPECT_EQ(crc32c_extend(c, data.data() + cut, data.size() - cut), whole) << cut;
    uint32_t p = crc32c_extend_portable(0, data.data(), cut);
    EXPECT_EQ(crc32c_extend_portable(p, data.data() + cut, data.size() - cut), whole) << cut;
  }
}

// ---------------------------------------------------------------------------------------------
// Round trips

TEST(PtnFile, RoundTripSeveralDtypesShapesAndManifest) {
  TempDir dir;
  const std::string path = dir.file("rt.ptn");
  struct T { std::string name; DType dt; std::vector<int64_t> shape; size_t nbytes; };
  const std::vector<T> specs = {
      {"f32", DType::F32, {3, 5}, 60},           {"f16", DType::F16, {7}, 14},
      {"bf16.scalar", DType::BF16, {}, 2},       {"i32.4d", DType::I32, {2, 1, 3, 2}, 48},
      {"q8_0", DType::Q8_0, {3, 64}, 3 * 2 * 34}, {"q4_0", DType::Q4_0, {2, 32}, 2 * 18},
      {"q4_k", DType::Q4_K, {2, 256}, 2 * 144},  {"q6_k", DType::Q6_K, {1, 512}, 2 * 210},
      {"empty", DType::F32, {0, 4}, 0},          {"blk.0.attn_q.weight ünïcode", DType::F64, {2}, 16},
  };
  std::vector<std::vector<uint8_t>> data;
  json meta = {{"graph", {{"nodes", json::array({1, 2, 3})}}},
               {"hparams", {{"eps", 1e-5}, {"n", 12}}},
               {"s", "text \u00e9"},
               {"list", {true, false, nullptr}}};
  {
    PtnWriter w(path);
    for (size_t i = 0; i < specs.size(); ++i) {
      data.push_back(pattern(specs[i].nbytes, 100 + i));
      w.add_tensor(specs[i].name, specs[i].dt, specs[i].shape, data.back().data(), data.back().size());
    }
    // The Tensor overload: an owned f32 tensor.
    Tensor t = Tensor::zeros(DType::F32, {2, 3});
    for (int i = 0; i < 6; ++i) t.data_as<float>()[i] = 0.5f * i;
    w.add_tensor("owned", t);
    w.finish(meta);
  }
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  ASSERT_TRUE(fs::exists(path));

  for (VerifyLevel level : {VerifyLevel::Cheap, VerifyLevel::Full}) {
    auto f = PtnFile::open(path, level);
    EXPECT_EQ(f->format_version(), 1u);
    EXPECT_EQ(f->file_size(), fs::file_size(path));
    EXPECT_EQ(f->alignment(), 64u);
    EXPECT_EQ(f->manifest(), meta);  // the caller's keys exactly, container keys removed
    EXPECT_TRUE(f->raw_manifest().contains("tensors"));
    std::vector<std::string> names;
    for (auto& s : specs) names.push_back(s.name);
    names.push_back("owned");
    EXPECT_EQ(f->tensor_names(), names);
    for (size_t i = 0; i < specs.size(); ++i) {
      ASSERT_TRUE(f->has_tensor(specs[i].name));
      Tensor t = f->tensor(specs[i].name);
      EXPECT_EQ(t.dtype(), specs[i].dt) << specs[i].name;
      EXPECT_EQ(t.shape(), specs[i].shape) << specs[i].name;
      ASSERT_EQ(t.nbytes(), specs[i].nbytes) << specs[i].name;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u) << specs[i].name;
      if (specs[i].nbytes) {
        EXPECT_EQ(std::memcmp(t.data(), data[i].data(), specs[i].nbytes), 0) << specs[i].name;
      }
      EXPECT_EQ(f->tensor_info(specs[i].name).crc32c, crc_reference(data[i].data(), data[i].size()));
    }
    Tensor owned = f->tensor("owned");
    EXPECT_EQ(owned.data_as<float>()[5], 2.5f);
    EXPECT_FALSE(f->has_tensor("missing"));
    EXPECT_THROW(f->tensor("missing"), Error);
  }

  // Layout facts from docs/ptn-format.md, read straight from the bytes.
  auto b = read_bytes(path);
  EXPECT_EQ(std::memcmp(b.data(), "PTN\0PROG", 8), 0);
  EXPECT_EQ(get<uint32_t>(b, kVersion), 1u);
  EXPECT_EQ(get<uint64_t>(b, kFileSize), b.size());
  EXPECT_EQ(get<uint64_t>(b, kDataOff), 4096u);
  EXPECT_EQ(get<uint64_t>(b, kManOff), get<uint64_t>(b, kDataOff) + get<uint64_t>(b, kDataSize));
  EXPECT_EQ(get<uint64_t>(b, kManOff) + get<uint64_t>(b, kManSize), b.size());
  EXPECT_EQ(get<uint32_t>(b, kHeaderCrc), crc_reference(b.data(), kHeaderCrc));
  for (size_t i = kReserved; i < kHeaderCrc; ++i) EXPECT_EQ(b[i], 0) << i;
  EXPECT_EQ(raw_manifest(b)["tensors"][0]["offset"], 0);
  EXPECT_EQ(raw_manifest(b)["tensors"][1]["offset"], 64);  // 60 bytes of f32, padded to 64
  EXPECT_EQ(raw_manifest(b)["tensors"][4]["dtype"], "q8_0");
}

TEST(PtnFile, TensorViewsKeepTheMappingAlive) {
  TempDir dir;
  Sample s;
  sample_file(dir, s);
  Tensor a;
  {
    auto f = PtnFile::open(dir.file("sample.ptn"));
    a = f->tensor("a");
  }
  EXPECT_EQ(std::memcmp(a.data(), s.a.data(), s.a.size()), 0);
}

TEST(PtnFile, FromMemoryMatchesOpen) {
  TempDir dir;
  auto bytes = sample_file(dir);
  auto f = PtnFile::from_memory(bytes, "mem.ptn", VerifyLevel::Full);
  auto g = PtnFile::open(dir.file("sample.ptn"), VerifyLevel::Full);
  EXPECT_EQ(f->raw_manifest(), g->raw_manifest());
  EXPECT_EQ(f->file_size(), g->file_size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f->tensor("b").data()) % 64, 0u);
  EXPECT_EQ(std::memcmp(f->tensor("b").data(), g->tensor("b").data(), 68), 0);
}

TEST(PtnFile, OtherAlignments) {
  TempDir dir;
  for (uint64_t align : {32, 4096, 1 << 20}) {
    std::string path = dir.file("al.ptn");
    auto x = pattern(40, 1), y = pattern(8, 2);
    {
      PtnWriter w(path, align);
      w.add_tensor("x", DType::F32, {10}, x.data(), x.size());
      w.add_tensor("y", DType::I8, {8}, y.data(), y.size());
      w.finish(json::object());
    }
    auto f = PtnFile::open(path, VerifyLevel::Full);
    EXPECT_EQ(f->alignment(), align);
    EXPECT_EQ(f->data_offset() % std::max<uint64_t>(align, 4096), 0u);
    EXPECT_EQ(f->tensor_info("y").offset, (40 + align - 1) / align * align);  // x is 40 bytes
    EXPECT_EQ(reinterpret_cast<uintptr_t>(f->tensor("y").data()) % std::min<uint64_t>(align, 4096), 0u);
    EXPECT_EQ(std::memcmp(f->tensor("y").data(), y.data(), 8), 0);
    EXPECT_EQ(f->manifest(), json::object());
  }
  for (uint64_t bad : {0, 16, 48, 100, 2 << 20})
    EXPECT_THROW(PtnWriter(dir.file("bad.ptn"), bad), Error) << bad;
}

TEST(PtnFile, NoTensors) {
  TempDir dir;
  {
    PtnWriter w(dir.file("e.ptn"));
    w.finish({{"k", 1}});
  }
  auto f = PtnFile::open(dir.file("e.ptn"), VerifyLevel::Full);
  EXPECT_TRUE(f->tensor_names().empty());
  EXPECT_EQ(f->manifest()["k"], 1);
}

// ---------------------------------------------------------------------------------------------
// Writer behaviour

TEST(PtnWriter, PartialFileRemovedWithoutFinish) {
  TempDir dir;
  const std::string path = dir.file("partial.ptn");
  {
    PtnWriter w(path);
    float x[4] = {};
    w.add_tensor("x", DType::F32, {4}, x, sizeof x);
    EXPECT_TRUE(fs::exists(path + ".tmp"));
  }
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_FALSE(fs::exists(path));
}

TEST(PtnWriter, RejectsBadArgumentsAndStaysUsable) {
  TempDir dir;
  const std::string path = dir.file("w.ptn");
  PtnWriter w(path);
  float x[64] = {};
  w.add_tensor("x", DType::F32, {4}, x, 16);
  auto expect_invalid = [](auto fn, const char* part) {
    try {
      fn();
      ADD_FAILURE() << "no error, expected " << part;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_invalid([&] { w.add_tensor("x", DType::F32, {4}, x, 16); }, "already");
  expect_invalid([&] { w.add_tensor("", DType::F32, {4}, x, 16); }, "empty");
  expect_invalid([&] { w.add_tensor(std::string(2000, 'n'), DType::F32, {4}, x, 16); }, "limit");
  expect_invalid([&] { w.add_tensor("bad\xff", DType::F32, {4}, x, 16); }, "UTF-8");
  expect_invalid([&] { w.add_tensor("tab\tname", DType::F32, {4}, x, 16); }, "control");
  expect_invalid([&] { w.add_tensor("y", DType::F32, {4}, x, 12); }, "needs 16 bytes");
  expect_invalid([&] { w.add_tensor("y", DType::Q8_0, {2, 31}, x, 68); }, "block size");
  expect_invalid([&] { w.add_tensor("y", DType::F32, {1, 1, 1, 1, 1}, x, 4); }, "dimensions");
  expect_invalid([&] { w.add_tensor("y", DType::F32, {-1}, x, 4); }, "negative");
  expect_invalid([&] { w.add_tensor("y", static_cast<DType>(5), {1}, x, 4); }, "unknown dtype");
  expect_invalid([&] { w.finish(json::array()); }, "JSON object");
  expect_invalid([&] { w.finish({{"tensors", 1}}); }, "reserved");
  expect_invalid([&] { w.finish({{"alignment", 1}}); }, "reserved");
  expect_invalid([&] { w.finish({{"s", "\xff"}}); }, "serialised");
  json deep = 1;
  for (int i = 0; i < 200; ++i) deep = json::array({deep});
  expect_invalid([&] { w.finish({{"deep", deep}}); }, "nests deeper");
  // None of that damaged the file: a further tensor and finish still work.
  w.add_tensor("y", DType::F32, {2}, x, 8);
  w.finish({{"ok", true}});
  expect_invalid([&] { w.add_tensor("z", DType::F32, {2}, x, 8); }, "after finish");
  auto f = PtnFile::open(path, VerifyLevel::Full);
  EXPECT_EQ(f->tensor_names(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(f->manifest(), json({{"ok", true}}));
}

TEST(PtnWriter, ManifestAtTheWritersDepthLimitLoads) {
  TempDir dir;
  json deep = 1;
  for (int i = 0; i < PtnLimits::kMaxJsonDepth - 2; ++i) deep = json::array({deep});
  {
    PtnWriter w(dir.file("deep.ptn"));
    w.finish({{"deep", deep}});  // top-level object + 126 arrays: depth 127
  }
  EXPECT_EQ(PtnFile::open(dir.file("deep.ptn"))->manifest()["deep"], deep);
  deep = json::array({deep});
  PtnWriter w(dir.file("deeper.ptn"));
  EXPECT_THROW(w.finish({{"deep", deep}}), Error);
}

TEST(PtnWriter, UnwritableDirectoryIsAnIoError) {
  try {
    PtnWriter w("/nonexistent-dir-for-ptn-test/x.ptn");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find("x.ptn.tmp"), std::string::npos);
  }
}

TEST(PtnWriter, FailedRenameIsAnIoErrorAndLeavesNoTempFile) {
  TempDir dir;
  const std::string path = dir.file("occupied.ptn");
  fs::create_directories(path + "/inside");  // rename(file, non-empty dir) fails
  PtnWriter w(path);
  float x[4] = {};
  w.add_tensor("x", DType::F32, {4}, x, sizeof x);
  try {
    w.finish(json::object());
    ADD_FAILURE() << "finish succeeded onto a directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io) << e.what();
    EXPECT_NE(std::string(e.what()).find("rename"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_THROW(w.finish(json::object()), Error);  // the writer stays failed
}

TEST(PtnFile, MissingFileIsAnIoError) {
  try {
    PtnFile::open("/nonexistent-dir-for-ptn-test/m.ptn");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(std::string(e.what()).find("m.ptn"), std::string::npos);
  }
}

// ---------------------------------------------------------------------------------------------
// Checksums

TEST(PtnFile, FullLevelCatchesAFlippedTensorByteCheapLevelDoesNotReadTensors) {
  TempDir dir;
  Sample s;
  auto bytes = sample_file(dir, s);
  const json t = raw_manifest(bytes)["tensors"][1];  // "b"
  const size_t at = get<uint64_t>(bytes, kDataOff) + t["offset"].get<uint64_t>() + 5;
  bytes[at] ^= 0x10;

  // Cheap: loads, and the view shows the damaged byte (the bytes were not checked).
  auto f = PtnFile::from_memory(bytes, "bad.ptn", VerifyLevel::Cheap);
  EXPECT_EQ(static_cast<const uint8_t*>(f->tensor("b").data())[5], s.b[5] ^ 0x10);
  try {
    f->verify_checksums();
    ADD_FAILURE() << "verify_checksums passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'b'"), std::string::npos) << e.what();
  }
  expect_error(bytes, ErrorKind::Corrupt, {"tensor 'b'", "checksum"}, VerifyLevel::Full);
}

TEST(PtnFile, ManifestChecksumMismatch) {
  TempDir dir;
  auto bytes = sample_file(dir);
  bytes[get<uint64_t>(bytes, kManOff) + 3] ^= 1;
  expect_error(bytes, ErrorKind::Corrupt, {"manifest_crc32c"});
}

// ---------------------------------------------------------------------------------------------
// Corrupt headers

TEST(PtnFileCorrupt, TruncatedAtEveryOffset) {
  TempDir dir;
  auto bytes = sample_file(dir);
  for (size_t n = 1; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    try {
      PtnFile::from_memory(cut, "cut.ptn");
      ADD_FAILURE() << "loaded a file truncated to " << n << " bytes";
    } catch (const Error& e) {
      ASSERT_NE(std::string(e.what()).find("truncated"), std::string::npos) << n << ": " << e.what();
    }
  }
  expect_error({}, ErrorKind::Corrupt, {"not a .ptn file"});
}

TEST(PtnFileCorrupt, BadMagic) {
  TempDir dir;
  auto bytes = sample_file(dir);
  bytes[3] = 'X';
  expect_error(bytes, ErrorKind::Corrupt, {"not a .ptn file"});
  expect_error({'G', 'G', 'U', 'F'}, ErrorKind::InvalidArgument, {"a GGUF file, not a .ptn program"});
}

TEST(PtnFileCorrupt, FutureVersionIsRefusedNamingBothVersions) {
  TempDir dir;
  auto bytes = sample_file(dir);
  set<uint32_t>(bytes, kVersion, 2);
  expect_error(bytes, ErrorKind::Corrupt, {"header_crc32c"});  // a damaged version is not a new one
  fix_header_crc(bytes);
  expect_error(bytes, ErrorKind::Unsupported, {"format_version", "version 2", "version 1", "upgrade"});
  set<uint32_t>(bytes, kVersion, 0);
  fix_header_crc(bytes);
  expect_error(bytes, ErrorKind::Corrupt, {"format_version"});
}

TEST(PtnFileCorrupt, HeaderChecksumMismatch) {
  TempDir dir;
  auto bytes = sample_file(dir);
  bytes[kDataSize] ^= 0x01;
  expect_error(bytes, ErrorKind::Corrupt, {"header_crc32c", "mismatch"});
  bytes[kDataSize] ^= 0x01;
  bytes[kHeaderCrc] ^= 0x80;
  expect_error(bytes, ErrorKind::Corrupt, {"header_crc32c"});
}

TEST(PtnFileCorrupt, FlagsAndReservedBytes) {
  TempDir dir;
  auto good = sample_file(dir);
  auto b = good;
  set<uint32_t>(b, kFlags, 1u << 20);  // an unknown required feature
  fix_header_crc(b);
  expect_error(b, ErrorKind::Unsupported, {"flags", "upgrade"});
  b = good;
  b[kReserved + 7] = 1;  // non-zero reserved bytes without a flag
  fix_header_crc(b);
  expect_error(b, ErrorKind::Corrupt, {"reserved"});
  // An unknown compatible flag may come with data in the reserved bytes; the file still loads.
  set<uint32_t>(b, kFlags, 1u << 3);
  fix_header_crc(b);
  auto f = PtnFile::from_memory(b, "compat.ptn", VerifyLevel::Full);
  EXPECT_EQ(f->flags(), 1u << 3);
}

TEST(PtnFileCorrupt, HeaderSizesAndOffsets) {
  TempDir dir;
  const auto good = sample_file(dir);
  const uint64_t size = good.size(), man_off = get<uint64_t>(good, kManOff);
  auto patched = [&](size_t off, uint64_t v) {
    auto b = good;
    set<uint64_t>(b, off, v);
    fix_header_crc(b);
    return b;
  };
  auto trailing = good;
  trailing.push_back(0);
  set<uint64_t>(trailing, kFileSize, size);  // unchanged: the file is one byte longer
  expect_error(trailing, ErrorKind::Corrupt, {"file_size", "trailing"});
  expect_error(patched(kFileSize, size + 10), ErrorKind::Corrupt, {"file_size", "truncated"});
  expect_error(patched(kDataOff, 100), ErrorKind::Corrupt, {"data_offset"});
  expect_error(patched(kDataOff, 0), ErrorKind::Corrupt, {"data_offset"});
  expect_error(patched(kDataOff, 1ull << 40), ErrorKind::Corrupt, {"data_size", "past the end"});
  expect_error(patched(kDataSize, ~0ull), ErrorKind::Corrupt, {"data_size", "overflow"});
  expect_error(patched(kDataSize, size), ErrorKind::Corrupt, {"data_size", "past the end"});
  expect_error(patched(kManSize, 0), ErrorKind::Corrupt, {"manifest_size", "empty"});
  expect_error(patched(kManSize, 1ull << 40), ErrorKind::Corrupt, {"manifest_size", "limit"});
  expect_error(patched(kManSize, size), ErrorKind::Corrupt, {"manifest_size", "past the end"});
  expect_error(patched(kManOff, ~0ull - 4), ErrorKind::Corrupt, {"manifest_size", "overflow"});
  // A manifest that stops short of the end of the file (bytes after it unaccounted for).
  auto short_manifest = with_manifest_text(good, manifest_text(good) + " ");
  set<uint64_t>(short_manifest, kManSize, get<uint64_t>(short_manifest, kManSize) - 1);
  fix_header_crc(short_manifest);
  expect_error(short_manifest, ErrorKind::Corrupt, {"manifest_size", "ends the file"});
  expect_error(patched(kManOff, 64), ErrorKind::Corrupt, {"manifest_offset", "overlaps"});
  expect_error(patched(kManOff, man_off - 1), ErrorKind::Corrupt, {"manifest_offset", "overlaps"});
}

// ---------------------------------------------------------------------------------------------
// Corrupt manifests

TEST(PtnFileCorrupt, MalformedJsonNamesTheByteOffset) {
  TempDir dir;
  const auto good = sample_file(dir);
  expect_error(with_manifest_text(good, "{\"alignment\": 64, \"tensors\": ["), ErrorKind::Corrupt,
               {"manifest at byte", "file offset", "malformed JSON"});
  expect_error(with_manifest_text(good, "{\"a\": tru}"), ErrorKind::Corrupt, {"manifest at byte 9", "file offset", "malformed JSON"});
  expect_error(with_manifest_text(good, std::string("{\"a\": \"\xff\"}")), ErrorKind::Corrupt, {"malformed JSON"});
  expect_error(with_manifest_text(good, std::string("{}\0", 3)), ErrorKind::Corrupt, {"at byte 2", "NUL"});
  expect_error(with_manifest_text(good, "[1, 2]"), ErrorKind::Corrupt, {"manifest", "JSON object"});
  std::string deep = "{\"x\": " + std::string(5000, '[') + std::string(5000, ']') + "}";
  expect_error(with_manifest_text(good, deep), ErrorKind::Corrupt, {"nests deeper"});
}

TEST(PtnFileCorrupt, TensorTableErrorsNameTheTensorAndField) {
  TempDir dir;
  const auto good = sample_file(dir);
  const json m = raw_manifest(good);
  const uint64_t data_size = get<uint64_t>(good, kDataSize);
  auto edit = [&](auto fn) {
    json x = m;
    fn(x);
    return with_manifest(good, x);
  };
  auto& T = kPtnTensorsKey;
  // Sanity: an unmodified re-serialisation loads.
  EXPECT_NO_THROW(PtnFile::from_memory(edit([](json&) {}), "same.ptn", VerifyLevel::Full));

  expect_error(edit([&](json& x) { x.erase(T); }), ErrorKind::Corrupt, {"field 'tensors'", "missing"});
  expect_error(edit([&](json& x) { x[T] = {{"a", 1}}; }), ErrorKind::Corrupt, {"field 'tensors'", "array"});
  expect_error(edit([&](json& x) { x.erase("alignment"); }), ErrorKind::Corrupt, {"field 'alignment'", "missing"});
  expect_error(edit([&](json& x) { x["alignment"] = 48; }), ErrorKind::Corrupt, {"field 'alignment'", "power of two"});
  expect_error(edit([&](json& x) { x["alignment"] = 16; }), ErrorKind::Corrupt, {"field 'alignment'"});
  expect_error(edit([&](json& x) { x["alignment"] = -64; }), ErrorKind::Corrupt, {"field 'alignment'"});
  expect_error(edit([&](json& x) { x["alignment"] = 8192; }), ErrorKind::Corrupt, {"data_offset", "alignment"});
  expect_error(edit([&](json& x) { x[T][2] = 5; }), ErrorKind::Corrupt, {"tensors[2]", "object"});

  // Overlap: "b" moved onto "a".
  expect_error(edit([&](json& x) { x[T][1]["offset"] = 0; }), ErrorKind::Corrupt,
               {"tensors[1] ('b')", "'offset'", "overlap", "('a')"});
  // An empty tensor strictly inside another one counts as overlapping; at its edge it does not.
  expect_error(edit([&](json& x) {
                 x[T][2]["shape"] = {0};
                 x[T][2]["nbytes"] = 0;
                 x[T][2]["offset"] = 32;  // inside "a" (f32[2, 8] = 64 bytes at 0)
                 x["alignment"] = 32;
               }),
               ErrorKind::Corrupt, {"overlap"});
  EXPECT_NO_THROW(PtnFile::from_memory(edit([&](json& x) {
                                         x[T][2]["shape"] = {0};
                                         x[T][2]["nbytes"] = 0;
                                         x[T][2]["crc32c"] = 0;
                                         x[T][2]["offset"] = 64;
                                       }),
                                       "edge.ptn", VerifyLevel::Cheap));
  // Out of the data segment, misaligned, overflowing.
  expect_error(edit([&](json& x) { x[T][2]["offset"] = (data_size + 63) / 64 * 64; }), ErrorKind::Corrupt,
               {"tensors[2] ('c')", "'offset'", "outside the data segment"});
  expect_error(edit([&](json& x) { x[T][2]["offset"] = x[T][2]["offset"].get<uint64_t>() + 4; }), ErrorKind::Corrupt,
               {"('c')", "'offset'", "alignment"});
  expect_error(edit([&](json& x) {
                 x[T][2]["shape"] = {1ll << 61};  // i32: 2^63 bytes, at offset 2^63
                 x[T][2]["nbytes"] = 1ull << 63;
                 x[T][2]["offset"] = 1ull << 63;
               }),
               ErrorKind::Corrupt, {"('c')", "'offset'", "overflow"});
  expect_error(edit([&](json& x) { x[T][2]["offset"] = ~0ull - 63; }), ErrorKind::Corrupt,
               {"('c')", "'offset'", "outside the data segment"});
  expect_error(edit([&](json& x) { x[T][2]["offset"] = -64; }), ErrorKind::Corrupt, {"('c')", "'offset'", "negative"});
  expect_error(edit([&](json& x) { x[T][2]["offset"] = 64.0; }), ErrorKind::Corrupt, {"('c')", "'offset'", "integer"});
  expect_error(edit([&](json& x) { x[T][2].erase("offset"); }), ErrorKind::Corrupt, {"('c')", "'offset'", "missing"});

  // Names.
  expect_error(edit([&](json& x) { x[T][2]["name"] = "a"; }), ErrorKind::Corrupt, {"tensors[2] ('a')", "duplicate"});
  expect_error(edit([&](json& x) { x[T][2]["name"] = ""; }), ErrorKind::Corrupt, {"tensors[2]", "'name'", "empty"});
  expect_error(edit([&](json& x) { x[T][2]["name"] = std::string(5000, 'x'); }), ErrorKind::Corrupt,
               {"tensors[2]", "'name'", "limit"});
  expect_error(edit([&](json& x) { x[T][2]["name"] = std::string("a\0b", 3); }), ErrorKind::Corrupt,
               {"tensors[2]", "'name'", "control"});
  expect_error(edit([&](json& x) { x[T][2]["name"] = 7; }), ErrorKind::Corrupt, {"tensors[2]", "'name'", "string"});

  // Dtype, shape and size.
  expect_error(edit([&](json& x) { x[T][2]["dtype"] = "q8_1"; }), ErrorKind::Unsupported,
               {"('c')", "'dtype'", "unknown dtype \"q8_1\""});
  expect_error(edit([&](json& x) { x[T][2]["dtype"] = 26; }), ErrorKind::Corrupt, {"('c')", "'dtype'"});
  expect_error(edit([&](json& x) { x[T][2]["shape"] = {2}; }), ErrorKind::Corrupt,
               {"('c')", "'nbytes'", "i32[2] needs 8"});
  expect_error(edit([&](json& x) { x[T][2]["nbytes"] = 20; }), ErrorKind::Corrupt, {"('c')", "'nbytes'"});
  expect_error(edit([&](json& x) { x[T][2]["shape"] = {1, 1, 1, 1, 4}; }), ErrorKind::Corrupt,
               {"('c')", "'shape'", "5 dimensions"});
  expect_error(edit([&](json& x) { x[T][2]["shape"] = {-4}; }), ErrorKind::Corrupt, {"('c')", "'shape'", "negative"});
  expect_error(edit([&](json& x) { x[T][2]["shape"] = {4.0}; }), ErrorKind::Corrupt, {"('c')", "'shape'", "integers"});
  expect_error(edit([&](json& x) { x[T][2]["shape"] = {~0ull}; }), ErrorKind::Corrupt, {"('c')", "'shape'", "too large"});
  expect_error(edit([&](json& x) { x[T][2]["shape"] = {1ll << 40, 1ll << 40}; }), ErrorKind::Corrupt,
               {"('c')", "'shape'", "overflow"});
  // Rows that overflow int64 although the byte count (0) does not.
  expect_error(edit([&](json& x) {
                 x[T][2]["shape"] = {3, 1ll << 62, 0};
                 x[T][2]["nbytes"] = 0;
               }),
               ErrorKind::Corrupt, {"('c')", "'shape'", "overflow"});
  expect_error(edit([&](json& x) { x[T][2]["shape"] = "4"; }), ErrorKind::Corrupt, {"('c')", "'shape'", "array"});
  expect_error(edit([&](json& x) { x[T][1]["shape"] = {2, 33}; }), ErrorKind::Corrupt,
               {"('b')", "'shape'", "block size"});
  expect_error(edit([&](json& x) { x[T][2]["crc32c"] = 1ull << 32; }), ErrorKind::Corrupt, {"('c')", "'crc32c'"});
  // A wrong CRC in the table is a structural success but a Full-level failure.
  auto wrong_crc = edit([&](json& x) { x[T][2]["crc32c"] = x[T][2]["crc32c"].get<uint32_t>() ^ 1; });
  EXPECT_NO_THROW(PtnFile::from_memory(wrong_crc, "bad.ptn", VerifyLevel::Cheap));
  expect_error(wrong_crc, ErrorKind::Corrupt, {"tensor 'c'", "checksum"}, VerifyLevel::Full);
}

TEST(PtnFileCorrupt, HugeTensorCount) {
  TempDir dir;
  const auto good = sample_file(dir);
  std::string text = "{\"alignment\":64,\"tensors\":[";
  for (uint64_t i = 0; i <= PtnLimits::kMaxTensors; ++i) text += i ? ",0" : "0";
  text += "]}";
  expect_error(with_manifest_text(good, text), ErrorKind::Corrupt, {"field 'tensors'", "limit"});
}

TEST(PtnFileCorrupt, UnknownKeysAreIgnoredForForwardCompatibility) {
  TempDir dir;
  const auto good = sample_file(dir);
  json m = raw_manifest(good);
  m["tensors"][0]["layout"] = "future";  // an optional key a newer writer might add
  auto f = PtnFile::from_memory(with_manifest(good, m), "ok.ptn", VerifyLevel::Full);
  EXPECT_EQ(f->tensor("a").shape(), (std::vector<int64_t>{2, 8}));
}

// One damaged byte anywhere: the Full level refuses every one of them (every byte is covered
// by a CRC or must be zero padding); the Cheap level refuses all but those in tensor bytes and
// padding, which it does not read.
TEST(PtnFileCorrupt, EverySingleByteFlipIsCaughtAtFullLevel) {
  TempDir dir;
  const auto good = sample_file(dir);
  const uint64_t data_off = get<uint64_t>(good, kDataOff), man_off = get<uint64_t>(good, kManOff);
  for (size_t pos = 0; pos < good.size(); ++pos) {
    auto b = good;
    b[pos] ^= 0x20;
    const bool unread_by_cheap = pos >= 128 && pos < man_off;  // padding and tensor bytes
    try {
      PtnFile::from_memory(b, "flip.ptn", VerifyLevel::Full);
      ADD_FAILURE() << "Full level loaded a file with byte " << pos << " flipped";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Corrupt) << e.what();
    }
    if (unread_by_cheap) {
      EXPECT_NO_THROW(PtnFile::from_memory(b, "flip.ptn", VerifyLevel::Cheap)) << pos;
    } else {
      EXPECT_THROW(PtnFile::from_memory(b, "flip.ptn", VerifyLevel::Cheap), Error) << pos;
    }
  }
  (void)data_off;
}

// Random damage with checksums fixed up, so the checks behind them see it: each load either
// succeeds or throws ptn::Error, never anything else (and ASan/UBSan builds see no fault).
TEST(PtnFileCorrupt, RandomMutationsNeverEscapeAsOtherErrors) {
  TempDir dir;
  const auto good = sample_file(dir);
  std::mt19937 rng(1234);
  int loaded = 0, refused = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    auto b = good;
    const int flips = 1 + rng() % 4;
    for (int k = 0; k < flips; ++k) b[rng() % 128] ^= static_cast<uint8_t>(1 + rng() % 255);  // header
    fix_header_crc(b);
    try {
      auto f = PtnFile::from_memory(b, "fuzz.ptn", iter % 2 ? VerifyLevel::Full : VerifyLevel::Cheap);
      for (const auto& n : f->tensor_names()) (void)f->tensor(n);
      ++loaded;
    } catch (const Error&) {
      ++refused;
    }
  }
  std::printf("[ mutate  ] header: %d loaded, %d refused\n", loaded, refused);
  EXPECT_GT(refused, 2500);
  const std::string text = manifest_text(good);
  loaded = refused = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string t = text;
    const int edits = 1 + rng() % 3;
    for (int k = 0; k < edits; ++k) t[rng() % t.size()] = "0123456789{}[]\",:-e.a\\ "[rng() % 24];
    try {
      auto f = PtnFile::from_memory(with_manifest_text(good, t), "fuzz.ptn", VerifyLevel::Full);
      for (const auto& n : f->tensor_names()) (void)f->tensor(n);
      ++loaded;
    } catch (const Error&) {
      ++refused;
    }
  }
  std::printf("[ mutate  ] manifest: %d loaded, %d refused\n", loaded, refused);
  EXPECT_GT(refused, 1500);
}

TEST(PtnMagic, RecognisesOnlyTheEightMagicBytes) {
  const char good[] = {'P', 'T', 'N', 0, 'P', 'R', 'O', 'G', 1, 2};
  EXPECT_TRUE(ptn::has_ptn_magic(good, sizeof good));
  EXPECT_TRUE(ptn::has_ptn_magic(good, 8));
  EXPECT_FALSE(ptn::has_ptn_magic(good, 7));  // too short to tell
  const char gguf[] = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
  EXPECT_FALSE(ptn::has_ptn_magic(gguf, sizeof gguf));
  const char near[] = {'P', 'T', 'N', 0, 'P', 'R', 'O', 'H'};
  EXPECT_FALSE(ptn::has_ptn_magic(near, sizeof near));
  EXPECT_FALSE(ptn::has_ptn_magic(nullptr, 8));
}

// A GGUF or a JSON file where a program is expected is named as what it is, not as corrupt.
TEST(PtnMagic, OtherModelFilesAreNamedNotCalledCorrupt) {
  std::vector<uint8_t> gguf = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0};
  gguf.resize(4096, 0);
  expect_error(gguf, ErrorKind::InvalidArgument, {"a GGUF file, not a .ptn program", "ptn export"});
  const std::string cfg = "{\"architectures\": [\"LlamaForCausalLM\"]}";
  expect_error(std::vector<uint8_t>(cfg.begin(), cfg.end()), ErrorKind::InvalidArgument, {"a JSON file"});
  const std::string other = "PK\003\004 not a program";
  expect_error(std::vector<uint8_t>(other.begin(), other.end()), ErrorKind::Corrupt, {"wrong magic bytes"});
}
