#include "grammar/token_mask.h"

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace ptn::grammar {

// Sorted pieces are the trie's preorder: each piece adds one node per byte past its common prefix
// with the previous piece.
TokenTrie::TokenTrie(const Tokenizer& tok) {
  vocab_size_ = tok.vocab_size();
  // Harmony (gpt-oss) headers are control tokens a grammar may spell out (a forced tool call
  // is "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}"): these three
  // take part as their text, so the model writes them as the tokens it was trained on.
  const bool harmony = tok.token_id("<|return|>") && tok.token_id("<|call|>");
  std::vector<std::pair<std::string, int32_t>> pieces;
  for (int32_t id = 0; id < vocab_size_; ++id) {
    if (tok.is_eog(id)) {
      eog_.push_back(id);
      continue;
    }
    if (tok.is_control(id)) {
      const std::string& text = tok.token_text(id);
      if (!harmony || (text != "<|channel|>" && text != "<|message|>" && text != "<|constrain|>")) continue;
      control_.push_back(id);
      pieces.emplace_back(text, id);
      continue;
    }
    std::string piece = tok.token_piece(id);
    if (piece.empty() || piece.size() > UINT16_MAX) continue;
    pieces.emplace_back(std::move(piece), id);
  }
  std::sort(pieces.begin(), pieces.end());
  nodes_.push_back({0, 0, 0, 0, 0});
  std::vector<uint32_t> path = {0};  // node index per depth of the current piece
  const std::string* prev = nullptr;
  for (const auto& [piece, id] : pieces) {
    size_t common = 0;
    if (prev)
      while (common < prev->size() && common < piece.size() && (*prev)[common] == piece[common]) ++common;
    path.resize(common + 1);
    for (size_t d = common; d < piece.size(); ++d) {
      uint32_t at = static_cast<uint32_t>(ids_.size());
      nodes_.push_back({static_cast<uint8_t>(piece[d]), static_cast<uint16_t>(d + 1), 0, at, at});
      path.push_back(static_cast<uint32_t>(nodes_.size() - 1));
    }
    ids_.push_back(id);
    nodes_[path.back()].tok_end = static_cast<uint32_t>(ids_.size());
    max_depth_ = std::max(max_depth_, piece.size());
    prev = &piece;
  }
  // skip: the next node at the same or a smaller depth (a stack of open subtrees).
  std::vector<uint32_t> open;
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    while (!open.empty() && nodes_[open.back()].depth >= nodes_[i].depth) {
      nodes_[open.back()].skip = i;
      open.pop_back();
    }
    open.push_back(i);
  }
  for (uint32_t i : open) nodes_[i].skip = static_cast<uint32_t>(nodes_.size());
}

namespace {

// The states one compute_mask meets, interned by their canonical key (Matcher::state_key), and
// the transitions between them found so far: a lazily built automaton. Inside a JSON string the
// state after a content character is the state before it, so the whole trie is walked through
// a handful of states and almost every node is one table read instead of a matcher step.
class StateCache {
 public:
  static constexpr int32_t kUnknown = -2;  // transition not computed yet (-1: the byte is refused)

  void reset(size_t dense_states) {
    dense_ = dense_states;
    pool_.clear();
    off_.assign(1, 0);
    table_.assign(1024, -1);
    rows_.clear();
    far_.clear();
  }
  size_t size() const { return off_.size() - 1; }
  size_t key_words() const { return pool_.size(); }
  const uint32_t* key(int32_t id) const { return pool_.data() + off_[id]; }

  // The id of the state with this key, added if new.
  int32_t intern(const std::vector<uint32_t>& k) {
    const uint64_t h = hash(k);
    size_t mask = table_.size() - 1;
    for (size_t at = h & mask;; at = (at + 1) & mask) {
      const int32_t id = table_[at];
      if (id < 0) break;
      const uint32_t len = off_[id + 1] - off_[id];
      if (len == k.size() && std::equal(k.begin(), k.end(), pool_.begin() + off_[id])) return id;
    }
    const int32_t id = static_cast<int32_t>(size());
    pool_.insert(pool_.end(), k.begin(), k.end());
    off_.push_back(static_cast<uint32_t>(pool_.size()));
    if (static_cast<size_t>(id) < dense_) rows_.resize(rows_.size() + 256, kUnknown);
    if (size() * 2 > table_.size()) {
      rehash();
    } else {
      mask = table_.size() - 1;
      size_t at = h & mask;
      while (table_[at] >= 0) at = (at + 1) & mask;
      table_[at] = id;
    }
    return id;
  }

