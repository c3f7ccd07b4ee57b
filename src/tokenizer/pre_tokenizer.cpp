#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <initializer_list>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace ptn::tok {

const char* const kDropGapsMarker = "(?#removed-gaps)";

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

// Llama 3 (and DBRX, Smaug, ChatGLM-4): contractions any case, words, numbers of up to 3 digits.
const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen 2/3: like Llama 3 but every digit alone.
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kGpt4oPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kGpt2NoTail = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

// The names llama.cpp treats as Llama 3's pre-tokenizer, which also take a whole pre-token that
// is in the vocabulary as one token (ignore_merges).
const std::initializer_list<const char*> kLlama3Names = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1",
                                                         "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"};

bool is_one_of(const std::string& name, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

}  // namespace

bool pre_tokenizer_ignores_merges(const std::string& name) { return is_one_of(name, kLlama3Names) || name == "tekken"; }

std::vector<std::string> pre_tokenizer_patterns(const std::string& name) {
  if (is_one_of(name, kLlama3Names) || is_one_of(name, {"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}))
    return {kLlama3Pattern};
  if (is_one_of(name, {"qwen2", "stablelm2", "megrez", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan"}))
    return {kQwen2Pattern};
  if (name == "qwen35")  // Qwen 3.5: combining marks stay with their letters
    return {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
  if (is_one_of(name, {"gpt-2", "phi-2", "mpt", "olmo", "jais", "roberta-bpe", "gpt-neox", "jina-es", "jina-de",
                       "jina-v2-es", "jina-v2-de", "jina-v1-en", "jina-v2-code", "gigachat", "a.x-4.0", "mellum",
                       "modern-bert", "exaone4", "trillion", "granite-docling"}))
    return {kGpt2Pattern};
  // GPT-4o's o200k (gpt-oss, Llama 4, MiniMax M2): words split at case changes, contractions
  // kept on the word, numbers of up to three digits, '/' and newlines kept on punctuation.
  if (is_one_of(name, {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"})) return {kGpt4oPattern};
  if (is_one_of(name, {"tiny_aya", "cohere2moe"}))  // numbers cut into thousands groups first
    return {R"(\d{1,3}(?=(?:\d{3})*\b))", kGpt4oPattern};
  if (name == "seed-coder")
    return {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)"};
  if (is_one_of(name, {"bailingmoe", "bailingmoe2", "llada-moe"}))
    return {R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)"};
  if (name == "starcoder" || name == "refact" || name == "command-r" || name == "smollm" || name == "codeshell" ||
      name == "exaone" || name == "minerva-7b")
    return {R"(\p{N})", kGpt2NoTail};
  if (name == "falcon") return {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2NoTail, "[0-9][0-9][0-9]"};
  if (name == "deepseek-coder")
    return {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+", R"(\p{N})"};
  if (name == "deepseek-llm")
    return {
        "[\r\n]",
        "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF"
        "\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5"
        "\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA"
        "\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45"
        "\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE"
        "\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC"
        "\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139"
        "\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3"
        "\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06"
        "\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3"
        "\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF"
        "\U0001E900-\U0001E943]+",
        "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+",
        R"(\s+$)",
        "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+",
        R"(\p{N}+)",
    };
  if (is_one_of(name, {"deepseek-v3", "hunyuan-dense", "joyai-llm"}))
    return {R"(\p{N}{1,3})", "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+",
            R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
  if (name == "tekken")  // Mistral Nemo: words split at case changes
    return {R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
  if (name == "bloom" || name == "poro-chat" || name == "gpt3-finnish")
    return {" ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+"};
  if (name == "viking") return {" ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+", R"(\p{N})"};
  if (name.empty() || name == "default")
    return {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2NoTail, R"(\p{N}+)", "[0-9][0-9][0-9]"};
  fail(ErrorKind::Unsupported, "tokenizer.ggml.pre", "unknown pre-tokenizer '" + name + "'");
}

std::string pre_tokenizer_name_for(const std::vector<std::string>& given, bool ignore_merges) {
  // A one-regex pre-tokenizer ending in `|\s+` matches every character of valid text, so keeping
  // only its matches (a kDropGapsMarker pattern) cuts the same pieces as keeping the gaps too.
  std::vector<std::string> patterns = given;
  const std::string marker = kDropGapsMarker, tail = R"(|\s+)";
  if (patterns.size() == 1 && patterns[0].rfind(marker, 0) == 0 && patterns[0].size() > marker.size() + tail.size() &&
      patterns[0].compare(patterns[0].size() - tail.size(), tail.size(), tail) == 0)
    patterns[0].erase(0, marker.size());
  std::string found;
  for (const char* name : {"llama-bpe", "qwen2", "qwen35", "gpt-2", "gpt-4o", "tiny_aya", "seed-coder", "bailingmoe",
                           "starcoder", "falcon", "deepseek-coder", "deepseek-llm", "deepseek-v3", "tekken", "bloom",
                           "viking", "default"}) {
    if (pre_tokenizer_patterns(name) != patterns) continue;
    if (pre_tokenizer_ignores_merges(name) == ignore_merges) return name;
    if (found.empty()) found = name;
  }
  return found;
}

struct RegexSplitter::Compiled {
  std::string pattern;
  bool drop_gaps = false;
  pcre2_code* code = nullptr;
  ~Compiled() {
    if (code) pcre2_code_free(code);
  }
};

RegexSplitter::RegexSplitter(const std::vector<std::string>& patterns) {
  for (const auto& p : patterns) {
    auto c = std::make_unique<Compiled>();
    c->pattern = p;
    c->drop_gaps = p.rfind(kDropGapsMarker, 0) == 0;
    int err = 0;
    PCRE2_SIZE err_off = 0;
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_off, nullptr);
    if (!c->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      fail(ErrorKind::InvalidArgument, "pre-tokenizer pattern '" + p + "'",
           "does not compile at offset " + std::to_string(err_off) + ": " + reinterpret_cast<char*>(msg));
    }
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);  // optional: matching falls back to the interpreter
    regexes_.push_back(std::move(c));
  }
}

RegexSplitter::~RegexSplitter() = default;

namespace {

// A dropped gap is text the pattern does not match; invalid UTF-8 never matches (and cannot occur
// in the HF tokenizers such a pattern comes from), so it is kept as a piece rather than lost.
bool keep_gap(bool drop_gaps, std::string_view gap) {
  if (!drop_gaps) return true;
  for (size_t i = 0; i < gap.size();) {
    const size_t n = utf8_valid_length(gap, i);
    if (n == 0) return true;
    i += n;
  }
  return false;
}

}  // namespace

std::vector<std::string_view> RegexSplitter::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  for (const auto& re : regexes_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(re->code, nullptr);
    if (!md) fail(ErrorKind::Capacity, "pre-tokenizer", "out of memory for regex match data");
    std::vector<std::string_view> next;
    next.reserve(pieces.size() * 2);
    for (std::string_view piece : pieces) {
      size_t pos = 0, gap_start = 0;
      while (pos <= piece.size()) {
        const int rc = pcre2_match(re->code, reinterpret_cast<PCRE2_SPTR>(piece.data()), piece.size(), pos, 0, md,
                                   nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          pcre2_match_data_free(md);
          PCRE2_UCHAR msg[256];
          pcre2_get_error_message(rc, msg, sizeof msg);
          fail(ErrorKind::InvalidArgument, "pre-tokenizer pattern '" + re->pattern + "'",
               std::string("matching failed: ") + reinterpret_cast<char*>(msg));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t ms = ov[0], me = ov[1];
        if (me <= ms) {  // empty match: not a piece; step over one character
          if (ms >= piece.size()) break;
          size_t n = utf8_valid_length(piece, ms);
          pos = ms + (n ? n : 1);
          continue;
        }
        if (ms > gap_start && keep_gap(re->drop_gaps, piece.substr(gap_start, ms - gap_start)))
          next.push_back(piece.substr(gap_start, ms - gap_start));
        next.push_back(piece.substr(ms, me - ms));
        gap_start = pos = me;
      }
      if (gap_start < piece.size() && keep_gap(re->drop_gaps, piece.substr(gap_start))) next.push_back(piece.substr(gap_start));
    }
    pcre2_match_data_free(md);
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace ptn::tok
