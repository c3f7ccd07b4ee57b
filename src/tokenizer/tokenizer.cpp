#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "tokenizer/normalize.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode_props.h"
#include "tokenizer/utf8.h"

namespace ptn {

namespace {

constexpr size_t kMaxVocab = 16u << 20;        // tokens
constexpr size_t kMaxTokenBytes = 64u << 10;   // bytes of one token's text
constexpr size_t kWordCacheEntries = 1u << 16; // BPE words remembered (cleared when full)
constexpr size_t kCacheableWordBytes = 256;    // longer words are not cached
const char* const kSpace = "\xE2\x96\x81";     // ▁ U+2581

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  size_t i = 0;
  while (i < s.size()) {
    if (s.compare(i, from.size(), from) == 0) {
      out += to;
      i += from.size();
    } else {
      out += s[i++];
    }
  }
  return out;
}

// "<0xAB>" -> 0xAB, or -1.
int parse_byte_token(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  int v = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = t[i];
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return -1;
    v = v * 16 + d;
  }
  return v;
}

// A byte trie over the added tokens, for leftmost-longest matching in the text.
class AddedTokenTrie {
 public:
  void insert(std::string_view text, int32_t id, bool needs_parse_special) {
    int32_t node = 0;
    for (unsigned char c : text) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | c;
      auto it = edges_.find(key);
      if (it == edges_.end()) {
        nodes_.push_back({});
        it = edges_.emplace(key, static_cast<int32_t>(nodes_.size() - 1)).first;
      }
      node = it->second;
    }
    first_byte_[static_cast<unsigned char>(text[0])] = true;
    auto& n = nodes_[node];
    if (n.id < 0 || (n.needs_parse_special && !needs_parse_special)) {
      n.id = id;
      n.needs_parse_special = needs_parse_special;
    }
  }
  bool empty() const { return nodes_.size() == 1; }
  // Longest token starting at text[pos] that may be used; returns its length (0: none).
  size_t match(std::string_view text, size_t pos, bool parse_special, int32_t* id) const {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) return 0;
    int32_t node = 0;
    size_t best = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(text[i]);
      auto it = edges_.find(key);
      if (it == edges_.end()) break;
      node = it->second;
      const auto& n = nodes_[node];
      if (n.id >= 0 && (parse_special || !n.needs_parse_special)) {
        best = i + 1 - pos;
        *id = n.id;
      }
    }
    return best;
  }

 private:
  struct Node {
    int32_t id = -1;
    bool needs_parse_special = false;
  };
  std::vector<Node> nodes_{Node{}};
  std::unordered_map<uint64_t, int32_t> edges_;
  std::array<bool, 256> first_byte_{};
};

// Hash for string maps that can be searched with a string_view (no temporary std::string).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

struct MergeInfo {
  int32_t rank;
  int32_t id;  // the token the pair becomes
};

// Open-addressing table (left id, right id) -> MergeInfo: merges are looked up for every
// adjacent pair of every word, so they live in one flat array (no node per entry).
class MergeTable {
 public:
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap *= 2;
    keys_.assign(cap, kEmpty);
    vals_.assign(cap, {});
    mask_ = cap - 1;
  }
  // Keeps the first value given for a key (the lowest rank).
  void insert(int32_t a, int32_t b, MergeInfo v) {
    if ((size_ + 1) * 2 > keys_.size()) grow();
    const uint64_t k = key(a, b);
    for (size_t i = slot(k);; i = (i + 1) & mask_) {
      if (keys_[i] == k) return;
      if (keys_[i] == kEmpty) {
        keys_[i] = k;
        vals_[i] = v;
        ++size_;
        return;
      }
    }
  }
  const MergeInfo* find(int32_t a, int32_t b) const {
    if (size_ == 0) return nullptr;
    const uint64_t k = key(a, b);
    for (size_t i = slot(k);; i = (i + 1) & mask_) {
      if (keys_[i] == k) return &vals_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // ids are >= 0, so never a real key
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  size_t slot(uint64_t k) const {
    k ^= k >> 33;  // murmur3 finalizer
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return static_cast<size_t>(k) & mask_;
  }
  void grow() {
    std::vector<uint64_t> keys = std::move(keys_);
    std::vector<MergeInfo> vals = std::move(vals_);
    reserve(std::max<size_t>(16, keys.size()));
    size_ = 0;
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] != kEmpty) insert(static_cast<int32_t>(keys[i] >> 32), static_cast<int32_t>(keys[i] & 0xFFFFFFFFu), vals[i]);
  }
  std::vector<uint64_t> keys_;
  std::vector<MergeInfo> vals_;
  size_t mask_ = 0, size_ = 0;
};

