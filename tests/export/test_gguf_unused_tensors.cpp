// Every tensor of a GGUF is used or reported, as for HF checkpoints: a tensor the architecture as
// ptn reads it has no part for makes the export fail naming it, instead of a program that runs
// without a weight its file holds.
#include <gtest/gtest.h>

#include "core/error.h"
#include "export_test_util.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"

namespace ptn::testing {
namespace {

// A copy of stories260K.gguf (every key and tensor as stored) plus the tensors `extra`.
std::string copy_with(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& extra) {
  auto g = GgufFile::open(stories_dir() + "/stories260K.gguf");
  GgufWriter w;
  for (const auto& [key, v] : g->metadata())
    if (key != "general.alignment") w.set_raw(key, v.type, v.encoded);
  for (const auto& t : g->tensors()) w.add_tensor(t.name, g->tensor(t.name));
  for (const auto& [name, t] : extra) w.add_tensor(name, t);
  w.write(path);
  return path;
}

std::string export_error(const std::string& model) {
  ExportOptions o = base_options(model, "");
  o.samples = 0;
  o.progress = false;
  std::ostringstream log;
  try {
    export_in_memory(o, log);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GgufUnusedTensors, ATensorNoPartReadsIsRefusedByName) {
  TempDir d;
  // The copy as it is exports: the check does not trip on the tensors the model reads.
  EXPECT_EQ(export_error(copy_with(d / "same.gguf", {})), "");
  // An attention output bias in one layer only: the reader takes the file's biases as the
  // model's (as llama.cpp does), so it asks for every layer's and names the one missing; the
  // layer 0 bias is not dropped.
  const std::string bias = copy_with(d / "bias.gguf", {{"blk.0.attn_output.bias", Tensor::zeros(DType::F32, {64})}});
  const std::string err = export_error(bias);
  EXPECT_NE(err.find("blk.1.attn_output.bias"), std::string::npos) << err;
  // Any name that maps to no part of the model.
  const std::string stray = copy_with(d / "stray.gguf", {{"blk.1.ffn_extra.weight", Tensor::zeros(DType::F32, {8, 64})},
                                                          {"mm.0.weight", Tensor::zeros(DType::F32, {64})}});
  const std::string err2 = export_error(stray);
  EXPECT_NE(err2.find("blk.1.ffn_extra.weight"), std::string::npos) << err2;
  EXPECT_NE(err2.find("mm.0.weight"), std::string::npos) << err2;
  EXPECT_NE(err2.find("does not use"), std::string::npos) << err2;
  EXPECT_NE(err2.find("'llama' GGUF architecture"), std::string::npos) << err2;
}

}  // namespace
}  // namespace ptn::testing