  int32_t next(int32_t from, uint8_t b) const {
    if (static_cast<size_t>(from) < dense_) return rows_[static_cast<size_t>(from) * 256 + b];
    auto it = far_.find(static_cast<uint64_t>(from) << 8 | b);
    return it == far_.end() ? kUnknown : it->second;
  }
  void set_next(int32_t from, uint8_t b, int32_t to) {
    if (static_cast<size_t>(from) < dense_)
      rows_[static_cast<size_t>(from) * 256 + b] = to;
    else
      far_[static_cast<uint64_t>(from) << 8 | b] = to;
  }

 private:
  static uint64_t hash(const std::vector<uint32_t>& k) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ k.size();
    for (uint32_t v : k) h = (h ^ v) * 0xFF51AFD7ED558CCDull, h ^= h >> 29;
    return h;
  }
  void rehash() {
    table_.assign(table_.size() * 2, -1);
    const size_t mask = table_.size() - 1;
    std::vector<uint32_t> k;
    for (size_t id = 0; id < size(); ++id) {
      k.assign(pool_.begin() + off_[id], pool_.begin() + off_[id + 1]);
      size_t at = hash(k) & mask;
      while (table_[at] >= 0) at = (at + 1) & mask;
      table_[at] = static_cast<int32_t>(id);
    }
  }

  size_t dense_ = 0;              // states below this keep a 256-entry row of transitions
  std::vector<uint32_t> pool_;    // the keys, one after the other
  std::vector<uint32_t> off_;     // key i is pool_[off_[i], off_[i + 1])
  std::vector<int32_t> table_;    // open addressing over the keys (-1: empty)
  std::vector<int32_t> rows_;     // dense transitions
  std::unordered_map<uint64_t, int32_t> far_;  // transitions of the other states
};

}  // namespace

// The automaton, kept from one compute_mask to the next, and the last masks by root state.
struct MaskCache::Impl {
  StateCache cache;
  const Grammar* grammar = nullptr;
  const TokenTrie* trie = nullptr;
  size_t dense = 0;
  std::vector<uint32_t> key;
  std::vector<int32_t> path;  // path[d]: the state after the first d bytes of the current path
  Matcher::State from, to;
  struct Kept {
    int32_t root = -1;
    uint64_t used = 0;
    std::vector<uint8_t> mask;  // without the end-of-generation tokens
  };
  Kept kept[4];
  uint64_t clock = 0;
};

MaskCache::MaskCache() : impl_(std::make_unique<Impl>()) {}
MaskCache::~MaskCache() = default;

namespace {

// Bounds on what a cache keeps before it starts over: states and their keys' total length.
constexpr size_t kMaxStates = 1 << 16;
constexpr size_t kMaxKeyWords = 1 << 23;  // 32 MB

// The walk without the cache: the matcher stepped at every node (states[d] after d bytes, in an
// arena cut back to marks[d]). Taken when one walk alone would grow the cache past its bound.
void walk_plain(Matcher& m, const TokenTrie& trie, std::vector<uint8_t>& allowed) {
  allowed.assign(static_cast<size_t>(trie.vocab_size()), 0);
  const auto& nodes = trie.nodes();
  const auto& ids = trie.token_ids();
  std::vector<Matcher::State> states(trie.max_depth() + 1);
  std::vector<size_t> marks(trie.max_depth() + 1);
  states[0] = m.state();
  marks[0] = m.arena_mark();
  for (uint32_t i = 1; i < nodes.size();) {
    const TokenTrie::Node& n = nodes[i];
    m.arena_reset(marks[n.depth - 1]);
    if (!m.step(states[n.depth - 1], n.byte, states[n.depth])) {
      i = n.skip;
      continue;
    }
    marks[n.depth] = m.arena_mark();
    for (uint32_t k = n.tok_begin; k < n.tok_end; ++k) allowed[ids[k]] = 1;
    ++i;
  }
  m.arena_reset(marks[0]);
  const bool complete = m.is_complete();
  for (int32_t id : trie.eog_ids()) allowed[id] = complete ? 1 : 0;
}

void walk(MaskCache::Impl& s, Matcher& m, const TokenTrie& trie, std::vector<uint8_t>& allowed, size_t dense_states,
          size_t max_key_words) {
  if (s.grammar != &m.grammar() || s.trie != &trie || s.dense != dense_states || s.cache.size() > kMaxStates ||
      s.cache.key_words() > max_key_words) {
    s.cache.reset(dense_states);
    s.grammar = &m.grammar();
    s.trie = &trie;
    s.dense = dense_states;
    for (auto& k : s.kept) k.root = -1;
  }
  const auto& nodes = trie.nodes();
  const auto& ids = trie.token_ids();
  const size_t base = m.arena_mark();
  struct Reset {
    Matcher& m;
    size_t mark;
    ~Reset() { m.arena_reset(mark); }
  } reset{m, base};

  s.key.clear();
  m.state_key(m.state(), s.key);
  const int32_t root = s.cache.intern(s.key);
  const bool complete = m.is_complete();
  MaskCache::Impl::Kept* slot = &s.kept[0];
  for (auto& k : s.kept) {
    if (k.root == root) {
      k.used = ++s.clock;
      allowed = k.mask;
      for (int32_t id : trie.eog_ids()) allowed[id] = complete ? 1 : 0;
      return;
    }
    if (k.used < slot->used) slot = &k;
  }
  allowed.assign(static_cast<size_t>(trie.vocab_size()), 0);
  s.path.assign(trie.max_depth() + 1, 0);
  s.path[0] = root;
  int32_t built = root;  // the state whose nodes are in the arena (root: m.state())
  size_t built_mark = base;
  for (uint32_t i = 1; i < nodes.size();) {
    const TokenTrie::Node& n = nodes[i];
    const int32_t from = s.path[n.depth - 1];
    int32_t to = s.cache.next(from, n.byte);
    if (to == StateCache::kUnknown) {
      if (from != built) {
        m.arena_reset(base);
        if (from != root) m.state_from_key(s.cache.key(from), s.from);
        built = from;
        built_mark = m.arena_mark();
      }
      to = -1;
      if (m.step(from == root ? m.state() : s.from, n.byte, s.to)) {
        s.key.clear();
        m.state_key(s.to, s.key);
        to = s.cache.intern(s.key);
        if (s.cache.key_words() > max_key_words) {  // too many distinct states: drop the cache
          s.cache = StateCache();
          s.grammar = nullptr;
          m.arena_reset(base);
          walk_plain(m, trie, allowed);
          return;
        }
      }
      m.arena_reset(built_mark);
      s.cache.set_next(from, n.byte, to);
    }
    if (to < 0) {
      i = n.skip;
      continue;
    }
    s.path[n.depth] = to;
    for (uint32_t k = n.tok_begin; k < n.tok_end; ++k) allowed[ids[k]] = 1;
    ++i;
  }
  for (int32_t id : trie.eog_ids()) allowed[id] = 0;
  slot->root = root;
  slot->used = ++s.clock;
  slot->mask = allowed;
  for (int32_t id : trie.eog_ids()) allowed[id] = complete ? 1 : 0;
}

}  // namespace

