#include "generate/lookup_draft.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace ptn::gen {

void check_lookup_options(const LookupOptions& o, const char* flag) {
  if (o.draft_tokens < 0 || o.draft_tokens > 32)
    fail(ErrorKind::InvalidArgument, flag, "the draft length must be 0..32, not " + std::to_string(o.draft_tokens));
  if (o.ngram_min < 1 || o.ngram_max < o.ngram_min || o.ngram_max > 16)
    fail(ErrorKind::InvalidArgument, flag,
         "the n-gram sizes must satisfy 1 <= min <= max <= 16, not min " + std::to_string(o.ngram_min) + ", max " +
             std::to_string(o.ngram_max));
}

std::vector<int32_t> lookup_draft(const std::vector<int32_t>& tokens, const LookupOptions& o) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (o.draft_tokens <= 0) return {};
  for (int64_t n = std::min<int64_t>(o.ngram_max, len - 1); n >= o.ngram_min; --n) {
    const int32_t* key = tokens.data() + (len - n);
    // The latest earlier occurrence: it starts at i < len - n, so at least one token follows it.
    for (int64_t i = len - n - 1; i >= 0; --i) {
      if (!std::equal(key, key + n, tokens.data() + i)) continue;
      const int64_t from = i + n, to = std::min<int64_t>(len, from + o.draft_tokens);
      return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + to);
    }
  }
  return {};
}

}  // namespace ptn::gen
