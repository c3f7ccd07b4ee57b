#include "tokenizer/hf_tokenizer_json.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>

#include "core/error.h"
#include "core/file.h"
#include "tokenizer/pre_tokenizer.h"

namespace ptn {

namespace {

using json = nlohmann::json;

constexpr size_t kMaxJsonBytes = 256u << 20;
constexpr int64_t kMaxTokens = 16 << 20;
constexpr size_t kMaxMerges = 16u << 20;
constexpr size_t kMaxTokenBytes = 64u << 10;
const char* const kSpace = "\xE2\x96\x81";  // ▁

class Parser {
 public:
  explicit Parser(std::string source) : src_(std::move(source)) {}

  [[noreturn]] void corrupt(const std::string& field, const std::string& detail) const {
    fail(ErrorKind::Corrupt, src_ + ": " + field, detail);
  }
  [[noreturn]] void unsupported(const std::string& field, const std::string& detail) const {
    fail(ErrorKind::Unsupported, src_ + ": " + field, detail);
  }

  json parse(const std::string& text, const std::string& what) const {
    try {
      return json::parse(text);
    } catch (const json::parse_error& e) {
      fail(ErrorKind::Corrupt, what, std::string("is not valid JSON: ") + e.what());
    }
  }

  std::string str(const json& j, const std::string& field) const {
    if (!j.is_string()) corrupt(field, "expected a string, found " + std::string(j.type_name()));
    std::string s = j.get<std::string>();
    if (s.size() > kMaxTokenBytes && field.find("chat_template") == std::string::npos)
      corrupt(field, "string of " + std::to_string(s.size()) + " bytes is too long");
    return s;
  }
  bool boolean(const json& obj, const char* key, bool dflt, const std::string& field) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return dflt;
    if (!it->is_boolean()) corrupt(field + "." + key, "expected true or false");
    return it->get<bool>();
  }
  int32_t id(const json& j, const std::string& field) const {
    if (!j.is_number_integer()) corrupt(field, "expected an integer token id");
    const int64_t v = j.get<int64_t>();
    if (v < 0 || v >= kMaxTokens) corrupt(field, "token id " + std::to_string(v) + " is out of range");
    return static_cast<int32_t>(v);
  }
  const std::string& source() const { return src_; }

 private:
  std::string src_;
};

// A literal string as a PCRE2 pattern.
std::string escape_regex(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x80 && !std::isalnum(c)) out += '\\';
    out += static_cast<char>(c);
  }
  return out;
}

struct PreTokenizerInfo {
  std::vector<std::string> patterns;
  bool byte_level = false;
  bool byte_level_prefix_space = false;
  bool metaspace = false;
  bool metaspace_prefix = false;
  bool metaspace_first_only = false;
  std::vector<std::string> space_splits;  // behaviors of Split(String " ")
};

