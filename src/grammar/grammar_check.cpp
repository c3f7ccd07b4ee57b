// Character sets, and the compile-time check of a grammar: which rules can match the empty string
// (nullable), and a refusal of left recursion, found as a cycle in the graph "rule A can start
// with rule B" (B appears in an alternative of A after only nullable rules).
#include <algorithm>

#include "core/error.h"
#include "grammar/grammar.h"

namespace ptn::grammar {

void CharSet::finish() {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  ranges = std::move(merged);
  ascii[0] = ascii[1] = 0;
  for (uint32_t c = 0; c < 128; ++c) {
    bool in = false;
    for (const auto& r : ranges) in |= (c >= r.first && c <= r.second);
    if (in != negated) ascii[c >> 6] |= uint64_t{1} << (c & 63);
  }
}

bool CharSet::matches(uint32_t cp) const {
  if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1;
  for (const auto& r : ranges) {
    if (cp < r.first) break;
    if (cp <= r.second) return !negated;
  }
  return negated;
}

bool CharSet::intersects(uint32_t lo, uint32_t hi) const {
  if (!negated) {
    for (const auto& r : ranges)
      if (r.first <= hi && r.second >= lo) return true;
    return false;
  }
  // Negated: some code point of [lo, hi] is not covered by the (merged, sorted) ranges.
  uint32_t next = lo;
  for (const auto& r : ranges) {
    if (r.second < next) continue;
    if (r.first > next) return true;
    if (r.second >= hi) return false;
    next = r.second + 1;
  }
  return next <= hi;
}

namespace {

std::vector<bool> nullable_rules(const Grammar& g) {
  std::vector<bool> nullable(g.rule_alts.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < g.rule_alts.size(); ++r) {
      if (nullable[r]) continue;
      for (uint32_t p : g.rule_alts[r]) {
        while (g.elems[p].kind == ElemKind::Rule && nullable[g.elems[p].arg]) ++p;
        if (g.elems[p].kind == ElemKind::End) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

// For each rule, the rules it can start with.
std::vector<std::vector<uint32_t>> left_edges(const Grammar& g, const std::vector<bool>& nullable) {
  std::vector<std::vector<uint32_t>> edges(g.rule_alts.size());
  for (size_t r = 0; r < g.rule_alts.size(); ++r) {
    for (uint32_t p : g.rule_alts[r]) {
      for (; g.elems[p].kind == ElemKind::Rule; ++p) {
        edges[r].push_back(g.elems[p].arg);
        if (!nullable[g.elems[p].arg]) break;
      }
    }
  }
  return edges;
}

}  // namespace

void check_grammar(const Grammar& g, const std::string& where) {
  const auto nullable = nullable_rules(g);
  const auto edges = left_edges(g, nullable);
  // Iterative depth-first search (a recursive one could overflow on 20000 chained rules).
  enum : uint8_t { White, Grey, Black };
  std::vector<uint8_t> color(g.rule_alts.size(), White);
  std::vector<std::pair<uint32_t, size_t>> path;  // rule, next edge to follow
  for (uint32_t start = 0; start < g.rule_alts.size(); ++start) {
    if (color[start] != White) continue;
    path.push_back({start, 0});
    color[start] = Grey;
    while (!path.empty()) {
      auto& [r, e] = path.back();
      if (e == edges[r].size()) {
        color[r] = Black;
        path.pop_back();
        continue;
      }
      uint32_t next = edges[r][e++];
      if (color[next] == Grey) {
        std::string cycle;
        size_t k = 0;
        while (path[k].first != next) ++k;
        for (; k < path.size(); ++k) cycle += g.rule_names[path[k].first] + " -> ";
        cycle += g.rule_names[next];
        fail(ErrorKind::InvalidArgument, where,
             "left recursion is not supported: rule '" + g.rule_names[next] +
                 "' can start with itself without consuming a character (" + cycle +
                 "); rewrite it with a repetition such as  list ::= item (\",\" item)*"
                 " (a repetition of something that can be empty is also left recursive)");
      }
      if (color[next] == White) {
        color[next] = Grey;
        path.push_back({next, 0});
      }
    }
  }
}

}  // namespace ptn::grammar
