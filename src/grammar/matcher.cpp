#include "grammar/matcher.h"

#include <algorithm>

#include "core/error.h"

namespace ptn::grammar {

namespace {

uint32_t min_code_point(uint8_t length) { return length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000; }

}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> grammar, const MatcherLimits& limits)
    : g_(std::move(grammar)), lim_(limits) {
  PTN_CHECK(g_ && g_->root < g_->rule_alts.size(), ErrorKind::InvalidArgument, "grammar", "no grammar");
  for (uint32_t alt : g_->rule_alts[g_->root]) expand(alt, -1, state_.heads);
}

int32_t Matcher::push(uint32_t pos, int32_t parent) {
  uint32_t depth = parent < 0 ? 1 : nodes_[parent].depth + 1;
  if (depth > lim_.max_stack_depth) return -1;
  PTN_CHECK(nodes_.size() < INT32_MAX, ErrorKind::Capacity, "grammar", "matcher arena full");
  nodes_.push_back({pos, parent, depth});
  return static_cast<int32_t>(nodes_.size() - 1);
}

bool Matcher::same_stack(int32_t a, int32_t b) const {
  while (a != b) {
    if (a < 0 || b < 0) return false;
    const Node& x = nodes_[a];
    const Node& y = nodes_[b];
    if (x.pos != y.pos || x.depth != y.depth) return false;
    a = x.parent;
    b = y.parent;
  }
  return true;
}

void Matcher::add_head(int32_t node, std::vector<int32_t>& heads) const {
  for (int32_t h : heads)
    if (same_stack(h, node)) return;
  if (heads.size() >= lim_.max_stacks)
    fail(ErrorKind::Capacity, "grammar", "more than " + std::to_string(lim_.max_stacks) +
                                             " parses alive at once: the grammar is too ambiguous");
  heads.push_back(node);
}

// Pushes the stacks that continue at `pos` (above `parent`) until each has a character set on
// top: a rule reference expands into its alternatives (the continuation after it is pushed
// unless it is the end of the alternative: a tail call), the end of an alternative returns to
// the parent's continuation, and the end of the root gives the empty stack.
void Matcher::expand(uint32_t pos, int32_t parent, std::vector<int32_t>& heads) {
  const Grammar& g = *g_;
  size_t steps = 0;
  work_.clear();
  work_.push_back({pos, parent});
  while (!work_.empty()) {
    auto [p, par] = work_.back();
    work_.pop_back();
    for (;;) {
      if (++steps > lim_.max_expand_steps)
        fail(ErrorKind::Capacity, "grammar", "expanding one character took more than " +
                                                 std::to_string(lim_.max_expand_steps) + " steps: the grammar is too ambiguous");
      const Elem e = g.elems[p];
      if (e.kind == ElemKind::End) {
        if (par < 0) {
          add_head(-1, heads);
          break;
        }
        const Node up = nodes_[par];
        p = up.pos;
        par = up.parent;
        continue;
      }
      if (e.kind == ElemKind::Char) {
        int32_t n = push(p, par);
        if (n >= 0) add_head(n, heads);
        break;
      }
      int32_t cont = par;
      if (g.elems[p + 1].kind != ElemKind::End) {
        cont = push(p + 1, par);
        if (cont < 0) break;  // too deep: this parse is dropped
      }
      const auto& alts = g.rule_alts[e.arg];
      for (auto it = alts.rbegin(); it != alts.rend(); ++it) work_.push_back({*it, cont});
      break;
    }
  }
}

void Matcher::advance(const std::vector<int32_t>& heads, uint32_t cp, std::vector<int32_t>& out) {
  for (int32_t h : heads) {
    if (h < 0) continue;
    const Node n = nodes_[h];
    if (g_->sets[g_->elems[n.pos].arg].matches(cp)) expand(n.pos + 1, n.parent, out);
  }
}

void Matcher::keep_if_possible(const std::vector<int32_t>& heads, uint32_t lo, uint32_t hi,
                               std::vector<int32_t>& out) const {
  for (int32_t h : heads)
    if (h >= 0 && g_->sets[g_->elems[nodes_[h].pos].arg].intersects(lo, hi)) out.push_back(h);
}

