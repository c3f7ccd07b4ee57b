// Random values the server hands out: sampling seeds for requests that give none, and the ids of
// replies, tool calls, messages and responses. One generator, seeded once from the system's
// random source, shared by every request thread.
#pragma once
#include <cstdint>
#include <string>

namespace ptn::serve {

// A uniformly random 64-bit value.
uint64_t random_u64();

// A seed at most 2^53 - 1, so that a JavaScript client reads the returned seed exactly and can
// replay the reply with it.
uint64_t random_seed();

// `prefix` followed by `chars` random letters and digits, e.g. random_id("call_", 24).
std::string random_id(const std::string& prefix, int chars);

}  // namespace ptn::serve