// One symbol of a word during merging: bytes [start, start+len) of the word.
struct Symbol {
  uint32_t start, len;
  int32_t id;  // -1: no token for these bytes
  int32_t prev, next;
};

struct Candidate {
  double priority;  // lower merges first
  int32_t left;
  uint32_t left_len, right_len;
  int32_t id;
};
struct CandidateWorse {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.priority > b.priority || (a.priority == b.priority && a.left > b.left);
  }
};

}  // namespace

struct Tokenizer::Impl {
  TokenizerSpec spec;
  std::vector<TokenType> types;
  StringMap<int32_t> token_to_id;
  std::vector<std::string> pieces;     // id -> decoded bytes
  std::array<int32_t, 256> byte_token; // SPM: byte -> <0xXX> id, or -1
  MergeTable merges;                   // (left id, right id) -> merge
  bool use_ranks = false;              // SPM from tokenizer.json: merges by rank, not by score
  bool ignore_merges = false;
  bool nfc = false;
  std::unique_ptr<tok::RegexSplitter> splitter;
  AddedTokenTrie added;
  std::unordered_set<int32_t> eog;
  std::unordered_set<int32_t> lstrip, rstrip;  // added tokens that swallow neighbouring whitespace

  mutable std::mutex cache_mu;
  mutable StringMap<std::vector<int32_t>> word_cache;

  size_t max_token_bytes = 0;
  bool spm() const { return spec.kind == TokenizerKind::SentencePiece; }
  bool wpm() const { return spec.kind == TokenizerKind::WordPiece; }
  // decode drops the space that starts the text: SPM's added ▁, WordPiece's word-initial ▁.
  bool strips_leading_space() const { return (spm() && spec.add_space_prefix) || wpm(); }
  int32_t n() const { return static_cast<int32_t>(spec.tokens.size()); }
  int32_t lookup(std::string_view s) const {
    auto it = token_to_id.find(s);
    return it == token_to_id.end() ? -1 : it->second;
  }

  void build();
  void merge_word(std::string_view word, std::vector<Symbol>& syms) const;
  // at_text_start: the fragment begins the whole text (not after an added token).
  void encode_spm(std::string_view text, bool at_text_start, std::vector<int32_t>& out) const;
  void encode_bpe(std::string_view text, std::vector<int32_t>& out) const;
  void encode_bpe_word(std::string_view word, std::vector<int32_t>& out) const;
  void encode_wpm(std::string_view text, std::vector<int32_t>& out) const;
  void encode_wpm_word(const std::vector<uint32_t>& word, std::vector<int32_t>& out) const;
  void push_unknown(std::vector<int32_t>& out) const {
    if (spec.unk_id) out.push_back(*spec.unk_id);
  }
};