void walk_pre_tokenizer(const Parser& p, const json& j, const std::string& field, PreTokenizerInfo& info, int depth) {
  if (j.is_null()) return;
  if (depth > 16) p.corrupt(field, "nested too deeply");
  if (!j.is_object()) p.corrupt(field, "expected an object");
  const std::string type = p.str(j.value("type", json()), field + ".type");
  if (type == "Sequence") {
    const json& list = j.value("pretokenizers", json());
    if (!list.is_array()) p.corrupt(field + ".pretokenizers", "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      walk_pre_tokenizer(p, list[i], field + ".pretokenizers[" + std::to_string(i) + "]", info, depth + 1);
  } else if (type == "Split") {
    const std::string behavior = j.contains("behavior") ? p.str(j["behavior"], field + ".behavior") : "Isolated";
    const json& sp = j.value("pattern", json());
    if (sp.is_object() && sp.contains("String") && sp["String"] == " ") {
      // Gemma: a split on " " after the normalizer turned every space into ▁ never cuts anything
      // (the caller checks that; for byte-level tokenizers only Isolated is accepted).
      info.space_splits.push_back(behavior);
      info.patterns.push_back(escape_regex(" "));
      return;
    }
    const bool invert = p.boolean(j, "invert", false, field);
    // Isolated keeps matches and gaps as pieces; Removed with invert keeps the matches only (the
    // form of tokenizer.json files converted from tiktoken, e.g. GPT-4o's o200k).
    const bool keep_matches_only = behavior == "Removed" && invert;
    if (behavior != "Isolated" && !keep_matches_only)
      p.unsupported(field + ".behavior", "'" + behavior + "'" + (invert ? " inverted" : "") +
                                             " (only Isolated, or Removed with invert)");
    if (invert && !keep_matches_only) p.unsupported(field + ".invert", "inverted Isolated splits");
    const std::string prefix = keep_matches_only ? tok::kDropGapsMarker : "";
    const json& pat = j.value("pattern", json());
    if (pat.is_object() && pat.contains("Regex"))
      info.patterns.push_back(prefix + p.str(pat["Regex"], field + ".pattern.Regex"));
    else if (pat.is_object() && pat.contains("String"))
      info.patterns.push_back(prefix + escape_regex(p.str(pat["String"], field + ".pattern.String")));
    else p.corrupt(field + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
  } else if (type == "ByteLevel") {
    info.byte_level = true;
    if (p.boolean(j, "use_regex", true, field)) info.patterns.push_back(tok::kGpt2Pattern);
    info.byte_level_prefix_space = p.boolean(j, "add_prefix_space", false, field);
  } else if (type == "Digits") {
    info.patterns.push_back(p.boolean(j, "individual_digits", false, field) ? "[0-9]" : "[0-9]+");
  } else if (type == "Punctuation") {
    const std::string behavior = j.contains("behavior") ? p.str(j["behavior"], field + ".behavior") : "Isolated";
    const char* cls = R"([\p{P}!-/:-@\[-`{-~])";
    if (behavior == "Isolated") info.patterns.push_back(cls);
    else if (behavior == "Contiguous") info.patterns.push_back(std::string(cls) + "+");
    else p.unsupported(field + ".behavior", "'" + behavior + "' for Punctuation");
  } else if (type == "Metaspace") {
    const std::string rep = j.contains("replacement") ? p.str(j["replacement"], field + ".replacement") : kSpace;
    if (rep != kSpace) p.unsupported(field + ".replacement", "only ▁ (U+2581)");
    if (p.boolean(j, "split", true, field)) p.unsupported(field + ".split", "Metaspace with split=true");
    info.metaspace = true;
    std::string scheme = "always";
    if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null())
      scheme = p.str(j["prepend_scheme"], field + ".prepend_scheme");
    else if (!p.boolean(j, "add_prefix_space", true, field))
      scheme = "never";
    if (scheme != "always" && scheme != "first" && scheme != "never")
      p.unsupported(field + ".prepend_scheme", "'" + scheme + "'");
    info.metaspace_prefix = scheme != "never";
    info.metaspace_first_only = scheme == "first";
  } else {
    p.unsupported(field + ".type", "pre-tokenizer '" + type + "'");
  }
}

struct NormalizerInfo {
  bool nfc = false;
  bool prepend_space = false;
  bool replace_space = false;
};

void walk_normalizer(const Parser& p, const json& j, const std::string& field, NormalizerInfo& info, int depth) {
  if (j.is_null()) return;
  if (depth > 16) p.corrupt(field, "nested too deeply");
  if (!j.is_object()) p.corrupt(field, "expected an object");
  const std::string type = p.str(j.value("type", json()), field + ".type");
  if (type == "Sequence") {
    const json& list = j.value("normalizers", json());
    if (!list.is_array()) p.corrupt(field + ".normalizers", "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      walk_normalizer(p, list[i], field + ".normalizers[" + std::to_string(i) + "]", info, depth + 1);
  } else if (type == "NFC") {
    info.nfc = true;
  } else if (type == "Prepend") {
    if (p.str(j.value("prepend", json()), field + ".prepend") != kSpace)
      p.unsupported(field + ".prepend", "only ▁ (U+2581) can be prepended");
    info.prepend_space = true;
  } else if (type == "Replace") {
    const json& pat = j.value("pattern", json());
    const bool space = pat.is_object() && pat.contains("String") && pat["String"] == " ";
    if (!space || p.str(j.value("content", json()), field + ".content") != kSpace)
      p.unsupported(field, "Replace other than \" \" -> ▁");
    info.replace_space = true;
  } else {
    p.unsupported(field + ".type", "normalizer '" + type + "'");
  }
}

// Special tokens that the post-processor puts before / after the text.
void walk_post_processor(const Parser& p, const json& j, const std::string& field,
                         const std::unordered_map<std::string, int32_t>& ids, std::optional<int32_t>& before,
                         std::optional<int32_t>& after, int depth) {
  if (j.is_null() || !j.is_object() || depth > 16) return;
  const std::string type = j.contains("type") ? p.str(j["type"], field + ".type") : "";
  if (type == "Sequence" && j.contains("processors") && j["processors"].is_array()) {
    for (size_t i = 0; i < j["processors"].size(); ++i)
      walk_post_processor(p, j["processors"][i], field + ".processors[" + std::to_string(i) + "]", ids, before, after,
                          depth + 1);
  } else if (type == "TemplateProcessing") {
    const json& single = j.value("single", json());
    if (!single.is_array()) p.corrupt(field + ".single", "expected an array");
    bool seen_sequence = false;
    for (const auto& item : single) {
      if (item.contains("Sequence")) {
        seen_sequence = true;
      } else if (item.contains("SpecialToken")) {
        const std::string name = p.str(item["SpecialToken"].value("id", json()), field + ".single[].SpecialToken.id");
        std::optional<int32_t> id;
        const json& st = j.value("special_tokens", json());
        if (st.is_object() && st.contains(name) && st[name].contains("ids") && st[name]["ids"].is_array() &&
            !st[name]["ids"].empty())
          id = p.id(st[name]["ids"][0], field + ".special_tokens." + name);
        else if (auto it = ids.find(name); it != ids.end())
          id = it->second;
        else
          p.corrupt(field + ".single", "special token '" + name + "' is not in the vocabulary");
        (seen_sequence ? after : before) = id;
      }
    }
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    if (j.contains("cls") && j["cls"].is_array() && j["cls"].size() == 2) before = p.id(j["cls"][1], field + ".cls");
    if (j.contains("sep") && j["sep"].is_array() && j["sep"].size() == 2) after = p.id(j["sep"][1], field + ".sep");
  }
}

// A token given in tokenizer_config.json as "text" or {"content": "text", ...}.
std::optional<std::string> config_token(const Parser& p, const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (it->is_object()) return p.str(it->value("content", json()), std::string("tokenizer_config.json: ") + key + ".content");
  return p.str(*it, std::string("tokenizer_config.json: ") + key);
}

}  // namespace

namespace {
TokenizerSpec parse_checked(const std::string& text, const std::string& config_text, const std::string& source);
}  // namespace

TokenizerSpec parse_hf_tokenizer(const std::string& text, const std::string& config_text, const std::string& source) {
  try {
    return parse_checked(text, config_text, source);
  } catch (const json::exception& e) {  // a value of an unexpected JSON type somewhere the checks did not reach
    fail(ErrorKind::Corrupt, source, std::string("unexpected JSON structure: ") + e.what());
  }
}

namespace {

// model.vocab plus added_tokens -> spec.tokens / token_types (by id); returns token -> id.
std::unordered_map<std::string, int32_t> read_vocabulary(const Parser& p, const json& root, const json& model,
                                                         TokenizerSpec& spec) {
  const json& vocab = model.value("vocab", json());
  if (!vocab.is_object()) p.corrupt("model.vocab", "missing or not an object");
  std::vector<std::pair<std::string, int32_t>> entries;
  entries.reserve(vocab.size());
  int32_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const int32_t id = p.id(it.value(), "model.vocab[\"" + it.key() + "\"]");
    if (it.key().size() > kMaxTokenBytes) p.corrupt("model.vocab", "a token of " + std::to_string(it.key().size()) + " bytes");
    entries.emplace_back(it.key(), id);
    max_id = std::max(max_id, id);
  }
  struct Added {
    std::string content;
    int32_t id;
    bool special, lstrip, rstrip;
  };
  std::vector<Added> added;
  if (root.contains("added_tokens") && !root["added_tokens"].is_null()) {
    const json& list = root["added_tokens"];
    if (!list.is_array()) p.corrupt("added_tokens", "expected an array");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string f = "added_tokens[" + std::to_string(i) + "]";
      if (!list[i].is_object()) p.corrupt(f, "expected an object");
      Added a{p.str(list[i].value("content", json()), f + ".content"), p.id(list[i].value("id", json()), f + ".id"),
              p.boolean(list[i], "special", false, f), p.boolean(list[i], "lstrip", false, f),
              p.boolean(list[i], "rstrip", false, f)};
      if (a.content.empty()) p.corrupt(f + ".content", "empty token");
      max_id = std::max(max_id, a.id);
      added.push_back(std::move(a));
    }
  }
  if (max_id < 0) p.corrupt("model.vocab", "empty vocabulary");
  const size_t n = static_cast<size_t>(max_id) + 1;
  // Ids are dense in real files; a few holes are tolerated, a tiny file naming id 10^7 is not.
  if (n > 2 * (entries.size() + added.size()) + 1024)
    p.corrupt("model.vocab", "token ids go up to " + std::to_string(max_id) + " but only " +
                                 std::to_string(entries.size() + added.size()) + " tokens are listed");
  spec.tokens.assign(n, "");
  spec.token_types.assign(n, TokenType::Unused);  // ids that nothing names stay unused
  std::unordered_map<std::string, int32_t> ids;
  ids.reserve(n * 2);
  for (auto& [t, id] : entries) {
    if (spec.token_types[id] != TokenType::Unused) p.corrupt("model.vocab", "id " + std::to_string(id) + " is used twice");
    spec.tokens[id] = t;
    spec.token_types[id] = TokenType::Normal;
    ids.emplace(t, id);
  }
  for (const auto& a : added) {
    if (spec.token_types[a.id] != TokenType::Unused && spec.tokens[a.id] != a.content)
      p.corrupt("added_tokens", "id " + std::to_string(a.id) + " is '" + a.content + "' but the vocabulary has '" +
                                    spec.tokens[a.id] + "'");
    spec.tokens[a.id] = a.content;
    spec.token_types[a.id] = a.special ? TokenType::Control : TokenType::UserDefined;
    ids.emplace(a.content, a.id);
    if (a.lstrip) spec.lstrip_ids.push_back(a.id);
    if (a.rstrip) spec.rstrip_ids.push_back(a.id);
  }

  return ids;
}

