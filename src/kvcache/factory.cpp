#include "kvcache/factory.h"

#include "core/error.h"
#include "kvcache/kv_common.h"
#include "kvcache/paged_cache.h"
#include "kvcache/reference_cache.h"

namespace ptn {

std::unique_ptr<KVCache> make_cache(const std::string& kind, const CacheSpec& spec, const CacheOptions& options,
                                    ThreadPool* pool) {
  if (kind == "paged") {
    kv::validate_spec(spec, options, "make_cache(paged)");
    if (options.capacity_tokens == 0 && options.capacity_bytes == 0)
      fail(ErrorKind::InvalidArgument, "make_cache(paged)", "zero capacity: set capacity_tokens or capacity_bytes");
    return std::make_unique<PagedCache>(spec, options, pool);
  }
  if (kind == "reference") {
    kv::validate_spec(spec, options, "make_cache(reference)");
    return std::make_unique<SequenceReferenceCache>(spec, options);
  }
  fail(ErrorKind::InvalidArgument, "make_cache",
       "unknown kv cache kind '" + kind.substr(0, 64) + "' (use 'paged' or 'reference')");
}

}  // namespace ptn