void Tokenizer::Impl::build() {
  const std::string where = "tokenizer";
  const size_t count = spec.tokens.size();
  PTN_CHECK(count > 0, ErrorKind::InvalidArgument, where, "the vocabulary is empty");
  PTN_CHECK(count <= kMaxVocab, ErrorKind::InvalidArgument, where,
            std::to_string(count) + " tokens exceed the limit of " + std::to_string(kMaxVocab));
  PTN_CHECK(spec.scores.empty() || spec.scores.size() == count, ErrorKind::InvalidArgument, where + ": scores",
            std::to_string(spec.scores.size()) + " scores for " + std::to_string(count) + " tokens");
  PTN_CHECK(spec.token_types.empty() || spec.token_types.size() == count, ErrorKind::InvalidArgument,
            where + ": token_types",
            std::to_string(spec.token_types.size()) + " types for " + std::to_string(count) + " tokens");
  auto check_id = [&](const std::optional<int32_t>& id, const char* name) {
    if (id && (*id < 0 || *id >= n()))
      fail(ErrorKind::InvalidArgument, where + ": " + name,
           "id " + std::to_string(*id) + " is outside the vocabulary of " + std::to_string(count));
  };
  check_id(spec.bos_id, "bos_id");
  check_id(spec.eos_id, "eos_id");
  check_id(spec.unk_id, "unk_id");
  check_id(spec.pad_id, "pad_id");
  check_id(spec.eot_id, "eot_id");
  for (int32_t e : spec.extra_eos_ids) check_id(e, "extra_eos_ids");
  if (spec.add_bos) PTN_CHECK(spec.bos_id.has_value(), ErrorKind::InvalidArgument, where, "add_bos without a bos id");
  if (spec.add_eos) PTN_CHECK(spec.eos_id.has_value(), ErrorKind::InvalidArgument, where, "add_eos without an eos id");
  if (spec.normalizer == "nfc") nfc = true;
  else PTN_CHECK(spec.normalizer.empty(), ErrorKind::Unsupported, where + ": normalizer", "'" + spec.normalizer + "' (only nfc)");

  types.resize(count, TokenType::Normal);
  for (size_t i = 0; i < count; ++i) {
    if (!spec.token_types.empty()) {
      const auto t = static_cast<int32_t>(spec.token_types[i]);
      PTN_CHECK(t >= 1 && t <= 6, ErrorKind::InvalidArgument, where + ": token_types",
                "token " + std::to_string(i) + " has type " + std::to_string(t));
      types[i] = spec.token_types[i];
    }
  }
  if (spec.unk_id && spec.token_types.empty()) types[*spec.unk_id] = TokenType::Unknown;

  token_to_id.reserve(count * 2);
  byte_token.fill(-1);
  pieces.resize(count);
  const auto& blm = tok::byte_level_map();
  for (size_t i = 0; i < count; ++i) {
    const std::string& t = spec.tokens[i];
    const auto id = static_cast<int32_t>(i);
    PTN_CHECK(t.size() <= kMaxTokenBytes, ErrorKind::InvalidArgument, where,
              "token " + std::to_string(i) + " is " + std::to_string(t.size()) + " bytes long");
    if (!t.empty()) token_to_id.emplace(t, id);  // the first of duplicate texts wins
    max_token_bytes = std::max(max_token_bytes, t.size());
    TokenType& ty = types[i];
    if (spm() && ty == TokenType::Normal && spec.token_types.empty() && parse_byte_token(t) >= 0) ty = TokenType::Byte;
    if (ty == TokenType::Byte && spm()) {
      const int b = parse_byte_token(t);
      PTN_CHECK(b >= 0, ErrorKind::InvalidArgument, where, "byte token " + std::to_string(i) + " is not <0xXX>: '" + t + "'");
      if (byte_token[b] < 0) byte_token[b] = id;
      pieces[i] = std::string(1, static_cast<char>(b));
      continue;
    }
    switch (ty) {
      case TokenType::Control:
      case TokenType::Unknown:
      case TokenType::UserDefined:
        pieces[i] = t;
        if (!t.empty()) added.insert(t, id, ty != TokenType::UserDefined);
        break;
      case TokenType::Unused:
        pieces[i].clear();
        break;
      default:
        if (spm() || wpm()) {
          pieces[i] = replace_all(t, kSpace, " ");
        } else {
          // Byte-level characters back to bytes; a character outside the map stays as written.
          std::string out;
          size_t p = 0;
          while (p < t.size()) {
            size_t len = tok::utf8_valid_length(t, p);
            if (len == 0) {
              out += t[p++];
              continue;
            }
            const int32_t b = blm.cp_to_byte(tok::decode_utf8(t, p, len));
            if (b >= 0) out += static_cast<char>(b);
            else out.append(t, p, len);
            p += len;
          }
          pieces[i] = std::move(out);
        }
    }
  }

  // Merges "a b" in rank order -> (id(a), id(b)) -> (rank, id(ab)).
  use_ranks = !spec.merges.empty();
  PTN_CHECK(spm() || wpm() || use_ranks, ErrorKind::InvalidArgument, where, "a byte-level BPE tokenizer needs merges");
  if (wpm()) PTN_CHECK(spec.unk_id.has_value(), ErrorKind::InvalidArgument, where, "a WordPiece tokenizer needs an unknown token");
  // SentencePiece without merges merges by score; without scores every pair ties (leftmost first).
  if (spm() && !use_ranks && spec.scores.empty()) spec.scores.assign(count, 0.0f);
  merges.reserve(spec.merges.size());
  for (size_t r = 0; r < spec.merges.size(); ++r) {
    const std::string& m = spec.merges[r];
    // Normally exactly one space; if a token itself holds spaces, take the first cut whose halves
    // and whole are tokens.
    int32_t a = -1, b = -1;
    for (size_t cut = m.find(' '); cut != std::string::npos; cut = m.find(' ', cut + 1)) {
      a = lookup(std::string_view(m).substr(0, cut));
      b = lookup(std::string_view(m).substr(cut + 1));
      if (a >= 0 && b >= 0) break;
    }
    if (a < 0 || b < 0) continue;  // refers to tokens outside the vocabulary: never applies
    const int32_t ab = lookup(spec.tokens[a] + spec.tokens[b]);
    if (ab < 0) continue;
    merges.insert(a, b, MergeInfo{static_cast<int32_t>(r), ab});
  }

  if (spec.kind == TokenizerKind::ByteLevelBPE) {
    std::vector<std::string> patterns;
    if (spec.pre_split_explicit) {
      patterns = spec.pre_split_regexes;
    } else if (!spec.pre_split_regexes.empty()) {
      patterns = spec.pre_split_regexes;
    } else {
      patterns = tok::pre_tokenizer_patterns(spec.pre_tokenizer);
    }
    splitter = std::make_unique<tok::RegexSplitter>(patterns);
    // Qwen's tokenizer.json normalizes to NFC; GGUF files do not say so, their pre name does.
    if (!spec.pre_split_explicit && spec.pre_tokenizer == "qwen2") nfc = true;
    const std::string& p = spec.pre_tokenizer;
    ignore_merges = spec.ignore_merges || (!spec.pre_split_explicit && tok::pre_tokenizer_ignores_merges(p));
  }

  for (int32_t id : spec.lstrip_ids) check_id(id, "lstrip_ids"), lstrip.insert(id);
  for (int32_t id : spec.rstrip_ids) check_id(id, "rstrip_ids"), rstrip.insert(id);

  // End of generation: what the spec names, and the end-of-turn markers of the common chat
  // formats, which GGUF files often do not name.
  for (const char* marker : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>"}) {
    const int32_t id = lookup(marker);
    if (id >= 0 && types[id] != TokenType::Normal) eog.insert(id);
  }
  if (spec.eos_id) eog.insert(*spec.eos_id);
  if (spec.eot_id) eog.insert(*spec.eot_id);
  for (int32_t e : spec.extra_eos_ids) eog.insert(e);
  // Harmony (gpt-oss): <|end|> ends a message (the analysis, say) but not the reply, which ends
  // at <|return|> or at a tool call's <|call|> (llama.cpp drops <|end|> from its list likewise).
  const int32_t ret = lookup("<|return|>"), call = lookup("<|call|>");
  if (ret >= 0 && call >= 0 && types[ret] != TokenType::Normal && types[call] != TokenType::Normal) {
    eog.insert(ret);
    eog.insert(call);
    if (const int32_t end = lookup("<|end|>"); end >= 0) eog.erase(end);
  }
}

