// A corpus of malformed GGUF and safetensors files, generated here: each must give a ptn::Error
// whose message names the file and the field, never a crash.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <functional>

#include <cstdio>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/file.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "formats/weights.h"
#include "../scratch_dir.h"

namespace ptn {
namespace {

std::string temp_dir() {
  static const testing::ScratchDir dir("ptn_corrupt_");
  return dir.path();
}

std::string write_file(const std::string& name, const std::string& bytes) {
  const std::string p = temp_dir() + "/" + name;
  std::FILE* f = std::fopen(p.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  return p;
}

// Little-endian byte builder for hand-made GGUF files.
struct B {
  std::string s;
  B& u8(uint8_t v) { s.push_back(static_cast<char>(v)); return *this; }
  B& u32(uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); return *this; }
  B& u64(uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); return *this; }
  B& f32(float v) { s.append(reinterpret_cast<const char*>(&v), 4); return *this; }
  B& str(const std::string& v) { u64(v.size()); s += v; return *this; }
  B& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) { s += "GGUF"; u32(version); u64(n_tensors); return u64(n_kv); }
  B& kv_u32(const std::string& k, uint32_t v) { str(k); u32(4); return u32(v); }
  B& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name);
    u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    u32(type);
    return u64(offset);
  }
  B& pad(size_t align) { while (s.size() % align) s.push_back(0); return *this; }
  B& zeros(size_t n) { s.append(n, '\0'); return *this; }
};

// Opens `bytes` as a GGUF; expects an Error mentioning the file and every needle.
void expect_gguf_error(const std::string& name, const std::string& bytes, std::vector<std::string> needles) {
  const std::string p = write_file(name, bytes);
  try {
    GgufFile::open(p);
    ADD_FAILURE() << name << ": no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(p), std::string::npos) << name << ": " << m;
    for (const auto& n : needles) EXPECT_NE(m.find(n), std::string::npos) << name << ": '" << n << "' not in: " << m;
  }
}

// A valid file with one f32 [4] tensor "a" (for the tests below to break one thing at a time).
std::string valid_gguf() {
  B b;
  b.header(1, 1).kv_u32("general.alignment", 32).tensor("a", {4}, 0, 0).pad(32).zeros(16);
  return b.s;
}

TEST(CorruptGguf, ValidBaselineOpens) {
  auto g = GgufFile::open(write_file("valid.gguf", valid_gguf()));
  EXPECT_EQ(g->tensors().size(), 1u);
  EXPECT_EQ(g->tensor("a").numel(), 4);
}