bool Matcher::step(const State& in, uint8_t b, State& out) {
  out.heads.clear();
  out.partial = 0;
  out.need = out.length = 0;
  if (in.need == 0) {
    if (b < 0x80) {
      advance(in.heads, b, out.heads);
      return !out.heads.empty();
    }
    if (b >= 0xC2 && b <= 0xDF) {
      out.need = 1, out.partial = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
      out.need = 2, out.partial = b & 0x0F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      out.need = 3, out.partial = b & 0x07;
    } else {
      return false;
    }
    out.length = out.need + 1;
  } else {
    if ((b & 0xC0) != 0x80) return false;
    uint32_t v = (in.partial << 6) | (b & 0x3F);
    if (in.need == 1) {
      if (v < min_code_point(in.length) || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return false;
      advance(in.heads, v, out.heads);
      return !out.heads.empty();
    }
    out.partial = v;
    out.need = in.need - 1;
    out.length = in.length;
  }
  // A character is pending: keep the stacks that some completion of it can advance.
  const uint32_t shift = 6u * out.need;
  uint32_t lo = out.partial << shift;
  uint32_t hi = lo | ((1u << shift) - 1);
  lo = std::max(lo, min_code_point(out.length));
  hi = std::min<uint32_t>(hi, 0x10FFFF);
  if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return false;
  keep_if_possible(in.heads, lo, hi, out.heads);
  return !out.heads.empty();
}

bool Matcher::is_complete(const State& s) const {
  if (s.need != 0) return false;
  return std::find(s.heads.begin(), s.heads.end(), -1) != s.heads.end();
}

void Matcher::state_key(const State& s, std::vector<uint32_t>& key) const {
  key.push_back(s.partial);
  key.push_back(static_cast<uint32_t>(s.need) | static_cast<uint32_t>(s.length) << 8);
  key.push_back(static_cast<uint32_t>(s.heads.size()));
  for (int32_t h : s.heads) {
    key.push_back(h < 0 ? 0 : nodes_[h].depth);
    for (int32_t n = h; n >= 0; n = nodes_[n].parent) key.push_back(nodes_[n].pos);
  }
}

size_t Matcher::state_from_key(const uint32_t* key, State& out) {
  out.partial = key[0];
  out.need = static_cast<uint8_t>(key[1] & 0xFF);
  out.length = static_cast<uint8_t>(key[1] >> 8);
  const uint32_t n_heads = key[2];
  out.heads.clear();
  size_t at = 3;
  for (uint32_t i = 0; i < n_heads; ++i) {
    const uint32_t depth = key[at++];
    int32_t parent = -1;
    for (uint32_t d = 1; d <= depth; ++d) {  // bottom (the last position listed) first
      nodes_.push_back({key[at + depth - d], parent, d});
      parent = static_cast<int32_t>(nodes_.size() - 1);
    }
    out.heads.push_back(parent);
    at += depth;
  }
  return at;
}

bool Matcher::can_accept(std::string_view bytes) {
  const size_t mark = arena_mark();
  State a = state_, b;
  bool ok = true;
  for (char c : bytes) {
    if (!step(a, static_cast<uint8_t>(c), b)) {
      ok = false;
      break;
    }
    std::swap(a, b);
  }
  arena_reset(mark);
  return ok;
}

bool Matcher::accept(std::string_view bytes) {
  const size_t mark = arena_mark();
  State a = state_, b;
  for (char c : bytes) {
    if (!step(a, static_cast<uint8_t>(c), b)) {
      arena_reset(mark);
      return false;
    }
    std::swap(a, b);
  }
  state_ = std::move(a);
  compact();
  return true;
}

// Keeps only the nodes the live stacks use (parents always precede their children in the arena,
// so one pass in index order renumbers them).
void Matcher::compact() {
  std::vector<int32_t> remap(nodes_.size(), -1);
  for (int32_t h : state_.heads)
    for (int32_t n = h; n >= 0 && remap[n] == -1; n = nodes_[n].parent) remap[n] = 0;
  std::vector<Node> kept;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (remap[i] == -1) continue;
    Node n = nodes_[i];
    if (n.parent >= 0) n.parent = remap[n.parent];
    remap[i] = static_cast<int32_t>(kept.size());
    kept.push_back(n);
  }
  for (int32_t& h : state_.heads)
    if (h >= 0) h = remap[h];
  nodes_ = std::move(kept);
}

}  // namespace ptn::grammar