// model.merges: "a b" strings or ["a", "b"] pairs.
void read_merges(const Parser& p, const json& model, TokenizerSpec& spec) {
  const json& merges = model.value("merges", json::array());
  if (!merges.is_array()) p.corrupt("model.merges", "expected an array");
  if (merges.size() > kMaxMerges) p.corrupt("model.merges", std::to_string(merges.size()) + " merges exceed the limit");
  spec.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    const std::string f = "model.merges[" + std::to_string(i) + "]";
    if (m.is_string()) {
      spec.merges.push_back(p.str(m, f));
      if (spec.merges.back().find(' ') == std::string::npos) p.corrupt(f, "a merge needs two tokens separated by a space");
    } else if (m.is_array() && m.size() == 2) {
      spec.merges.push_back(p.str(m[0], f + "[0]") + " " + p.str(m[1], f + "[1]"));
    } else {
      p.corrupt(f, "expected \"a b\" or [\"a\", \"b\"]");
    }
  }

}

// Byte-level or SentencePiece-style, from the pre-tokenizer, normalizer and decoder.
void read_kind(const Parser& p, const json& root, const json& model, TokenizerSpec& spec) {
  const size_t n = spec.tokens.size();
  PreTokenizerInfo pre;
  walk_pre_tokenizer(p, root.value("pre_tokenizer", json()), "pre_tokenizer", pre, 0);
  NormalizerInfo norm;
  walk_normalizer(p, root.value("normalizer", json()), "normalizer", norm, 0);
  bool decoder_byte_level = false;
  if (root.contains("decoder") && root["decoder"].is_object()) {
    const std::string d = root["decoder"].dump();
    decoder_byte_level = d.find("\"ByteLevel\"") != std::string::npos;
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && !model[key].is_null() && !p.str(model[key], std::string("model.") + key).empty())
      p.unsupported(std::string("model.") + key, "BPE with subword prefixes or word suffixes");
  if (model.contains("dropout") && model["dropout"].is_number() && model["dropout"].get<double>() > 0)
    p.unsupported("model.dropout", "BPE dropout (random segmentation)");
  spec.ignore_merges = p.boolean(model, "ignore_merges", false, "model");
  spec.byte_fallback = p.boolean(model, "byte_fallback", false, "model");
  if (pre.byte_level || decoder_byte_level) {
    spec.kind = TokenizerKind::ByteLevelBPE;
    if (spec.byte_fallback) p.unsupported("model.byte_fallback", "byte fallback with a byte-level tokenizer");
    if (norm.prepend_space || norm.replace_space || pre.metaspace)
      p.unsupported("normalizer", "▁ replacement with a byte-level tokenizer");
    for (const auto& b : pre.space_splits)
      if (b != "Isolated") p.unsupported("pre_tokenizer", "Split on \" \" with behavior '" + b + "'");
    spec.pre_split_regexes = pre.patterns;
    spec.pre_split_explicit = true;
    spec.bpe_add_prefix_space = pre.byte_level_prefix_space;
    spec.add_space_prefix = false;
  } else {
    spec.kind = TokenizerKind::SentencePiece;
    if (pre.patterns.size() != pre.space_splits.size())
      p.unsupported("pre_tokenizer", "split patterns with a SentencePiece-style tokenizer");
    if (!pre.metaspace && !norm.replace_space) p.unsupported("normalizer", "a BPE tokenizer that is neither byte-level nor ▁-based");
    if (!pre.space_splits.empty() && !norm.replace_space)
      p.unsupported("pre_tokenizer", "Split on \" \" without the normalizer replacing spaces by ▁");
    spec.add_space_prefix = pre.metaspace ? pre.metaspace_prefix : norm.prepend_space;
    spec.space_prefix_first_only = pre.metaspace && pre.metaspace_first_only;
    for (size_t i = 0; i < n; ++i) {
      const std::string& t = spec.tokens[i];
      if (spec.byte_fallback && spec.token_types[i] == TokenType::Normal && t.size() == 6 && t.rfind("<0x", 0) == 0 &&
          t[5] == '>')
        spec.token_types[i] = TokenType::Byte;
    }
  }
  if (norm.nfc) spec.normalizer = "nfc";

}