TEST(CorruptGguf, TruncatedAnywhereIsAnError) {
  const std::string v = valid_gguf();
  for (size_t n = 0; n < v.size(); ++n) {
    // Cutting inside the header or the data: never a crash; an error that names the file.
    const std::string p = write_file("trunc.gguf", v.substr(0, n));
    try {
      GgufFile::open(p);
      ADD_FAILURE() << "truncated to " << n << " bytes: no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  }
  expect_gguf_error("trunc_header.gguf", v.substr(0, 6), {"version", "truncated"});
  expect_gguf_error("trunc_data.gguf", v.substr(0, v.size() - 1), {"tensor 'a'", "outside the file"});
}

TEST(CorruptGguf, HeaderFields) {
  expect_gguf_error("magic.gguf", "GGUX" + valid_gguf().substr(4), {"magic"});
  B be;
  be.s = "GGUF";
  be.u8(0).u8(0).u8(0).u8(3).u64(0).u64(0);
  expect_gguf_error("bigendian.gguf", be.s, {"big-endian", "version"});
  expect_gguf_error("v1.gguf", B().header(0, 0, 1).s, {"version 1"});
  expect_gguf_error("v9.gguf", B().header(0, 0, 9).s, {"unknown GGUF version 9"});
  expect_gguf_error("tensors.gguf", B().header(uint64_t{1} << 40, 0).s, {"tensor_count", "limit"});
  expect_gguf_error("kvs.gguf", B().header(0, uint64_t{1} << 40).s, {"metadata_kv_count", "limit"});
  expect_gguf_error("kvs_more_than_file.gguf", B().header(0, 1000).s, {"metadata key", "truncated"});
}

TEST(CorruptGguf, MetadataValues) {
  B huge_key;
  huge_key.header(0, 1).u64(uint64_t{1} << 60);
  expect_gguf_error("huge_key.gguf", huge_key.s, {"metadata key", "exceeds the limit"});
  B huge_str;
  huge_str.header(0, 1).str("k").u32(8).u64(uint64_t{1} << 30);
  expect_gguf_error("huge_string.gguf", huge_str.s, {"value of 'k'", "exceeds the limit"});
  B long_str;
  long_str.header(0, 1).str("k").u32(8).u64(100).zeros(10);
  expect_gguf_error("long_string.gguf", long_str.s, {"value of 'k'", "truncated"});
  B huge_arr;
  huge_arr.header(0, 1).str("arr").u32(9).u32(4).u64(uint64_t{1} << 40);
  expect_gguf_error("huge_array.gguf", huge_arr.s, {"value of 'arr'", "exceeds the limit"});
  B str_arr;
  str_arr.header(0, 1).str("arr").u32(9).u32(8).u64(uint64_t{1} << 25);
  expect_gguf_error("string_array_longer_than_file.gguf", str_arr.s, {"value of 'arr'", "longer than the file"});
  B bad_type;
  bad_type.header(0, 1).str("k").u32(99).u32(0);
  expect_gguf_error("value_type.gguf", bad_type.s, {"value of 'k'", "unknown value type 99"});
  B bad_elem;
  bad_elem.header(0, 1).str("k").u32(9).u32(77).u64(1);
  expect_gguf_error("elem_type.gguf", bad_elem.s, {"value of 'k'", "unknown array element type 77"});
  B bad_bool;
  bad_bool.header(0, 1).str("flag").u32(7).u8(2);
  expect_gguf_error("bool.gguf", bad_bool.s, {"value of 'flag'", "bool"});
  B deep;
  deep.header(0, 1).str("nest");
  deep.u32(9);
  for (int i = 0; i < 20; ++i) deep.u32(9).u64(1);
  expect_gguf_error("deep.gguf", deep.s, {"value of 'nest'", "nested"});
  B dup;
  dup.header(0, 2).kv_u32("k", 1).kv_u32("k", 2);
  expect_gguf_error("dup_key.gguf", dup.s, {"duplicate key 'k'"});
  B empty_key;
  empty_key.header(0, 1).kv_u32("", 1);
  expect_gguf_error("empty_key.gguf", empty_key.s, {"metadata key", "empty key"});
}

TEST(CorruptGguf, Alignment) {
  for (uint32_t a : {0u, 48u, 3u}) {
    B b;
    b.header(0, 1).kv_u32("general.alignment", a);
    expect_gguf_error("align" + std::to_string(a) + ".gguf", b.s, {"general.alignment", "power of two"});
  }
  B huge;
  huge.header(0, 1).kv_u32("general.alignment", 1u << 30);
  expect_gguf_error("align_huge.gguf", huge.s, {"general.alignment"});
  B str_align;
  str_align.header(0, 1).str("general.alignment").u32(8).str("32");
  expect_gguf_error("align_string.gguf", str_align.s, {"general.alignment", "unsigned integer"});
  B misaligned;
  misaligned.header(1, 0).tensor("a", {4}, 0, 8).pad(32).zeros(64);
  expect_gguf_error("misaligned.gguf", misaligned.s, {"tensor 'a'", "alignment"});
}

TEST(CorruptGguf, TensorInfos) {
  B dims;
  dims.header(1, 0).tensor("a", {1, 1, 1, 1, 1}, 0, 0).pad(32).zeros(32);
  expect_gguf_error("dims.gguf", dims.s, {"tensor 'a'", "5 dimensions"});
  B neg;
  neg.header(1, 0).tensor("a", {static_cast<uint64_t>(-4)}, 0, 0).pad(32).zeros(32);
  expect_gguf_error("negative.gguf", neg.s, {"tensor 'a'", "negative dimension"});
  B overflow;
  overflow.header(1, 0).tensor("a", {uint64_t{1} << 40, uint64_t{1} << 40}, 0, 0).pad(32).zeros(32);
  expect_gguf_error("overflow.gguf", overflow.s, {"tensor 'a'"});
  B type;
  type.header(1, 0).tensor("a", {4}, 99, 0).pad(32).zeros(32);
  expect_gguf_error("type.gguf", type.s, {"tensor 'a'", "tensor type 99"});
  B q81;  // a type ggml has and ptn does not read is named
  q81.header(1, 0).tensor("a", {256}, 9, 0).pad(32).zeros(288);
  expect_gguf_error("q8_1.gguf", q81.s, {"tensor 'a'", "tensor type Q8_1 (GGUF type 9) is not supported"});
  B block;
  block.header(1, 0).tensor("q", {33, 2}, 2 /* q4_0 */, 0).pad(32).zeros(128);
  expect_gguf_error("block.gguf", block.s, {"tensor 'q'", "not a multiple of the q4_0 block"});
  B dup;
  dup.header(2, 0).tensor("a", {4}, 0, 0).tensor("a", {4}, 0, 32).pad(32).zeros(64);
  expect_gguf_error("dup_tensor.gguf", dup.s, {"duplicate tensor name 'a'"});
  B outside;
  outside.header(1, 0).tensor("a", {4}, 0, 1u << 20).pad(32).zeros(16);
  expect_gguf_error("outside.gguf", outside.s, {"tensor 'a'", "outside the file"});
  B huge_off;
  huge_off.header(1, 0).tensor("a", {4}, 0, ~uint64_t{0} - 31).pad(32).zeros(16);
  expect_gguf_error("offset_overflow.gguf", huge_off.s, {"tensor 'a'"});
  B overlap;
  overlap.header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {16}, 0, 32).pad(32).zeros(128);
  expect_gguf_error("overlap.gguf", overlap.s, {"tensor 'b'", "overlaps tensor 'a'"});
  B long_name;
  long_name.header(1, 0).u64(uint64_t{1} << 40);
  expect_gguf_error("tensor_name.gguf", long_name.s, {"tensor name", "exceeds the limit"});
}

TEST(CorruptGguf, TypedAccessorsNameFileAndKey) {
  B b;
  b.header(0, 2).kv_u32("llama.block_count", 5).str("name").u32(8).str("x");
  const std::string p = write_file("typed.gguf", b.s);
  auto g = GgufFile::open(p);
  EXPECT_EQ(g->get_u32("llama.block_count"), 5u);
  for (auto fn : std::vector<std::function<void()>>{
           [&] { g->get_u32("llama.missing"); }, [&] { g->get_string("llama.block_count"); },
           [&] { g->get_u32("name"); }, [&] { g->get_f32("llama.block_count"); },
           [&] { g->get_string_array("name"); }, [&] { g->get_bool("name"); }}) {
    try {
      fn();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("key '"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(g->get_i32("llama.block_count"), 5);  // integer accessors accept any integer type that fits
  EXPECT_EQ(g->get_i64("llama.block_count"), 5);
}

// ---- safetensors ------------------------------------------------------------------------------

std::string st_bytes(const std::string& header, size_t data_bytes, uint64_t claimed = 0) {
  std::string s;
  uint64_t n = claimed ? claimed : header.size();
  s.append(reinterpret_cast<const char*>(&n), 8);
  s += header;
  s.append(data_bytes, '\0');
  return s;
}

void expect_st_error(const std::string& name, const std::string& bytes, std::vector<std::string> needles,
                     ErrorKind kind = ErrorKind::Corrupt) {
  const std::string p = write_file(name, bytes);
  try {
    SafetensorsFile::open(p);
    ADD_FAILURE() << name << ": no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.kind(), kind) << m;
    EXPECT_NE(m.find(p), std::string::npos) << name << ": " << m;
    for (const auto& n : needles) EXPECT_NE(m.find(n), std::string::npos) << name << ": '" << n << "' not in: " << m;
  }
}

TEST(CorruptSafetensors, HeaderAndJson) {
  expect_st_error("short.safetensors", "abc", {"header size", "truncated"});
  expect_st_error("huge_header.safetensors", st_bytes("{}", 0, uint64_t{1} << 40), {"header size", "limit"});
  expect_st_error("header_past_end.safetensors", st_bytes("{}", 0, 1000), {"header", "truncated"});
  expect_st_error("malformed.safetensors", st_bytes("{\"a\": {", 0), {"JSON header", "malformed"});
  expect_st_error("array.safetensors", st_bytes("[1,2]", 0), {"JSON header", "not a JSON object"});
  expect_st_error("no_dtype.safetensors", st_bytes(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4), {"tensor 'w'", "dtype"});
  expect_st_error("bad_shape.safetensors", st_bytes(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4), {"tensor 'w'", "shape"});
  expect_st_error("bad_offsets.safetensors", st_bytes(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4), {"tensor 'w'", "data_offsets"});
  expect_st_error("unknown_dtype.safetensors", st_bytes(R"({"w": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 4]}})", 4),
                  {"tensor 'w'", "Q9"}, ErrorKind::Unsupported);
}

TEST(CorruptSafetensors, OffsetsAndSizes) {
  expect_st_error("size.safetensors", st_bytes(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", 4),
                  {"tensor 'w'", "needs 8"});
  expect_st_error("outside.safetensors", st_bytes(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4),
                  {"tensor 'w'", "not inside the data buffer"});
  expect_st_error("reversed.safetensors", st_bytes(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [4, 0]}})", 4),
                  {"tensor 'w'", "data_offsets"});
  expect_st_error("gap.safetensors",
                  st_bytes(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})", 12),
                  {"tensor 'b'", "gap"});
  expect_st_error("overlap.safetensors",
                  st_bytes(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8),
                  {"tensor 'b'", "overlaps"});
  expect_st_error("uncovered.safetensors", st_bytes(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 8),
                  {"data", "cover 4 of the 8"});
  expect_st_error("dims.safetensors", st_bytes(R"({"a": {"dtype": "F32", "shape": [1,1,1,1,1], "data_offsets": [0, 4]}})", 4),
                  {"tensor 'a'", "4 dimensions"}, ErrorKind::Unsupported);
}

TEST(CorruptSafetensors, UnsupportedDtypeNamesDtypeAndTensor) {
  const std::string p = write_file("i64.safetensors", st_bytes(R"({"pos": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", 8));
  auto f = SafetensorsFile::open(p);  // listing is fine
  try {
    f->tensor("pos");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("I64"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("'pos'"), std::string::npos);
  }
}

void expect_dir_error(const std::string& dir, std::vector<std::string> needles) {
  try {
    SafetensorsSet::open_dir(dir);
    ADD_FAILURE() << dir << ": no error";
  } catch (const Error& e) {
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << "'" << n << "' not in: " << e.what();
  }
}

TEST(CorruptSafetensors, ShardIndex) {
  const std::string d = temp_dir() + "/sharded";
  ::mkdir(d.c_str(), 0755);
  auto put = [&](const std::string& name, const std::string& text) {
    std::FILE* f = std::fopen((d + "/" + name).c_str(), "wb");
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  };
  put("s1.safetensors", st_bytes(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 4));
  put("s2.safetensors", st_bytes(R"({"b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 8));
  put("model.safetensors.index.json", R"({"metadata": {}, "weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})");
  auto set = SafetensorsSet::open_dir(d);
  EXPECT_EQ(set->files().size(), 2u);
  EXPECT_EQ(set->tensor("b").numel(), 2);
  EXPECT_NE(set->file_of("b").find("s2.safetensors"), std::string::npos);

  put("model.safetensors.index.json", R"({"weight_map": {"a": "s1.safetensors", "c": "missing.safetensors"}})");
  expect_dir_error(d, {"model.safetensors.index.json", "weight_map['c']", "missing.safetensors", "does not exist"});
  put("model.safetensors.index.json", R"({"weight_map": {"a": "../s1.safetensors"}})");
  expect_dir_error(d, {"weight_map['a']", "plain file name"});
  put("model.safetensors.index.json", R"({"weight_map": {"b": "s1.safetensors"}})");
  expect_dir_error(d, {"weight_map['b']", "not in shard"});
  put("model.safetensors.index.json", R"({"weight_map": [1]})");
  expect_dir_error(d, {"model.safetensors.index.json", "weight_map"});
  put("model.safetensors.index.json", R"({"weight_map": {)");
  expect_dir_error(d, {"model.safetensors.index.json", "malformed JSON"});
}

TEST(CorruptHfDirectory, MissingTensorIsNamed) {
  const std::string d = temp_dir() + "/hfdir";
  ::mkdir(d.c_str(), 0755);
  auto put = [&](const std::string& name, const std::string& text) {
    std::FILE* f = std::fopen((d + "/" + name).c_str(), "wb");
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  };
  put("config.json", R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 4, "hidden_size": 2, "intermediate_size": 2,
      "num_hidden_layers": 1, "num_attention_heads": 1, "tie_word_embeddings": true})");
  put("model.safetensors", st_bytes(R"({"model.embed_tokens.weight": {"dtype": "F32", "shape": [4, 2], "data_offsets": [0, 32]}})", 32));
  try {
    open_weights(d);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.input_layernorm.weight"), std::string::npos) << e.what();
  }
  put("model.safetensors", st_bytes(R"({"model.embed_tokens.weight": {"dtype": "F32", "shape": [4, 3], "data_offsets": [0, 48]}})", 48));
  try {
    open_weights(d);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.embed_tokens.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[4, 2]"), std::string::npos) << e.what();
  }
  put("config.json", R"({"architectures": ["LlamaForCausalLM"], "vocab_size": )");
  try {
    open_weights(d);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ptn

#include <random>

#include "formats/gguf_writer.h"

namespace ptn {
namespace {

// Random byte mutations of small valid files: each either opens (and then every value and
// tensor can be read) or throws ptn::Error. Run under PTN_SANITIZE to catch memory errors.
TEST(CorruptFuzz, MutatedGgufNeverCrashes) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 1);
  w.set_string_array("tokenizer.ggml.tokens", {"a", "bb", "ccc"});
  w.set_f32_array("tokenizer.ggml.scores", {0.0f, -1.0f, -2.0f});
  Tensor t = Tensor::zeros(DType::F32, {2, 32});
  w.add_tensor("x", t);
  w.add_tensor("y", Tensor::zeros(DType::Q8_0, {1, 32}));
  const std::string p0 = temp_dir() + "/fuzz_base.gguf";
  w.write(p0);
  const std::string base = read_text_file(p0);
  std::mt19937 rng(1234);
  int opened = 0;
  for (int it = 0; it < 3000; ++it) {
    std::string m = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % std::min<size_t>(m.size(), 400);  // the header region
      m[pos] = static_cast<char>(rng() % 4 == 0 ? 0xff : rng() & 0xff);
    }
    if (rng() % 8 == 0) m.resize(rng() % m.size());
    const std::string p = write_file("fuzz.gguf", m);
    try {
      auto g = GgufFile::open(p);
      for (const auto& [k, v] : g->metadata()) (void)v.describe(1000);
      for (const auto& ti : g->tensors()) {
        Tensor x = g->tensor(ti.name);
        volatile uint8_t sink = 0;
        for (size_t b = 0; b < x.nbytes(); ++b) sink = sink + static_cast<const uint8_t*>(x.data())[b];
      }
      ++opened;
    } catch (const Error&) {
    }
  }
  EXPECT_GT(opened, 0);  // some mutations (e.g. in string bytes) leave the file valid
}

TEST(CorruptFuzz, MutatedSafetensorsNeverCrashes) {
  const std::string base = st_bytes(
      R"({"__metadata__": {"format": "pt"}, "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}, "b": {"dtype": "BF16", "shape": [4], "data_offsets": [16, 24]}})",
      24);
  std::mt19937 rng(99);
  int opened = 0, refused = 0, tensors_read = 0, tensors_refused = 0;
  for (int it = 0; it < 3000; ++it) {
    std::string m = base;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) m[rng() % m.size()] = static_cast<char>(" 0123456789[]{},:\"ABF"[rng() % 21]);
    if (rng() % 8 == 0) m.resize(rng() % m.size());
    const std::string p = write_file("fuzz.safetensors", m);
    // Every outcome is an opened file or a ptn::Error; anything else escapes and fails the test.
    try {
      auto f = SafetensorsFile::open(p);
      ++opened;
      for (const auto& ti : f->tensors()) {
        try {
          Tensor x = f->tensor(ti.name);
          volatile uint8_t sink = 0;
          for (size_t b = 0; b < x.nbytes(); ++b) sink = sink + static_cast<const uint8_t*>(x.data())[b];
          ++tensors_read;
        } catch (const Error& e) {
          EXPECT_FALSE(std::string(e.what()).empty());
          ++tensors_refused;
        }
      }
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("fuzz.safetensors"), std::string::npos) << e.what();  // says where
      ++refused;
    }
  }
  // Both outcomes occur, so the loop exercised the parser's checks and its success path.
  std::printf("[ mutate  ] safetensors: %d opened (%d tensors read, %d refused), %d refused\n", opened, tensors_read,
              tensors_refused, refused);
  EXPECT_GT(opened, 100);
  EXPECT_GT(refused, 100);
  EXPECT_GT(tensors_read, 0);
  EXPECT_EQ(opened + refused, 3000);
}

}  // namespace
}  // namespace ptn
