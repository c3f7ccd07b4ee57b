#include "tokenizer/normalize.h"

#include <algorithm>
#include <vector>

#include "tokenizer/utf8.h"

namespace ptn::tok {

namespace {

using namespace nfc_data;

// Hangul syllables compose and decompose by arithmetic (Unicode ch. 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

uint8_t ccc(uint32_t cp) {
  const auto* end = kCombiningClasses + kCombiningClassCount;
  const auto* it = std::lower_bound(kCombiningClasses, end, cp,
                                    [](const CombiningClass& c, uint32_t v) { return c.cp < v; });
  return it != end && it->cp == cp ? it->ccc : 0;
}

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto* end = kDecompositions + kDecompositionCount;
  const auto* it =
      std::lower_bound(kDecompositions, end, cp, [](const Decomposition& d, uint32_t v) { return d.cp < v; });
  if (it != end && it->cp == cp) out.insert(out.end(), it->to, it->to + it->n);
  else out.push_back(cp);
}

// The primary composite of (a, b), or 0.
uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const auto* end = kCompositions + kCompositionCount;
  const auto* it = std::lower_bound(kCompositions, end, std::make_pair(a, b), [](const Composition& c, auto v) {
    return c.first < v.first || (c.first == v.first && c.second < v.second);
  });
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

// Puts each run of non-starters in canonical order (stable by class); cls[i] = ccc(d[i]).
void canonical_order(std::vector<uint32_t>& d, std::vector<uint8_t>& cls) {
  cls.resize(d.size());
  for (size_t i = 0; i < d.size(); ++i) cls[i] = ccc(d[i]);
  for (size_t i = 0; i < d.size();) {
    if (cls[i] == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && cls[j] != 0) ++j;
    std::vector<std::pair<uint8_t, uint32_t>> run;
    for (size_t k = i; k < j; ++k) run.push_back({cls[k], d[k]});
    std::stable_sort(run.begin(), run.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    for (size_t k = i; k < j; ++k) {
      cls[k] = run[k - i].first;
      d[k] = run[k - i].second;
    }
    i = j;
  }
}

void nfc_run(std::vector<uint32_t>& cps, std::string& out) {
  std::vector<uint32_t> d;
  d.reserve(cps.size() + 8);
  for (uint32_t cp : cps) decompose(cp, d);
  std::vector<uint8_t> cls;
  canonical_order(d, cls);
  // Canonical composition: a character joins the last starter unless blocked by a character
  // of the same or higher class in between (or by any starter).
  std::vector<uint32_t> r;
  std::vector<uint8_t> rc;
  r.reserve(d.size());
  int64_t starter = -1;
  for (size_t i = 0; i < d.size(); ++i) {
    const uint32_t cp = d[i];
    const uint8_t c = cls[i];
    if (starter >= 0) {
      const bool adjacent = static_cast<size_t>(starter) + 1 == r.size();
      const bool blocked = !adjacent && (rc.back() == 0 || rc.back() >= c);
      if (!blocked) {
        if (const uint32_t comp = compose(r[static_cast<size_t>(starter)], cp)) {
          r[static_cast<size_t>(starter)] = comp;
          continue;
        }
      }
    }
    if (c == 0) starter = static_cast<int64_t>(r.size());
    r.push_back(cp);
    rc.push_back(c);
  }
  for (uint32_t cp : r) append_utf8(out, cp);
  cps.clear();
}

}  // namespace

void nfd(std::vector<uint32_t>& cps) {
  std::vector<uint32_t> d;
  d.reserve(cps.size() + 8);
  for (uint32_t cp : cps) decompose(cp, d);
  std::vector<uint8_t> cls;
  canonical_order(d, cls);
  cps.swap(d);
}

std::string nfc_normalize(std::string_view text) {
  // Fast path: nothing at or above U+0300 (lead byte 0xCC) means nothing decomposes or composes
  // differently (all Latin-1 / Latin Extended characters below it are NFC-stable).
  bool simple = true;
  for (unsigned char c : text)
    if (c >= 0xCC) {
      simple = false;
      break;
    }
  if (simple) return std::string(text);

  std::string out;
  out.reserve(text.size() + 8);
  std::vector<uint32_t> run;
  size_t i = 0;
  while (i < text.size()) {
    const size_t n = utf8_valid_length(text, i);
    if (n == 0) {
      nfc_run(run, out);
      out += text[i++];
      continue;
    }
    run.push_back(decode_utf8(text, i, n));
    i += n;
  }
  nfc_run(run, out);
  return out;
}

}  // namespace ptn::tok