// tokenizer_config.json: bos/eos/pad/unk token strings, add_bos/add_eos, chat_template.
void apply_tokenizer_config(const std::string& config_text, const std::unordered_map<std::string, int32_t>& ids,
                            TokenizerSpec& spec) {
  const std::string cfg_name = "tokenizer_config.json";
  Parser c(cfg_name);
  const json cfg = c.parse(config_text, cfg_name);
  if (!cfg.is_object()) c.corrupt("(root)", "expected a JSON object");
  // A token the config names but the vocabulary lacks is ignored (some configs name a pad
  // token that does not exist); add_bos/add_eos below still insist on having theirs.
  auto resolve = [&](const char* key) -> std::optional<int32_t> {
    auto s = config_token(c, cfg, key);
    if (!s) return std::nullopt;
    auto it = ids.find(*s);
    if (it == ids.end()) return std::nullopt;
    return it->second;
  };
  if (auto s = config_token(c, cfg, "bos_token")) spec.bos_token = *s;
  if (auto s = config_token(c, cfg, "eos_token")) spec.eos_token = *s;
  if (auto id = resolve("bos_token")) spec.bos_id = id;
  if (auto id = resolve("eos_token")) spec.eos_id = id;
  if (auto id = resolve("pad_token")) spec.pad_id = id;
  if (auto id = resolve("unk_token"); id && !spec.unk_id) spec.unk_id = id;
  if (cfg.contains("add_bos_token") && !cfg["add_bos_token"].is_null()) spec.add_bos = c.boolean(cfg, "add_bos_token", false, "");
  if (cfg.contains("add_eos_token") && !cfg["add_eos_token"].is_null()) spec.add_eos = c.boolean(cfg, "add_eos_token", false, "");
  if (spec.add_bos && !spec.bos_id) c.corrupt("add_bos_token", "true, but there is no bos_token");
  if (spec.add_eos && !spec.eos_id) c.corrupt("add_eos_token", "true, but there is no eos_token");
  if (cfg.contains("chat_template") && !cfg["chat_template"].is_null()) {
    const json& ct = cfg["chat_template"];
    if (ct.is_string()) {
      spec.chat_template = ct.get<std::string>();
    } else if (ct.is_array()) {  // [{"name": ..., "template": ...}]: the "default" one, else the first
      for (const auto& e : ct) {
        if (!e.is_object() || !e.contains("template")) c.corrupt("chat_template", "expected {name, template} objects");
        const bool is_default = e.value("name", json()) == "default";
        if (spec.chat_template.empty() || is_default) spec.chat_template = c.str(e["template"], "chat_template.template");
        if (is_default) break;
      }
    } else {
      c.corrupt("chat_template", "expected a string or a list of {name, template}");
    }
  }
}

