#include "generate/chat_prompt.h"

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ptn::gen {

namespace {

using ojson = nlohmann::ordered_json;

bool contains_string(const ojson& j, const std::string& needle) {
  if (j.is_string()) return j.get_ref<const std::string&>().find(needle) != std::string::npos;
  if (j.is_array() || j.is_object())
    for (const auto& [k, v] : j.items())
      if (k.find(needle) != std::string::npos || contains_string(v, needle)) return true;
  return false;
}

// Replaces control-token texts in request strings by placeholders; remembers the originals.
class Placeholders {
 public:
  Placeholders(const Tokenizer& tok, const std::string& mark) : tok_(tok), mark_(mark) {}

  void replace_in(ojson& j) {
    if (j.is_string()) {
      std::string& s = j.get_ref<std::string&>();
      const std::vector<ByteSpan> spans = tok_.find_control_tokens(s);
      if (spans.empty()) return;
      std::string out;
      size_t at = 0;
      for (const ByteSpan& sp : spans) {
        out.append(s, at, sp.begin - at);
        out += mark_ + std::to_string(originals_.size()) + mark_;
        originals_.push_back(s.substr(sp.begin, sp.end - sp.begin));
        at = sp.end;
      }
      out.append(s, at, std::string::npos);
      s = std::move(out);
    } else if (j.is_array() || j.is_object()) {
      for (auto& v : j) replace_in(v);
    }
  }
  bool empty() const { return originals_.empty(); }

  // Puts the originals back into `rendered`; their byte ranges go to *spans.
  std::string restore(const std::string& rendered, std::vector<ByteSpan>* spans) const {
    std::string out;
    size_t at = 0;
    for (size_t p = rendered.find(mark_); p != std::string::npos; p = rendered.find(mark_, at)) {
      out.append(rendered, at, p - at);
      size_t q = p + mark_.size(), idx = 0, digits = 0;
      while (q < rendered.size() && rendered[q] >= '0' && rendered[q] <= '9' && digits < 9)
        idx = idx * 10 + static_cast<size_t>(rendered[q++] - '0'), ++digits;
      if (digits == 0 || idx >= originals_.size() || rendered.compare(q, mark_.size(), mark_) != 0)
        fail(ErrorKind::InvalidArgument, "messages",
             "the chat template cut apart request text that contains control-token text; it cannot be kept as text");
      spans->push_back({out.size(), out.size() + originals_[idx].size()});
      out += originals_[idx];
      at = q + mark_.size();
    }
    out.append(rendered, at, std::string::npos);
    return out;
  }

 private:
  const Tokenizer& tok_;
  std::string mark_;
  std::vector<std::string> originals_;
};

// A private-use character that appears nowhere in the template or the request.
std::string pick_mark(const std::string& tmpl, const ojson& messages, const chat::ChatOptions& opts) {
  for (uint32_t cp = 0xE000; cp < 0xF900; ++cp) {
    std::string m;
    tok::append_utf8(m, cp);
    if (tmpl.find(m) == std::string::npos && !contains_string(messages, m) && !contains_string(opts.tools, m) &&
        !contains_string(opts.extra, m))
      return m;
  }
  fail(ErrorKind::InvalidArgument, "messages", "the request uses every private-use character");
}

}  // namespace

void add_chat_bos(const Tokenizer& tok, std::vector<int32_t>& ids) {
  if (tok.spec().add_bos && tok.bos() && (ids.empty() || ids.front() != *tok.bos())) ids.insert(ids.begin(), *tok.bos());
}

ChatPrompt render_chat_prompt(const Tokenizer& tok, const std::string& chat_template, const ojson& messages,
                              const chat::ChatOptions& opts, bool parse_special_in_request) {
  ChatPrompt p;
  if (parse_special_in_request) {
    p.text = chat::render_chat(chat_template, messages, opts);
    p.ids = tok.encode(p.text, /*add_special=*/false, /*parse_special=*/true);
  } else {
    const std::string mark = pick_mark(chat_template, messages, opts);
    Placeholders ph(tok, mark);
    ojson msgs = messages;
    chat::ChatOptions o = opts;
    ph.replace_in(msgs);
    ph.replace_in(o.tools);
    ph.replace_in(o.extra);
    std::vector<ByteSpan> literal;
    p.text = ph.restore(chat::render_chat(chat_template, msgs, o), &literal);
    p.ids = tok.encode_with_literals(p.text, /*add_special=*/false, literal);
  }
  add_chat_bos(tok, p.ids);
  return p;
}

}  // namespace ptn::gen
