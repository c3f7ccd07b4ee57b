#include "serve/ids.h"

#include <mutex>
#include <random>

namespace ptn::serve {
namespace {

std::mutex& generator_mutex() {
  static std::mutex mu;
  return mu;
}

std::mt19937_64& generator() {
  static std::mt19937_64 rng{[] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    return std::mt19937_64(seq);
  }()};
  return rng;
}

}  // namespace

uint64_t random_u64() {
  std::lock_guard<std::mutex> lock(generator_mutex());
  return generator()();
}

uint64_t random_seed() { return random_u64() & ((uint64_t{1} << 53) - 1); }

std::string random_id(const std::string& prefix, int chars) {
  static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = prefix;
  std::lock_guard<std::mutex> lock(generator_mutex());
  for (int i = 0; i < chars; ++i) id += alnum[generator()() % 62];
  return id;
}

}  // namespace ptn::serve