TokenizerSpec parse_checked(const std::string& text, const std::string& config_text, const std::string& source) {
  Parser p(source);
  const json root = p.parse(text, source);
  if (!root.is_object()) p.corrupt("(root)", "expected a JSON object");
  const json& model = root.value("model", json());
  if (!model.is_object()) p.corrupt("model", "missing or not an object");
  const std::string mtype = model.contains("type") ? p.str(model["type"], "model.type") : "BPE";
  if (mtype != "BPE") p.unsupported("model.type", "tokenizer model '" + mtype + "' (only BPE)");

  TokenizerSpec spec;
  const std::unordered_map<std::string, int32_t> ids = read_vocabulary(p, root, model, spec);
  read_merges(p, model, spec);
  read_kind(p, root, model, spec);
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    const std::string unk = p.str(model["unk_token"], "model.unk_token");
    auto it = ids.find(unk);
    if (it == ids.end()) p.corrupt("model.unk_token", "'" + unk + "' is not in the vocabulary");
    spec.unk_id = it->second;
    spec.token_types[it->second] = TokenType::Unknown;
  }

  std::optional<int32_t> before, after;
  walk_post_processor(p, root.value("post_processor", json()), "post_processor", ids, before, after, 0);
  spec.bos_id = before;
  spec.add_bos = before.has_value();
  spec.eos_id = after;
  spec.add_eos = after.has_value();

  if (!config_text.empty()) apply_tokenizer_config(config_text, ids, spec);
  if (spec.bos_id && spec.bos_token.empty()) spec.bos_token = spec.tokens[*spec.bos_id];
  if (spec.eos_id && spec.eos_token.empty()) spec.eos_token = spec.tokens[*spec.eos_id];

  // End of generation: the eos token and the end-of-turn markers of the common chat formats.
  for (const char* name : {"<|eot_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>", "<|endoftext|>", "<|eom_id|>", "<EOT>"}) {
    auto it = ids.find(name);
    if (it == ids.end() || (spec.eos_id && *spec.eos_id == it->second)) continue;
    if (!spec.eot_id && std::string(name) != "<|endoftext|>" && std::string(name) != "<|eom_id|>") spec.eot_id = it->second;
    else spec.extra_eos_ids.push_back(it->second);
  }
  return spec;
}

}  // namespace

