// Creating a cache by name, for the CLI and the server (--kv-cache paged|reference).
#pragma once
#include <memory>
#include <string>

#include "kvcache/cache.h"

namespace ptn {

class ThreadPool;

// kind: "paged" (PagedCache) or "reference" (SequenceReferenceCache). Throws InvalidArgument
// for an unknown kind or invalid options: block_size outside 1..4096, a dtype other than
// f32/f16/bf16/q8_0/q4_0, q8_0/q4_0 with head dims not multiples of 32, no capacity for the paged cache
// (capacity_tokens and capacity_bytes both 0) or an empty/invalid spec.
// pool: threads for the paged cache's attention (null: default_pool()).
std::unique_ptr<KVCache> make_cache(const std::string& kind, const CacheSpec& spec, const CacheOptions& options,
                                    ThreadPool* pool = nullptr);

}  // namespace ptn
