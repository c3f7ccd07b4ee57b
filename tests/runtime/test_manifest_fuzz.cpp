// Mutation fuzz of a real program's manifest (stories260K): numbers, strings and arrays in the
// graph, model spec and cache spec are replaced with hostile values; loading the manifest,
// building an executor and running a step with the paged cache must either work or throw
// ptn::Error, never crash or throw anything else. (Clean under PTN_SANITIZE.)
#include <gtest/gtest.h>

#include <random>

#include "program_test_util.h"

namespace ptn {
namespace {

using namespace ptn::testing;
using json = nlohmann::json;

// Every JSON leaf under `j`, as pointers.
void leaves(json& j, std::vector<json*>& out) {
  if (j.is_object() || j.is_array()) {
    for (auto& c : j) leaves(c, out);
  } else {
    out.push_back(&j);
  }
}

json hostile(std::mt19937_64& rng, const json& old) {
  static const std::vector<json> values = {
      0, 1, -1, 2, 3, 7, 8, 64, 511, 512, 513, 4096, 65536, 2147483647, -2147483648LL, 4294967296LL,
      9007199254740993LL, -9223372036854775807LL, 18446744073709551615ULL, 0.5, -0.0, 1e-30, 1e30, 1e300, -1e300,
      "", "full", "window", "chunk", "linear", "yarn", "llama3", "f16", "q8_0", "i32", "buffer", "input",
      "activation", "update_and_attend", "cache_write", "rope", true, false, nullptr, json::array(), json::object()};
  std::uniform_int_distribution<size_t> pick(0, values.size() - 1);
  if (old.is_number_integer() && rng() % 3 == 0) return old.get<int64_t>() + static_cast<int64_t>(rng() % 5) - 2;
  return values[pick(rng)];
}

TEST(ManifestFuzz, MutatedManifestsLoadOrThrowPtnError) {
  auto base = stories_program(8);
  std::map<std::string, Tensor> extra;
  const json good = meta_to_json(base->meta(), extra);
  std::mt19937_64 rng(20261130);
  int loaded = 0, ran = 0, refused = 0;
  const int iterations = 1500;
  for (int it = 0; it < iterations; ++it) {
    json m = good;
    // Mutate 1..3 leaves of the graph, model or cache spec.
    const char* parts[] = {"graph", "model", "cache"};
    const int n_mut = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < n_mut; ++k) {
      std::vector<json*> ls;
      leaves(m[parts[rng() % 3]], ls);
      if (ls.empty()) continue;
      json* leaf = ls[rng() % ls.size()];
      *leaf = hostile(rng, *leaf);
    }
    try {
      ProgramMeta meta = meta_from_json(m, base->tensors(), "fuzz");
      ++loaded;
      auto p = Program::from_memory(std::move(meta), base->tensors(), "fuzz");
      Executor exec(p, ExecMode::Optimized, 4);
      auto cache = make_cache("paged", p->meta().cache_spec, cache_options(DType::F32, 64, 4));
      CacheScope scope(exec, *cache);
      cache->add_sequence(0);
      int64_t n = 0;
      exec.step(StepBatch{{{0, 0, 1}, {0, 1, 2}, {0, 2, 3}}}, OutputRows::All, &n);
      exec.step(StepBatch{{{0, 3, 4}}}, OutputRows::LastPerSequence, &n);
      ++ran;
    } catch (const Error&) {
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "iteration " << it << ": not a ptn::Error: " << e.what();
    }
  }
  EXPECT_EQ(refused + ran, iterations);
  EXPECT_GT(refused, iterations / 4) << "the mutations should mostly be caught";
  EXPECT_GT(ran, 0) << "some mutations (e.g. of eps or theta) are harmless";
  RecordProperty("loaded", loaded);
}

}  // namespace
}  // namespace ptn