// Merges adjacent symbols of `word`, best pair first (lowest rank, or highest score), leftmost
// on ties, until no pair forms a token.
void Tokenizer::Impl::merge_word(std::string_view word, std::vector<Symbol>& syms) const {
  std::priority_queue<Candidate, std::vector<Candidate>, CandidateWorse> queue;
  auto consider = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const Symbol& a = syms[l];
    const Symbol& b = syms[r];
    if (use_ranks) {
      if (a.id < 0 || b.id < 0) return;
      const MergeInfo* m = merges.find(a.id, b.id);
      if (!m) return;
      queue.push({static_cast<double>(m->rank), l, a.len, b.len, m->id});
    } else {
      const int32_t id = lookup(word.substr(a.start, a.len + b.len));
      if (id < 0) return;
      const TokenType t = types[id];
      if (t == TokenType::Control || t == TokenType::Byte || t == TokenType::Unknown) return;
      queue.push({-static_cast<double>(spec.scores[id]), l, a.len, b.len, id});
    }
  };
  for (size_t i = 1; i < syms.size(); ++i) consider(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = syms[c.left];
    if (l.len != c.left_len || l.next < 0) continue;  // stale: the left symbol changed
    Symbol& r = syms[l.next];
    if (r.len != c.right_len) continue;
    l.len += r.len;
    l.id = c.id;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }
}