void add_generation_eos_ids(TokenizerSpec& spec, const std::string& json_text, const std::string& where) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::parse_error& e) {
    fail(ErrorKind::Corrupt, where, std::string("is not valid JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("eos_token_id") || j["eos_token_id"].is_null()) return;
  const json& e = j["eos_token_id"];
  std::vector<json> ids = e.is_array() ? std::vector<json>(e.begin(), e.end()) : std::vector<json>{e};
  if (ids.size() > 64) fail(ErrorKind::Corrupt, where + ": eos_token_id", "more than 64 ids");
  const int64_t n = static_cast<int64_t>(spec.tokens.size());
  for (const json& id : ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= n)
      fail(ErrorKind::Corrupt, where + ": eos_token_id",
           "must be a token id or a list of token ids in [0, " + std::to_string(n) + ")");
    const int32_t v = static_cast<int32_t>(id.get<int64_t>());
    if (spec.eos_id == v || std::find(spec.extra_eos_ids.begin(), spec.extra_eos_ids.end(), v) != spec.extra_eos_ids.end())
      continue;
    spec.extra_eos_ids.push_back(v);
  }
}

TokenizerSpec load_hf_tokenizer(const std::string& path) {
  const std::string text = read_text_file(path, kMaxJsonBytes);
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string cfg_path = dir + "tokenizer_config.json";
  std::string cfg;
  if (file_exists(cfg_path)) cfg = read_text_file(cfg_path, kMaxJsonBytes);
  TokenizerSpec spec;
  try {
    spec = parse_hf_tokenizer(text, cfg, path);
  } catch (const Error& e) {
    // Config errors are reported against the config file's full path.
    if (e.where().rfind("tokenizer_config.json", 0) == 0)
      fail(e.kind(), dir + e.where(), e.detail());
    throw;
  }
  // The model's end-of-generation set, as transformers' generate() takes it: eos_token_id of
  // generation_config.json and of config.json (an id or a list; Llama 3 Instruct lists three).
  for (const char* f : {"generation_config.json", "config.json"})
    if (file_exists(dir + f)) add_generation_eos_ids(spec, read_text_file(dir + f, 1u << 20), dir + f);
  return spec;
}

}  // namespace ptn