namespace detail {

void compute_mask(Matcher& m, const TokenTrie& trie, std::vector<uint8_t>& allowed, MaskCache& cache,
                  size_t dense_states, size_t max_key_words) {
  walk(cache.impl(), m, trie, allowed, dense_states, max_key_words);
}

}  // namespace detail

void compute_mask(Matcher& m, const TokenTrie& trie, std::vector<uint8_t>& allowed, MaskCache& cache) {
  walk(cache.impl(), m, trie, allowed, 4096, kMaxKeyWords);
}

void compute_mask(Matcher& m, const TokenTrie& trie, std::vector<uint8_t>& allowed) {
  MaskCache cache;
  walk(cache.impl(), m, trie, allowed, 4096, kMaxKeyWords);
}

GrammarProcessor::GrammarProcessor(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                                   const Tokenizer& tokenizer, const MatcherLimits& limits)
    : trie_(std::move(trie)), tok_(tokenizer), matcher_(std::move(grammar), limits) {
  PTN_CHECK(trie_ && trie_->vocab_size() == tokenizer.vocab_size(), ErrorKind::InvalidArgument, "grammar",
            "the token trie was built for another tokenizer");
}

void GrammarProcessor::apply(float* logits, int64_t n_vocab) {
  compute_mask(matcher_, *trie_, allowed_, cache_);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const int64_t n = std::min<int64_t>(n_vocab, static_cast<int64_t>(allowed_.size()));
  for (int64_t i = 0; i < n; ++i)
    if (!allowed_[static_cast<size_t>(i)]) logits[i] = neg_inf;
  for (int64_t i = n; i < n_vocab; ++i) logits[i] = neg_inf;
}

void GrammarProcessor::accept(int32_t token) {
  PTN_CHECK(token >= 0 && token < tok_.vocab_size(), ErrorKind::InvalidArgument, "grammar",
            "token " + std::to_string(token) + " is out of the vocabulary");
  if (tok_.is_eog(token)) {
    PTN_CHECK(matcher_.is_complete(), ErrorKind::InvalidArgument, "grammar",
              "end of generation before the grammar is complete");
    ended_ = true;
    return;
  }
  const bool ok = !tok_.is_control(token) ? matcher_.accept(tok_.token_piece(token))
                                          : trie_->allows_control(token) && matcher_.accept(tok_.token_text(token));
  PTN_CHECK(ok, ErrorKind::InvalidArgument, "grammar",
            "token " + std::to_string(token) + " is not allowed by the grammar here");
}

}  // namespace ptn::grammar
