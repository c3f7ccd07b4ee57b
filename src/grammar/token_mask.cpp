#include "grammar/token_mask.h"

#include <algorithm>
#include <limits>
#include <string>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace ptn::grammar {

// Sorted pieces are the trie's preorder: each piece adds one node per byte past its common prefix
// with the previous piece.
TokenTrie::TokenTrie(const Tokenizer& tok) {
  vocab_size_ = tok.vocab_size();
  std::vector<std::pair<std::string, int32_t>> pieces;
  for (int32_t id = 0; id < vocab_size_; ++id) {
    if (tok.is_eog(id)) {
      eog_.push_back(id);
      continue;
    }
    if (tok.is_control(id)) continue;
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

void compute_mask(Matcher& m, const TokenTrie& trie, std::vector<uint8_t>& allowed) {
  allowed.assign(static_cast<size_t>(trie.vocab_size()), 0);
  const auto& nodes = trie.nodes();
  const auto& ids = trie.token_ids();
  // states[d]: the state after the first d bytes of the current path; marks[d]: the arena then.
  std::vector<Matcher::State> states(trie.max_depth() + 1);
  std::vector<size_t> marks(trie.max_depth() + 1);
  states[0] = m.state();
  marks[0] = m.arena_mark();
  const size_t base = marks[0];
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
  m.arena_reset(base);
  const bool complete = m.is_complete();
  for (int32_t id : trie.eog_ids()) allowed[id] = complete ? 1 : 0;
}

GrammarProcessor::GrammarProcessor(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                                   const Tokenizer& tokenizer, const MatcherLimits& limits)
    : trie_(std::move(trie)), tok_(tokenizer), matcher_(std::move(grammar), limits) {
  PTN_CHECK(trie_ && trie_->vocab_size() == tokenizer.vocab_size(), ErrorKind::InvalidArgument, "grammar",
            "the token trie was built for another tokenizer");
}

void GrammarProcessor::apply(float* logits, int64_t n_vocab) {
  compute_mask(matcher_, *trie_, allowed_);
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
  const bool ok = !tok_.is_control(token) && matcher_.accept(tok_.token_piece(token));
  PTN_CHECK(ok, ErrorKind::InvalidArgument, "grammar",
            "token " + std::to_string(token) + " is not allowed by the grammar here");
}

}  // namespace ptn::grammar