void Tokenizer::Impl::encode_spm(std::string_view fragment, bool at_text_start, std::vector<int32_t>& out) const {
  std::string text;
  text.reserve(fragment.size() + 8);
  if (spec.add_space_prefix && (at_text_start || !spec.space_prefix_first_only)) text += ' ';
  text += fragment;
  text = replace_all(text, " ", kSpace);
  if (nfc) text = tok::nfc_normalize(text);

  std::vector<Symbol> syms;
  syms.reserve(text.size());
  for (size_t p = 0; p < text.size();) {
    size_t len = tok::utf8_valid_length(text, p);
    if (len == 0) len = 1;  // a stray byte is a symbol of its own (byte fallback)
    const auto idx = static_cast<int32_t>(syms.size());
    syms.push_back({static_cast<uint32_t>(p), static_cast<uint32_t>(len), lookup(std::string_view(text).substr(p, len)),
                    idx - 1, p + len < text.size() ? idx + 1 : -1});
    p += len;
  }
  if (syms.empty()) return;
  merge_word(text, syms);
  for (int32_t i = 0; i >= 0; i = syms[i].next) {
    const Symbol& s = syms[i];
    if (s.id >= 0) {
      out.push_back(s.id);
      continue;
    }
    bool all_bytes = spec.byte_fallback;
    for (uint32_t k = 0; all_bytes && k < s.len; ++k)
      all_bytes = byte_token[static_cast<uint8_t>(text[s.start + k])] >= 0;
    if (all_bytes) {
      for (uint32_t k = 0; k < s.len; ++k) out.push_back(byte_token[static_cast<uint8_t>(text[s.start + k])]);
    } else {
      push_unknown(out);
    }
  }
}

void Tokenizer::Impl::encode_bpe_word(std::string_view word, std::vector<int32_t>& out) const {
  const bool cacheable = word.size() <= kCacheableWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu);
    auto it = word_cache.find(word);
    if (it != word_cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const auto& blm = tok::byte_level_map();
  std::string mapped;
  mapped.reserve(word.size() * 2);
  for (unsigned char c : word) mapped += blm.byte_to_utf8[c];

  std::vector<int32_t> ids;
  const int32_t whole = ignore_merges ? lookup(mapped) : -1;
  if (whole >= 0) {
    ids.push_back(whole);
  } else {
    std::vector<Symbol> syms;
    syms.reserve(word.size());
    size_t p = 0;
    for (unsigned char c : word) {
      const auto len = static_cast<uint32_t>(blm.byte_to_utf8[c].size());
      const auto idx = static_cast<int32_t>(syms.size());
      syms.push_back({static_cast<uint32_t>(p), len, lookup(std::string_view(mapped).substr(p, len)), idx - 1,
                      idx + 1 < static_cast<int32_t>(word.size()) ? idx + 1 : -1});
      p += len;
    }
    merge_word(mapped, syms);
    for (int32_t i = 0; i >= 0; i = syms[i].next) {
      if (syms[i].id >= 0) ids.push_back(syms[i].id);
      else if (spec.unk_id) ids.push_back(*spec.unk_id);  // a byte without a token in this vocabulary
    }
  }
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu);
    if (word_cache.size() >= kWordCacheEntries) word_cache.clear();
    word_cache.emplace(std::string(word), std::move(ids));
  }
}

void Tokenizer::Impl::encode_bpe(std::string_view fragment, std::vector<int32_t>& out) const {
  std::string text;
  if (spec.bpe_add_prefix_space && (fragment.empty() || fragment[0] != ' ')) text = " ";
  text += fragment;
  if (nfc) text = tok::nfc_normalize(text);
  for (std::string_view word : splitter->split(text)) encode_bpe_word(word, out);
}

namespace {

bool is_cjk(uint32_t cp) {  // the CJK ideograph blocks that BERT isolates
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

bool is_bert_space(uint32_t cp) {
  return cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x85 ||
         cp == 0x2028 || cp == 0x2029 || (tok::unicode_flags(cp) & tok::kSpaceSeparator);
}

bool is_bert_punct(uint32_t cp) {
  return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126) ||
         (tok::unicode_flags(cp) & tok::kPunctuation);
}

}  // namespace

