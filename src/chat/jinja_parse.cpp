// Lexer and parser. The whitespace rules are those of Hugging Face's chat template renderers
// (trim_blocks, lstrip_blocks, `-` markers, one trailing newline dropped, generation tags
// removed), applied in the same order so that renders agree byte for byte. Operator
// precedence, from loosest: `x if c else y`, or, and, not, comparisons and (not) in,
// + - ~, * / // %, **, is, |, unary - +, calls / attributes / subscripts.
#include <cstring>

#include "chat/jinja.h"
#include "chat/jinja_ast.h"
#include "core/error.h"

namespace ptn::jinja {

std::string Node::where() const {
  return "line " + std::to_string(line) + " col " + std::to_string(col);
}

namespace {

const char* kWhere = "chat template";

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
// Length of the JavaScript `\s` character at s[i] (what `-` markers strip): ASCII whitespace,
// U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000, U+FEFF; 0 if none.
size_t js_space_at(const std::string& s, size_t i) {
  if (i >= s.size()) return 0;
  auto b = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  unsigned c = b(0);
  if (c == ' ' || (c >= '\t' && c <= '\r')) return 1;
  if (c == 0xc2 && b(1) == 0xa0) return 2;
  if (c == 0xe1 && b(1) == 0x9a && b(2) == 0x80) return 3;
  if (c == 0xe2 && b(1) == 0x80 && (b(2) <= 0x8a || b(2) == 0xa8 || b(2) == 0xa9 || b(2) == 0xaf)) return 3;
  if (c == 0xe2 && b(1) == 0x81 && b(2) == 0x9f) return 3;
  if (c == 0xe3 && b(1) == 0x80 && b(2) == 0x80) return 3;
  if (c == 0xef && b(1) == 0xbb && b(2) == 0xbf) return 3;
  return 0;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

// Source text after the whitespace rules, with each byte's offset in the original template.
struct Src {
  std::string text;
  std::vector<uint32_t> off;
  void push(char c, uint32_t o) {
    text += c;
    off.push_back(o);
  }
};

bool starts(const std::string& s, size_t i, const char* lit) {
  for (size_t k = 0; lit[k]; ++k)
    if (i + k >= s.size() || s[i + k] != lit[k]) return false;
  return true;
}

Src preprocess(const std::string& source) {
  Src in, a, b, c;
  for (Src* x : {&in, &a, &b, &c}) {
    x->text.reserve(source.size());
    x->off.reserve(source.size());
  }
  for (size_t i = 0; i < source.size(); ++i) in.push(source[i], static_cast<uint32_t>(i));
  if (!in.text.empty() && in.text.back() == '\n') {
    in.text.pop_back();
    in.off.pop_back();
  }
  // lstrip_blocks: spaces and tabs from a line start up to `{%`, `{#` (or `{-`) are dropped.
  for (size_t i = 0; i < in.text.size();) {
    bool line_start = i == 0 || in.text[i - 1] == '\n';
    if (line_start) {
      size_t j = i;
      while (j < in.text.size() && (in.text[j] == ' ' || in.text[j] == '\t')) ++j;
      if (j > i && j + 1 < in.text.size() && in.text[j] == '{' &&
          (in.text[j + 1] == '%' || in.text[j + 1] == '#' || in.text[j + 1] == '-')) {
        i = j;
      } else if (j > i) {
        for (; i < j; ++i) a.push(in.text[i], in.off[i]);
        continue;
      }
    }
    a.push(in.text[i], in.off[i]);
    ++i;
  }
  // trim_blocks: the newline right after `%}`, `#}` (or `-}`) is dropped.
  for (size_t i = 0; i < a.text.size(); ++i) {
    if (a.text[i] == '\n' && i >= 2 && a.text[i - 1] == '}' &&
        (a.text[i - 2] == '%' || a.text[i - 2] == '#' || a.text[i - 2] == '-')) {
      // only when that `}` was not itself the start of an earlier match (cannot happen: `}`
      // never matches `\n`), so a plain look-back is exact.
      continue;
    }
    b.push(a.text[i], a.off[i]);
  }
  // `{% generation %}` / `{% endgeneration %}` (transformers' assistant-mask markers) vanish,
  // taking the whitespace around them when marked with `-`.
  const std::string& t = b.text;
  for (size_t i = 0; i < t.size();) {
    size_t j = i;
    while (j < t.size() && is_ws(t[j])) ++j;
    size_t k = j;
    bool matched = false, lstrip = false, rstrip = false;
    size_t end = 0;
    if (starts(t, k, "{%")) {
      k += 2;
      if (k < t.size() && t[k] == '-') {
        lstrip = true;
        ++k;
      }
      while (k < t.size() && is_ws(t[k])) ++k;
      if (starts(t, k, "end")) k += 3;
      if (starts(t, k, "generation")) {
        k += 10;
        while (k < t.size() && is_ws(t[k])) ++k;
        if (k < t.size() && t[k] == '-') {
          rstrip = true;
          ++k;
        }
        if (starts(t, k, "%}")) {
          matched = true;
          end = k + 2;
        }
      }
    }
    if (!matched) {
      size_t stop = j > i ? j : i + 1;
      for (; i < stop; ++i) c.push(t[i], b.off[i]);
      continue;
    }
    size_t after_end = end;
    while (after_end < t.size() && is_ws(t[after_end])) ++after_end;
    if (!lstrip)
      for (size_t q = i; q < j; ++q) c.push(t[q], b.off[q]);
    if (!rstrip)
      for (size_t q = end; q < after_end; ++q) c.push(t[q], b.off[q]);
    i = after_end;
  }
  return c;
}

enum class Tok {
  Text, Comment, Num, Str, Ident, Equals, LParen, RParen, OpenStmt, CloseStmt, OpenExpr,
  CloseExpr, LBracket, RBracket, LBrace, RBrace, Comma, Dot, Colon, Pipe, Add, Mul, Pow, Cmp,
  Unary, End
};

const char* tok_name(Tok t) {
  static const char* names[] = {"text", "comment", "number", "string", "name", "'='", "'('",
                                "')'", "'{%'", "'%}'", "'{{'", "'}}'", "'['", "']'", "'{'",
                                "'}'", "','", "'.'", "':'", "'|'", "operator", "operator",
                                "'**'", "comparison", "unary operator", "end of template"};
  return names[static_cast<int>(t)];
}

struct Token {
  Tok type;
  std::string value;
  int line, col;
};

class Lexer {
 public:
  Lexer(const std::string& original, Src src) : src_(std::move(src)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < original.size(); ++i)
      if (original[i] == '\n') line_starts_.push_back(static_cast<uint32_t>(i + 1));
    orig_size_ = original.size();
  }

  std::vector<Token> run() {
    const std::string& s = src_.text;
    size_t n = s.size();
    int curly = 0;
    while (pos_ < n) {
      Tok last = toks_.empty() ? Tok::End : toks_.back().type;
      if (toks_.empty() || last == Tok::CloseStmt || last == Tok::CloseExpr || last == Tok::Comment) {
        size_t start = pos_;
        while (pos_ < n && !(s[pos_] == '{' && pos_ + 1 < n &&
                             (s[pos_ + 1] == '%' || s[pos_ + 1] == '{' || s[pos_ + 1] == '#')))
          ++pos_;
        if (pos_ > start) {
          push(Tok::Text, s.substr(start, pos_ - start), start);
          continue;
        }
      }
      if (starts(s, pos_, "{#")) {
        size_t start = pos_;
        pos_ += 2;
        bool strip_before = pos_ < n && s[pos_] == '-';
        if (strip_before) ++pos_;
        size_t close = s.find("#}", pos_);
        if (close == std::string::npos) error(start, "comment '{#' is never closed with '#}'");
        std::string body = s.substr(pos_, close - pos_);
        bool strip_after = !body.empty() && body.back() == '-';
        if (strip_before) strip_trailing();
        push(Tok::Comment, body, start);
        pos_ = close + 2;
        if (strip_after) skip_ws();
        continue;
      }
      if (starts(s, pos_, "{%-")) {
        strip_trailing();
        push(Tok::OpenStmt, "{%", pos_);
        pos_ += 3;
        continue;
      }
      if (starts(s, pos_, "{{-")) {
        strip_trailing();
        push(Tok::OpenExpr, "{{", pos_);
        curly = 0;
        pos_ += 3;
        continue;
      }
      skip_ws();
      if (pos_ >= n) break;
      if (starts(s, pos_, "-%}")) {
        push(Tok::CloseStmt, "%}", pos_);
        pos_ += 3;
        skip_ws();
        continue;
      }
      if (starts(s, pos_, "-}}")) {
        push(Tok::CloseExpr, "}}", pos_);
        pos_ += 3;
        skip_ws();
        continue;
      }
      char ch = s[pos_];
      if (ch == '-' || ch == '+') {
        if (toks_.empty() || last == Tok::Text) error(pos_, std::string("unexpected '") + ch + "'");
        bool operand = last == Tok::Ident || last == Tok::Num || last == Tok::Str ||
                       last == Tok::RParen || last == Tok::RBracket;
        if (!operand) {
          size_t start = pos_++;
          std::string num;
          while (pos_ < n && is_digit(s[pos_])) num += s[pos_++];
          if (!num.empty() && pos_ + 1 < n && s[pos_] == '.' && is_digit(s[pos_ + 1])) {
            num += s[pos_++];
            while (pos_ < n && is_digit(s[pos_])) num += s[pos_++];
          }
          if (num.empty())
            push(Tok::Unary, std::string(1, ch), start);
          else
            push(Tok::Num, std::string(1, ch) + num, start);
          continue;
        }
      }
      if (match_symbol(curly)) continue;
      if (ch == '\'' || ch == '"') {
        lex_string(ch);
        continue;
      }
      if (is_digit(ch)) {
        size_t start = pos_;
        std::string num;
        while (pos_ < n && is_digit(s[pos_])) num += s[pos_++];
        if (last != Tok::Dot && pos_ + 1 < n && s[pos_] == '.' && is_digit(s[pos_ + 1])) {
          num += s[pos_++];
          while (pos_ < n && is_digit(s[pos_])) num += s[pos_++];
        }
        push(Tok::Num, num, start);
        continue;
      }
      if (is_word(ch)) {
        size_t start = pos_;
        while (pos_ < n && is_word(s[pos_])) ++pos_;
        push(Tok::Ident, s.substr(start, pos_ - start), start);
        continue;
      }
      error(pos_, std::string("unexpected character '") + ch + "' inside a tag");
    }
    return std::move(toks_);
  }

  void line_col(size_t pos, int& line, int& col) const {
    size_t o = pos < src_.off.size() ? src_.off[pos] : orig_size_;
    size_t lo = 0, hi = line_starts_.size();
    while (hi - lo > 1) {
      size_t mid = (lo + hi) / 2;
      if (line_starts_[mid] <= o) lo = mid; else hi = mid;
    }
    line = static_cast<int>(lo + 1);
    col = static_cast<int>(o - line_starts_[lo] + 1);
  }

 private:
  [[noreturn]] void error(size_t pos, const std::string& msg) const {
    int l, c;
    line_col(pos, l, c);
    fail(ErrorKind::Corrupt, std::string(kWhere) + " line " + std::to_string(l) + " col " + std::to_string(c),
         msg);
  }

  void push(Tok t, std::string v, size_t pos) {
    Token tok{t, std::move(v), 0, 0};
    line_col(pos, tok.line, tok.col);
    toks_.push_back(std::move(tok));
  }

  void strip_trailing() {
    if (toks_.empty() || toks_.back().type != Tok::Text) return;
    std::string& v = toks_.back().value;
    size_t e = v.size();
    while (e > 0) {
      size_t k = 0;
      for (size_t n = 1; n <= 3 && n <= e; ++n)
        if (js_space_at(v, e - n) == n) k = n;
      if (!k) break;
      e -= k;
    }
    v.resize(e);
    if (v.empty()) toks_.pop_back();
  }

  void skip_ws() {
    while (size_t k = js_space_at(src_.text, pos_)) pos_ += k;
  }

  bool match_symbol(int& curly) {
    if (!std::strchr("{}%()[],.:|<>=!+-~*/", src_.text[pos_])) return false;
    static const std::pair<const char*, Tok> table[] = {
        {"{%", Tok::OpenStmt}, {"%}", Tok::CloseStmt}, {"{{", Tok::OpenExpr}, {"}}", Tok::CloseExpr},
        {"(", Tok::LParen},    {")", Tok::RParen},     {"{", Tok::LBrace},    {"}", Tok::RBrace},
        {"[", Tok::LBracket},  {"]", Tok::RBracket},   {",", Tok::Comma},     {".", Tok::Dot},
        {":", Tok::Colon},     {"|", Tok::Pipe},       {"<=", Tok::Cmp},      {">=", Tok::Cmp},
        {"==", Tok::Cmp},      {"!=", Tok::Cmp},       {"<", Tok::Cmp},       {">", Tok::Cmp},
        {"+", Tok::Add},       {"-", Tok::Add},        {"~", Tok::Add},       {"**", Tok::Pow},
        {"*", Tok::Mul},       {"//", Tok::Mul},       {"/", Tok::Mul},       {"%", Tok::Mul},
        {"=", Tok::Equals}};
    for (auto& [seq, type] : table) {
      if (type == Tok::CloseExpr && curly > 0) continue;
      if (!starts(src_.text, pos_, seq)) continue;
      push(type, seq, pos_);
      if (type == Tok::OpenExpr) curly = 0;
      else if (type == Tok::LBrace) ++curly;
      else if (type == Tok::RBrace) --curly;
      pos_ += std::strlen(seq);
      return true;
    }
    return false;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  bool read_hex(size_t len, uint32_t& cp) {
    const std::string& s = src_.text;
    if (pos_ + len > s.size()) return false;
    cp = 0;
    for (size_t i = 0; i < len; ++i) {
      char h = s[pos_ + i];
      int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
      if (d < 0) return false;
      cp = cp * 16 + static_cast<uint32_t>(d);
    }
    pos_ += len;
    return true;
  }

  void lex_string(char quote) {
    const std::string& s = src_.text;
    size_t start = pos_++;
    std::string out;
    while (true) {
      if (pos_ >= s.size()) error(start, "string literal is never closed");
      char ch = s[pos_];
      if (ch == quote) break;
      if (ch != '\\') {
        out += ch;
        ++pos_;
        continue;
      }
      size_t esc_at = pos_++;
      if (pos_ >= s.size()) error(start, "string literal is never closed");
      char e = s[pos_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case 'x':
        case 'u': {
          uint32_t cp;
          if (!read_hex(e == 'x' ? 2 : 4, cp)) error(esc_at, std::string("invalid escape sequence '\\") + e + "'");
          if (cp >= 0xd800 && cp < 0xdc00 && starts(s, pos_, "\\u")) {  // surrogate pair
            size_t save = pos_;
            pos_ += 2;
            uint32_t lo;
            if (read_hex(4, lo) && lo >= 0xdc00 && lo < 0xe000) {
              cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else {
              pos_ = save;
            }
          }
          append_utf8(out, cp);
          break;
        }
        default:  // as Python: an unknown escape keeps its backslash
          out += '\\';
          out += e;
      }
    }
    ++pos_;  // closing quote
    push(Tok::Str, std::move(out), start);
  }

  Src src_;
  std::vector<uint32_t> line_starts_;
  size_t orig_size_ = 0;
  size_t pos_ = 0;
  std::vector<Token> toks_;
};

class Parser {
 public:
  Parser(std::vector<Token> toks, const Limits& limits) : t_(std::move(toks)), limits_(limits) {
    int l = t_.empty() ? 1 : t_.back().line, c = t_.empty() ? 1 : t_.back().col;
    t_.push_back({Tok::End, "", l, c});
  }

  std::vector<NodePtr> parse_all() {
    std::vector<NodePtr> out;
    while (peek().type != Tok::End) out.push_back(parse_any());
    return out;
  }

 private:
  struct Guard {
    Parser& p;
    explicit Guard(Parser& pp) : p(pp) {
      if (++p.depth_ > p.limits_.max_nesting)
        p.error(p.peek(), "template nests deeper than " + std::to_string(p.limits_.max_nesting) + " levels");
    }
    ~Guard() { --p.depth_; }
  };

  const Token& peek(size_t k = 0) const { return t_[std::min(cur_ + k, t_.size() - 1)]; }
  const Token& next() {
    const Token& tk = t_[cur_];
    if (cur_ + 1 < t_.size()) ++cur_;
    return tk;
  }
  bool is(Tok t) const { return peek().type == t; }
  bool is_ident(const char* name, size_t k = 0) const {
    return peek(k).type == Tok::Ident && peek(k).value == name;
  }
  bool is_statement(std::initializer_list<const char*> names) const {
    if (!is(Tok::OpenStmt) || peek(1).type != Tok::Ident) return false;
    for (const char* n : names)
      if (peek(1).value == n) return true;
    return false;
  }

  [[noreturn]] void error(const Token& at, const std::string& msg) const {
    fail(ErrorKind::Corrupt, std::string(kWhere) + " line " + std::to_string(at.line) + " col " + std::to_string(at.col),
         msg);
  }
  const Token& expect(Tok t, const char* context) {
    if (!is(t))
      error(peek(), std::string("expected ") + tok_name(t) + " " + context + ", found " + describe(peek()));
    return next();
  }
  void expect_ident(const char* name, const char* context) {
    if (!is_ident(name)) error(peek(), std::string("expected '") + name + "' " + context + ", found " + describe(peek()));
    next();
  }
  static std::string describe(const Token& tk) {
    if (tk.type == Tok::Ident || tk.type == Tok::Num) return std::string(tok_name(tk.type)) + " '" + tk.value + "'";
    if (tk.type == Tok::Str) return "a string";
    if (tk.type == Tok::Add || tk.type == Tok::Mul || tk.type == Tok::Cmp || tk.type == Tok::Unary)
      return "'" + tk.value + "'";
    return tok_name(tk.type);
  }

  NodePtr node(NodeKind k, const Token& at) { return std::make_unique<Node>(k, at.line, at.col); }
  NodePtr fin(NodePtr n) {
    int d = 0;
    for (auto& c : n->a)
      if (c) d = std::max(d, c->depth);
    for (auto& arg : n->args)
      if (arg.value) d = std::max(d, arg.value->depth);
    n->depth = d + 1;
    if (n->depth > 4 * limits_.max_nesting)
      fail(ErrorKind::Capacity, std::string(kWhere) + " " + n->where(),
           "expression nests deeper than " + std::to_string(4 * limits_.max_nesting) + " levels");
    return n;
  }

  // Statements until one of `ends` (not consumed); `what` names the open block for errors.
  std::vector<NodePtr> parse_until(std::initializer_list<const char*> ends, const char* what, const Token& opened) {
    std::vector<NodePtr> body;
    while (!is_statement(ends)) {
      if (is(Tok::End))
        error(opened, std::string("'{% ") + what + " %}' is never closed (expected '{% " + *ends.begin() + " %}')");
      if (is(Tok::OpenStmt) && peek(1).type == Tok::Ident && is_block_keyword(peek(1).value))
        error(peek(1), "found '{% " + peek(1).value + " %}' inside '{% " + what + " %}' (line " +
                           std::to_string(opened.line) + " col " + std::to_string(opened.col) + "), expected '{% " +
                           closing_name(ends) + " %}'");
      body.push_back(parse_any());
    }
    return body;
  }
  static std::string closing_name(std::initializer_list<const char*> ends) {
    for (const char* e : ends)
      if (std::strncmp(e, "end", 3) == 0) return e;
    return *ends.begin();
  }
  static bool is_block_keyword(const std::string& n) {
    return n == "elif" || n == "else" || n == "endif" || n == "endfor" || n == "endset" || n == "endmacro" ||
           n == "endcall" || n == "endfilter";
  }
  void close_block(const char* end_name) {
    expect(Tok::OpenStmt, "");
    expect_ident(end_name, "");
    expect(Tok::CloseStmt, (std::string("after '") + end_name + "'").c_str());
  }

  NodePtr parse_any() {
    Guard g(*this);
    const Token& tk = peek();
    switch (tk.type) {
      case Tok::Comment: next(); return parse_any_or_empty();
      case Tok::Text: {
        auto n = node(NodeKind::Text, tk);
        n->literal = Value(tk.value);
        next();
        return n;
      }
      case Tok::OpenStmt: return parse_statement();
      case Tok::OpenExpr: {
        next();
        auto n = node(NodeKind::Output, tk);
        n->a.push_back(parse_expression());
        expect(Tok::CloseExpr, "to close '{{'");
        return fin(std::move(n));
      }
      default: error(tk, "unexpected " + describe(tk) + " outside a tag");
    }
  }
  NodePtr parse_any_or_empty() {
    auto n = std::make_unique<Node>(NodeKind::Text, t_[cur_ ? cur_ - 1 : 0].line, t_[cur_ ? cur_ - 1 : 0].col);
    n->literal = Value(std::string());
    return n;
  }

  NodePtr parse_statement() {
    const Token& open = next();  // {%
    if (!is(Tok::Ident)) error(peek(), "expected a statement name after '{%', found " + describe(peek()));
    const Token& name_tok = next();
    const std::string& name = name_tok.value;
    if (name == "set") return parse_set(open);
    if (name == "if") {
      auto n = parse_if(open);
      close_block("endif");
      return n;
    }
    if (name == "for") return parse_for(open);
    if (name == "macro") return parse_macro(open);
    if (name == "call") return parse_call_block(open);
    if (name == "filter") return parse_filter_block(open);
    if (name == "break" || name == "continue") {
      expect(Tok::CloseStmt, ("after '" + name + "'").c_str());
      return node(name == "break" ? NodeKind::Break : NodeKind::Continue, open);
    }
    if (name == "elif" || name == "else" || name == "endif" || name == "endfor" || name == "endset" ||
        name == "endmacro" || name == "endcall" || name == "endfilter")
      error(name_tok, "'{% " + name + " %}' without a matching opening block");
    fail(ErrorKind::Unsupported, std::string(kWhere) + " line " + std::to_string(name_tok.line) + " col " + std::to_string(name_tok.col),
         "statement '{% " + name + " %}' is not supported");
  }

  NodePtr parse_set(const Token& open) {
    auto n = node(NodeKind::Set, open);
    NodePtr target = parse_expression_sequence(false);
    if (target->kind == NodeKind::Name) {
      n->targets.push_back(target->name);
    } else if (target->kind == NodeKind::TupleLit) {
      n->tuple_target = true;
      for (auto& e : target->a) {
        if (e->kind != NodeKind::Name) error(open, "'{% set %}' can only unpack into names");
        n->targets.push_back(e->name);
      }
    } else if (target->kind == NodeKind::Attr) {
      n->name = target->name;
      n->a.push_back(std::move(target->a[0]));
    } else {
      error(open, "'{% set %}' needs a name, a tuple of names or namespace.attribute on its left");
    }
    if (n->a.empty()) n->a.push_back(nullptr);
    if (is(Tok::Equals)) {
      next();
      n->a.push_back(parse_expression_sequence(false));
      expect(Tok::CloseStmt, "to close '{% set %}'");
    } else {
      expect(Tok::CloseStmt, "to close '{% set %}' (or '=' for a value)");
      n->body = parse_until({"endset"}, "set", open);
      close_block("endset");
      n->a.push_back(nullptr);
    }
    return fin(std::move(n));
  }

  NodePtr parse_if(const Token& open) {
    auto n = node(NodeKind::If, open);
    n->a.push_back(parse_expression());
    expect(Tok::CloseStmt, "to close '{% if %}'");
    n->body = parse_until({"elif", "else", "endif"}, "if", open);
    if (is_statement({"elif"})) {
      const Token& elif = next();
      next();
      n->alt.push_back(parse_if(elif));
    } else if (is_statement({"else"})) {
      next();
      next();
      expect(Tok::CloseStmt, "after 'else'");
      n->alt = parse_until({"endif"}, "if", open);
    }
    return fin(std::move(n));
  }

  NodePtr parse_for(const Token& open) {
    auto n = node(NodeKind::For, open);
    NodePtr target = parse_expression_sequence(true);
    if (target->kind == NodeKind::Name) {
      n->targets.push_back(target->name);
    } else if (target->kind == NodeKind::TupleLit) {
      n->tuple_target = true;
      for (auto& e : target->a) {
        if (e->kind != NodeKind::Name) error(open, "'{% for %}' can only unpack into names");
        n->targets.push_back(e->name);
      }
    } else {
      error(open, "'{% for %}' needs a name or a tuple of names before 'in'");
    }
    expect_ident("in", "after the loop variable of '{% for %}'");
    NodePtr iter = parse_expression();
    if (iter->kind == NodeKind::Ternary && !iter->a[2]) {  // `for x in xs if cond`: a loop filter
      n->a.push_back(std::move(iter->a[1]));
      n->a.push_back(std::move(iter->a[0]));
    } else {
      n->a.push_back(std::move(iter));
      n->a.push_back(nullptr);
    }
    if (is_ident("recursive"))
      fail(ErrorKind::Unsupported, std::string(kWhere) + " line " + std::to_string(peek().line) + " col " + std::to_string(peek().col),
           "recursive '{% for %}' loops are not supported");
    expect(Tok::CloseStmt, "to close '{% for %}'");
    n->body = parse_until({"endfor", "else"}, "for", open);
    if (is_statement({"else"})) {
      next();
      next();
      expect(Tok::CloseStmt, "after 'else'");
      n->alt = parse_until({"endfor"}, "for", open);
    }
    close_block("endfor");
    return fin(std::move(n));
  }

  NodePtr parse_macro(const Token& open) {
    auto n = node(NodeKind::Macro, open);
    if (!is(Tok::Ident)) error(peek(), "expected the macro name after '{% macro', found " + describe(peek()));
    n->name = next().value;
    n->params = parse_params();
    expect(Tok::CloseStmt, "to close '{% macro %}'");
    n->body = parse_until({"endmacro"}, "macro", open);
    close_block("endmacro");
    return n;
  }

  NodePtr parse_call_block(const Token& open) {
    auto n = node(NodeKind::CallBlock, open);
    if (is(Tok::LParen)) n->params = parse_params();
    if (!is(Tok::Ident)) error(peek(), "expected a macro name after '{% call', found " + describe(peek()));
    const Token& callee_tok = peek();
    auto callee = node(NodeKind::Name, callee_tok);
    callee->name = next().value;
    auto call = node(NodeKind::Call, callee_tok);
    call->a.push_back(std::move(callee));
    call->args = parse_call_args();
    n->a.push_back(fin(std::move(call)));
    expect(Tok::CloseStmt, "to close '{% call %}'");
    n->body = parse_until({"endcall"}, "call", open);
    close_block("endcall");
    return n;
  }

  NodePtr parse_filter_block(const Token& open) {
    auto n = node(NodeKind::FilterBlock, open);
    if (!is(Tok::Ident)) error(peek(), "expected a filter name after '{% filter', found " + describe(peek()));
    const Token& ft = peek();
    auto f = node(NodeKind::Filter, ft);
    f->name = next().value;
    f->a.push_back(nullptr);
    if (is(Tok::LParen)) f->args = parse_call_args();
    n->a.push_back(fin(std::move(f)));
    expect(Tok::CloseStmt, "to close '{% filter %}'");
    n->body = parse_until({"endfilter"}, "filter", open);
    close_block("endfilter");
    return n;
  }

  std::vector<Param> parse_params() {
    std::vector<Param> params;
    expect(Tok::LParen, "to open the parameter list");
    bool saw_default = false;
    while (!is(Tok::RParen)) {
      if (!is(Tok::Ident)) error(peek(), "expected a parameter name, found " + describe(peek()));
      Param p;
      const Token& pt = next();
      p.name = pt.value;
      for (auto& q : params)
        if (q.name == p.name) error(pt, "duplicate parameter '" + p.name + "'");
      if (is(Tok::Equals)) {
        next();
        p.default_value = parse_expression();
        saw_default = true;
      } else if (saw_default) {
        error(pt, "parameter '" + p.name + "' without a default follows one with a default");
      }
      params.push_back(std::move(p));
      if (is(Tok::Comma)) next();
      else if (!is(Tok::RParen)) error(peek(), "expected ',' or ')' in the parameter list, found " + describe(peek()));
    }
    next();
    return params;
  }

  std::vector<Arg> parse_call_args() {
    std::vector<Arg> args;
    expect(Tok::LParen, "to open the argument list");
    bool saw_keyword = false;
    while (!is(Tok::RParen)) {
      Guard g(*this);
      Arg arg;
      const Token& at = peek();
      if (is(Tok::Pow)) {
        next();
        arg.spread = 2;
        arg.value = parse_expression();
      } else if (is(Tok::Mul) && peek().value == "*") {
        next();
        arg.spread = 1;
        arg.value = parse_expression();
      } else if (is(Tok::Ident) && peek(1).type == Tok::Equals) {
        arg.key = next().value;
        next();
        arg.value = parse_expression();
        saw_keyword = true;
      } else {
        arg.value = parse_expression();
        if (saw_keyword) error(at, "positional argument after a keyword argument");
      }
      args.push_back(std::move(arg));
      if (is(Tok::Comma)) next();
      else if (!is(Tok::RParen)) error(peek(), "expected ',' or ')' in the argument list, found " + describe(peek()));
    }
    next();
    return args;
  }

  NodePtr parse_expression_sequence(bool primary) {
    const Token& at = peek();
    NodePtr first = primary ? parse_primary() : parse_expression();
    if (!is(Tok::Comma)) return first;
    auto tup = node(NodeKind::TupleLit, at);
    tup->a.push_back(std::move(first));
    while (is(Tok::Comma)) {
      next();
      if (is(Tok::CloseStmt) || is(Tok::RParen) || is(Tok::Equals) || is_ident("in")) break;
      tup->a.push_back(primary ? parse_primary() : parse_expression());
    }
    return fin(std::move(tup));
  }

  NodePtr parse_expression() {
    Guard g(*this);
    const Token& at = peek();
    NodePtr a = parse_or();
    if (!is_ident("if")) return a;
    next();
    auto n = node(NodeKind::Ternary, at);
    NodePtr cond = parse_or();
    NodePtr other;
    if (is_ident("else")) {
      next();
      other = parse_expression();
    }
    n->a.push_back(std::move(cond));
    n->a.push_back(std::move(a));
    n->a.push_back(std::move(other));
    return fin(std::move(n));
  }

  NodePtr parse_or() {
    NodePtr left = parse_and();
    while (is_ident("or")) {
      auto n = node(NodeKind::Or, next());
      n->a.push_back(std::move(left));
      n->a.push_back(parse_and());
      left = fin(std::move(n));
    }
    return left;
  }
  NodePtr parse_and() {
    NodePtr left = parse_not();
    while (is_ident("and")) {
      auto n = node(NodeKind::And, next());
      n->a.push_back(std::move(left));
      n->a.push_back(parse_not());
      left = fin(std::move(n));
    }
    return left;
  }
  NodePtr parse_not() {
    if (is_ident("not")) {
      Guard g(*this);
      auto n = node(NodeKind::Unary, next());
      n->name = "not";
      n->a.push_back(parse_not());
      return fin(std::move(n));
    }
    return parse_comparison();
  }
  NodePtr parse_comparison() {
    NodePtr left = parse_additive();
    while (true) {
      std::string op;
      const Token& at = peek();
      if (is_ident("not") && is_ident("in", 1)) {
        next();
        next();
        op = "not in";
      } else if (is_ident("in")) {
        next();
        op = "in";
      } else if (is(Tok::Cmp)) {
        op = next().value;
      } else {
        break;
      }
      auto n = node(NodeKind::Binary, at);
      n->name = op;
      n->a.push_back(std::move(left));
      n->a.push_back(parse_additive());
      left = fin(std::move(n));
    }
    return left;
  }
  NodePtr parse_additive() {
    NodePtr left = parse_multiplicative();
    while (is(Tok::Add)) {
      auto n = node(NodeKind::Binary, peek());
      n->name = next().value;
      n->a.push_back(std::move(left));
      n->a.push_back(parse_multiplicative());
      left = fin(std::move(n));
    }
    return left;
  }
  NodePtr parse_multiplicative() {
    NodePtr left = parse_power();
    while (is(Tok::Mul)) {
      auto n = node(NodeKind::Binary, peek());
      n->name = next().value;
      n->a.push_back(std::move(left));
      n->a.push_back(parse_power());
      left = fin(std::move(n));
    }
    return left;
  }
  NodePtr parse_power() {  // left-associative, as in Jinja
    NodePtr left = parse_test();
    while (is(Tok::Pow)) {
      auto n = node(NodeKind::Binary, peek());
      n->name = next().value;
      n->a.push_back(std::move(left));
      n->a.push_back(parse_test());
      left = fin(std::move(n));
    }
    return left;
  }
  NodePtr parse_test() {
    NodePtr operand = parse_filter();
    while (is_ident("is")) {
      auto n = node(NodeKind::Test, next());
      if (is_ident("not")) {
        next();
        n->negate = true;
      }
      if (is(Tok::Ident)) {
        n->name = next().value;
      } else if (is(Tok::Cmp)) {  // `x is == 3` is not Jinja; accept test names only
        error(peek(), "expected a test name after 'is', found " + describe(peek()));
      } else {
        error(peek(), "expected a test name after 'is', found " + describe(peek()));
      }
      n->a.push_back(std::move(operand));
      if (is(Tok::LParen)) n->args = parse_call_args();
      operand = fin(std::move(n));
    }
    return operand;
  }
  NodePtr parse_filter() {
    NodePtr operand = parse_unary();
    while (is(Tok::Pipe)) {
      next();
      if (!is(Tok::Ident)) error(peek(), "expected a filter name after '|', found " + describe(peek()));
      auto n = node(NodeKind::Filter, peek());
      n->name = next().value;
      n->a.push_back(std::move(operand));
      if (is(Tok::LParen)) n->args = parse_call_args();
      operand = fin(std::move(n));
    }
    return operand;
  }
  NodePtr parse_unary() {
    if ((is(Tok::Unary) || is(Tok::Add)) && (peek().value == "-" || peek().value == "+")) {
      Guard g(*this);
      auto n = node(NodeKind::Unary, peek());
      n->name = next().value;
      n->a.push_back(parse_unary());
      return fin(std::move(n));
    }
    NodePtr e = parse_member(parse_primary());
    while (is(Tok::LParen)) e = parse_member(parse_call(std::move(e)));
    return e;
  }
  NodePtr parse_call(NodePtr callee) {
    auto n = std::make_unique<Node>(NodeKind::Call, callee->line, callee->col);
    n->a.push_back(std::move(callee));
    n->args = parse_call_args();
    return fin(std::move(n));
  }
  NodePtr parse_member(NodePtr obj) {
    while (is(Tok::Dot) || is(Tok::LBracket)) {
      const Token& op = next();
      if (op.type == Tok::Dot) {
        const Token& at = peek();
        if (at.type == Tok::Ident) {
          auto n = node(NodeKind::Attr, at);
          n->name = next().value;
          n->a.push_back(std::move(obj));
          obj = fin(std::move(n));
        } else if (at.type == Tok::Num && at.value.find('.') == std::string::npos && at.value[0] != '-' &&
                   at.value[0] != '+') {
          auto n = node(NodeKind::Index, at);
          n->a.push_back(std::move(obj));
          auto lit = node(NodeKind::Literal, at);
          lit->literal = parse_int(at);
          next();
          n->a.push_back(std::move(lit));
          obj = fin(std::move(n));
        } else {
          error(at, "expected an attribute name after '.', found " + describe(at));
        }
        continue;
      }
      // subscript or slice
      std::vector<NodePtr> parts;
      bool slice = false;
      while (!is(Tok::RBracket)) {
        if (is(Tok::End)) error(op, "'[' is never closed");
        if (is(Tok::Colon)) {
          parts.push_back(nullptr);
          next();
          slice = true;
        } else {
          parts.push_back(parse_expression());
          if (is(Tok::Colon)) {
            next();
            slice = true;
          } else if (!is(Tok::RBracket)) {
            error(peek(), "expected ']' or ':' in a subscript, found " + describe(peek()));
          }
        }
      }
      next();  // ]
      if (parts.empty()) error(op, "empty subscript '[]'");
      if (slice) {
        if (parts.size() > 3) error(op, "a slice takes at most start:stop:step");
        auto n = node(NodeKind::Slice, op);
        n->a.push_back(std::move(obj));
        for (auto& p : parts) n->a.push_back(std::move(p));
        while (n->a.size() < 4) n->a.push_back(nullptr);
        obj = fin(std::move(n));
      } else {
        if (parts.size() != 1) error(op, "a subscript takes one expression");
        auto n = node(NodeKind::Index, op);
        n->a.push_back(std::move(obj));
        n->a.push_back(std::move(parts[0]));
        obj = fin(std::move(n));
      }
    }
    return obj;
  }

  Value parse_int(const Token& at) {
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(at.value.c_str(), &end, 10);
    if (errno == ERANGE || *end != '\0') error(at, "integer literal '" + at.value + "' is out of range");
    return Value(static_cast<int64_t>(v));
  }

  NodePtr parse_primary() {
    Guard g(*this);
    const Token& tk = next();
    switch (tk.type) {
      case Tok::Num: {
        auto n = node(NodeKind::Literal, tk);
        if (tk.value.find('.') != std::string::npos) n->literal = Value(std::strtod(tk.value.c_str(), nullptr));
        else n->literal = parse_int(tk);
        return n;
      }
      case Tok::Str: {
        auto n = node(NodeKind::Literal, tk);
        std::string s = tk.value;
        while (is(Tok::Str)) s += next().value;
        n->literal = Value(std::move(s));
        return n;
      }
      case Tok::Ident: {
        const std::string& v = tk.value;
        if (v == "true" || v == "True" || v == "false" || v == "False") {
          auto n = node(NodeKind::Literal, tk);
          n->literal = Value(v == "true" || v == "True");
          return n;
        }
        if (v == "none" || v == "None") {
          auto n = node(NodeKind::Literal, tk);
          n->literal = Value::none();
          return n;
        }
        auto n = node(NodeKind::Name, tk);
        n->name = v;
        return n;
      }
      case Tok::LParen: {
        if (is(Tok::RParen)) {  // ()
          next();
          return fin(node(NodeKind::TupleLit, tk));
        }
        NodePtr e = parse_expression_sequence(false);
        expect(Tok::RParen, "to close '('");
        return e;
      }
      case Tok::LBracket: {
        auto n = node(NodeKind::ListLit, tk);
        while (!is(Tok::RBracket)) {
          if (is(Tok::End)) error(tk, "'[' is never closed");
          n->a.push_back(parse_expression());
          if (is(Tok::Comma)) next();
          else if (!is(Tok::RBracket)) error(peek(), "expected ',' or ']' in a list, found " + describe(peek()));
        }
        next();
        return fin(std::move(n));
      }
      case Tok::LBrace: {
        auto n = node(NodeKind::DictLit, tk);
        while (!is(Tok::RBrace)) {
          if (is(Tok::End)) error(tk, "'{' is never closed");
          n->a.push_back(parse_expression());
          expect(Tok::Colon, "between a key and its value in a dict");
          n->a.push_back(parse_expression());
          if (is(Tok::Comma)) next();
          else if (!is(Tok::RBrace)) error(peek(), "expected ',' or '}' in a dict, found " + describe(peek()));
        }
        next();
        return fin(std::move(n));
      }
      default: error(tk, "expected an expression, found " + describe(tk));
    }
  }

  std::vector<Token> t_;
  size_t cur_ = 0;
  int depth_ = 0;
  const Limits& limits_;
};

}  // namespace

std::vector<NodePtr> parse_template(const std::string& source, const Limits& limits) {
  if (source.size() > limits.max_template_bytes)
    fail(ErrorKind::Capacity, kWhere,
         "template is " + std::to_string(source.size()) + " bytes, more than the limit of " +
             std::to_string(limits.max_template_bytes));
  Lexer lexer(source, preprocess(source));
  Parser parser(lexer.run(), limits);
  return parser.parse_all();
}

}  // namespace ptn::jinja
