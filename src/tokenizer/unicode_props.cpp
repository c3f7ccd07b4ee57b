#include "tokenizer/unicode_props.h"

#include <algorithm>

namespace ptn::tok {

using namespace props_data;

uint8_t unicode_flags(uint32_t cp) {
  const auto* end = kCategoryRanges + kCategoryRangeCount;
  const auto* it =
      std::upper_bound(kCategoryRanges, end, cp, [](uint32_t v, const CategoryRange& r) { return v < r.first; });
  if (it == kCategoryRanges) return 0;
  --it;
  return cp <= it->last ? it->flags : 0;
}

void append_lowercase(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp < 0x80) {
    out.push_back(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    return;
  }
  const auto* end = kLowercase + kLowercaseCount;
  const auto* it = std::lower_bound(kLowercase, end, cp, [](const Lowercase& l, uint32_t v) { return l.cp < v; });
  if (it != end && it->cp == cp) out.insert(out.end(), it->to, it->to + it->n);
  else out.push_back(cp);
}

}  // namespace ptn::tok