// BERT normalization (drop NUL, U+FFFD and control characters; lowercase; NFD; drop accents),
// then words split at whitespace, with every punctuation mark and CJK ideograph a word of its own.
void Tokenizer::Impl::encode_wpm(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  for (size_t p = 0; p < text.size();) {
    const size_t n = tok::utf8_valid_length(text, p);
    if (n == 0) {  // ill-formed bytes are U+FFFD, which BERT drops
      p += tok::utf8_maximal_subpart(text, p);
      continue;
    }
    const uint32_t cp = tok::decode_utf8(text, p, n);
    p += n;
    if (cp == 0 || cp == 0xFFFD) continue;
    if (is_bert_space(cp)) {
      cps.push_back(' ');
      continue;
    }
    if (tok::unicode_flags(cp) & tok::kOther) continue;
    tok::append_lowercase(cp, cps);
  }
  tok::nfd(cps);
  std::vector<uint32_t> word;
  auto flush = [&] {
    if (!word.empty()) encode_wpm_word(word, out);
    word.clear();
  };
  for (uint32_t cp : cps) {
    if (tok::unicode_flags(cp) & tok::kNonspacingMark) continue;
    if (is_bert_space(cp)) {
      flush();
    } else if (is_bert_punct(cp) || is_cjk(cp)) {
      flush();
      word.push_back(cp);
      flush();
    } else {
      word.push_back(cp);
    }
  }
  flush();
}

// Longest-match-first over the word; the first piece is looked up with ▁ before it. A word
// that cannot be covered, or is longer than 100 characters, is one unknown token.
void Tokenizer::Impl::encode_wpm_word(const std::vector<uint32_t>& word, std::vector<int32_t>& out) const {
  constexpr size_t kMaxWordChars = 100;
  if (word.size() > kMaxWordChars) {
    out.push_back(*spec.unk_id);
    return;
  }
  std::string s;
  std::vector<size_t> offs;  // byte offset of each character, plus the end
  for (uint32_t cp : word) {
    offs.push_back(s.size());
    tok::append_utf8(s, cp);
  }
  offs.push_back(s.size());
  const size_t first_out = out.size();
  size_t start = 0;  // in characters
  while (start < word.size()) {
    int32_t found = -1;
    size_t end = word.size();
    for (; end > start; --end) {
      const size_t bytes = offs[end] - offs[start];
      if (bytes > max_token_bytes) continue;
      const std::string_view piece = std::string_view(s).substr(offs[start], bytes);
      found = start == 0 ? lookup(std::string(kSpace) + std::string(piece)) : lookup(piece);
      if (found >= 0) break;
    }
    if (found < 0) {
      out.resize(first_out);
      out.push_back(*spec.unk_id);
      return;
    }
    out.push_back(found);
    start = end;
  }
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::create(const TokenizerSpec& spec) {
  auto impl = std::make_unique<Impl>();
  impl->spec = spec;
  impl->build();
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  return encode_impl(text, add_special, parse_special, {});
}

std::vector<int32_t> Tokenizer::encode_with_literals(std::string_view text, bool add_special,
                                                     const std::vector<ByteSpan>& literal) const {
  for (size_t i = 0; i < literal.size(); ++i)
    if (literal[i].begin > literal[i].end || literal[i].end > text.size() || (i && literal[i].begin < literal[i - 1].end))
      fail(ErrorKind::InvalidArgument, "tokenizer", "literal spans must be sorted, disjoint and inside the text");
  return encode_impl(text, add_special, true, literal);
}

std::vector<ByteSpan> Tokenizer::find_control_tokens(std::string_view text) const {
  const Impl& m = *impl_;
  std::vector<ByteSpan> out;
  if (m.added.empty()) return out;
  for (size_t pos = 0; pos < text.size();) {
    int32_t id = -1;
    const size_t len = m.added.match(text, pos, /*parse_special=*/true, &id);
    if (len == 0) {
      ++pos;
      continue;
    }
    if (is_control(id)) out.push_back({pos, pos + len});
    pos += len;
  }
  return out;
}

std::vector<int32_t> Tokenizer::encode_impl(std::string_view text, bool add_special, bool parse_special,
                                            const std::vector<ByteSpan>& literal) const {
  const Impl& m = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && m.spec.add_bos) out.push_back(*m.spec.bos_id);
  auto encode_text = [&](std::string_view frag) {
    if (frag.empty()) return;
    if (m.spm()) m.encode_spm(frag, frag.data() == text.data(), out);
    else if (m.wpm()) m.encode_wpm(frag, out);
    else m.encode_bpe(frag, out);
  };
  // Cut the added tokens out of the text, leftmost-longest; encode the text between them.
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  size_t start = 0, pos = 0, lit = 0;  // literal[lit]: the first span that ends after pos
  while (pos < text.size()) {
    int32_t id = -1;
    size_t len = 0;
    if (!m.added.empty()) {
      while (lit < literal.size() && literal[lit].end <= pos) ++lit;
      len = m.added.match(text, pos, parse_special, &id);
      // A control token may not start or end inside literal text (text that came from a request).
      if (len > 0 && lit < literal.size() && literal[lit].begin < pos + len && is_control(id))
        len = m.added.match(text, pos, /*parse_special=*/false, &id);
    }
    if (len == 0) {
      ++pos;
      continue;
    }
    size_t before_end = pos;
    if (m.lstrip.count(id))
      while (before_end > start && is_space(text[before_end - 1])) --before_end;
    encode_text(text.substr(start, before_end - start));
    out.push_back(id);
    pos += len;
    if (m.rstrip.count(id))
      while (pos < text.size() && is_space(text[pos])) ++pos;
    start = pos;
  }
  encode_text(text.substr(start));
  if (add_special && m.spec.add_eos) out.push_back(*m.spec.eos_id);
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string out;
  bool at_start = true;  // SPM: the first piece loses its leading space (the one encode added)
  for (int32_t id : ids) {
    if (is_control(id) && skip_special) continue;  // is_control checks the range
    const std::string& p = impl_->pieces[static_cast<size_t>(id)];
    if (p.empty()) continue;
    if (at_start && impl_->strips_leading_space() && p[0] == ' ')
      out.append(p, 1, std::string::npos);
    else
      out += p;
    at_start = false;
  }
  return out;
}

std::string Tokenizer::token_piece(int32_t id) const {
  (void)token_type(id);  // range check
  return impl_->pieces[static_cast<size_t>(id)];
}

const std::string& Tokenizer::token_text(int32_t id) const {
  (void)token_type(id);
  return impl_->spec.tokens[static_cast<size_t>(id)];
}

std::optional<int32_t> Tokenizer::token_id(std::string_view text) const {
  const int32_t id = impl_->lookup(text);
  if (id < 0) return std::nullopt;
  return id;
}

int32_t Tokenizer::vocab_size() const { return impl_->n(); }
TokenizerKind Tokenizer::kind() const { return impl_->spec.kind; }

TokenType Tokenizer::token_type(int32_t id) const {
  if (id < 0 || id >= impl_->n())
    fail(ErrorKind::InvalidArgument, "tokenizer",
         "token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(impl_->n()));
  return impl_->types[static_cast<size_t>(id)];
}

bool Tokenizer::is_control(int32_t id) const {
  const TokenType t = token_type(id);
  return t == TokenType::Control || t == TokenType::Unknown;
}

bool Tokenizer::is_eog(int32_t id) const { return impl_->eog.count(id) > 0; }
std::optional<int32_t> Tokenizer::bos() const { return impl_->spec.bos_id; }
std::optional<int32_t> Tokenizer::eos() const { return impl_->spec.eos_id; }
const TokenizerSpec& Tokenizer::spec() const { return impl_->spec; }

// ---- StreamDecoder ----

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special, bool text_start)
    : tok_(tokenizer), skip_special_(skip_special), text_start_(text_start), at_start_(text_start) {}

void StreamDecoder::reset() {
  at_start_ = text_start_;
  pending_.clear();
}

std::string StreamDecoder::push(int32_t id) {
  if (tok_.is_control(id) && skip_special_) return {};  // is_control checks the range
  const std::string& p = tok_.impl_->pieces[static_cast<size_t>(id)];
  if (p.empty()) return {};
  if (at_start_ && tok_.impl_->strips_leading_space() && p[0] == ' ')
    pending_.append(p, 1, std::string::npos);
  else
    pending_ += p;
  at_start_ = false;
  return take_complete(false);
}

std::string StreamDecoder::finish() {
  std::string out = take_complete(true);
  reset();
  return out;
}

std::string StreamDecoder::take_complete(bool final) {
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    bool incomplete = false;
    const size_t n = tok::utf8_valid_length(pending_, i, &incomplete);
    if (n > 0) {
      out.append(pending_, i, n);
      i += n;
    } else if (incomplete && !final) {
      break;  // wait for the rest of this character
    } else {
      out += "\xEF\xBF\xBD";
      i += tok::utf8_maximal_subpart(pending_, i);
    }
  }
  pending_.erase(0, i);
  return out;
}

}  // namespace ptn
