#include "serve/reasoning.h"

#include <algorithm>

#include "core/text.h"

namespace ptn::serve {
namespace {

constexpr const char* kOpen = "<think>";
constexpr const char* kClose = "</think>";

using text::is_space;

std::string ltrim(const std::string& s) { return std::string(text::ltrim(s)); }
std::string rtrim(const std::string& s) { return std::string(text::rtrim(s)); }
size_t partial_tag(const std::string& s, const std::string& tag) { return text::partial_prefix_suffix(s, tag); }

// Where the reasoning starts in `text` (npos: the reply has none; text.size() + 1: undecided).
size_t reasoning_start(const ReasoningMode& m, const std::string& text, bool final) {
  if (m.starts_inside) return 0;
  size_t b = 0;
  while (b < text.size() && is_space(text[b])) ++b;
  const std::string open = kOpen;
  if (text.compare(b, open.size(), open) == 0) return b + open.size();
  if (!final && text.size() - b < open.size() && open.compare(0, text.size() - b, text, b) == 0)
    return text.size() + 1;  // "<thi" may still become "<think>"
  return std::string::npos;
}

ReasoningSplit split(const ReasoningMode& m, const std::string& text, bool final, bool trim_end) {
  ReasoningSplit out;
  if (!m.enabled) {
    out.content = text;
    return out;
  }
  const size_t start = reasoning_start(m, text, final);
  if (start == text.size() + 1) return out;  // undecided: hold all
  if (start == std::string::npos) {
    out.content = final ? text : (ltrim(text).empty() ? "" : text);
    return out;
  }
  const size_t close = text.find(kClose, start);
  if (close == std::string::npos) {
    std::string r = text.substr(start);
    if (!final) r.resize(r.size() - partial_tag(r, kClose));
    out.reasoning = trim_end ? rtrim(ltrim(r)) : ltrim(r);
    return out;
  }
  out.reasoning = ltrim(text.substr(start, close - start));
  if (trim_end) out.reasoning = rtrim(out.reasoning);
  out.content = ltrim(text.substr(close + std::string(kClose).size()));
  return out;
}

}  // namespace

ReasoningMode reasoning_mode(const std::string& chat_template, const std::string& prompt_text) {
  ReasoningMode m;
  m.enabled = chat_template.find(kOpen) != std::string::npos && chat_template.find(kClose) != std::string::npos;
  if (!m.enabled) return m;
  const std::string p = rtrim(prompt_text);
  const std::string open = kOpen;
  m.starts_inside = p.size() >= open.size() && p.compare(p.size() - open.size(), open.size(), open) == 0;
  return m;
}

ReasoningSplit split_reasoning(const ReasoningMode& m, const std::string& text, bool trim) {
  return split(m, text, true, trim);
}

ReasoningSplit split_reasoning_so_far(const ReasoningMode& m, const std::string& text) {
  return split(m, text, false, false);
}

void ReasoningStream::update(const std::string& text) {
  const size_t n = text.size();
  const std::string close_tag = kClose;
  if (!m_.enabled) {
    content_ = {0, n};
    return;
  }
  auto skip_space = [&](size_t& at, size_t end) {
    while (at < end && is_space(text[at])) ++at;
  };
  if (phase_ == Phase::Undecided) {
    if (m_.starts_inside) {
      phase_ = Phase::Inside;
      start_ = 0;
    } else {
      skip_space(lead_, n);  // (lead_ is the first byte that is not a space, or n)
      const std::string open = kOpen;
      const size_t have = n - lead_;
      if (have >= open.size() && text.compare(lead_, open.size(), open) == 0) {
        phase_ = Phase::Inside;
        start_ = lead_ + open.size();
      } else if (have < open.size() && open.compare(0, have, text, lead_, have) == 0) {
        return;  // "<thi" may still become "<think>" (or the reply is all spaces so far): hold all
      } else {
        phase_ = Phase::Plain;
      }
    }
    lead_ = start_;
    scan_ = start_;
  }
  if (phase_ == Phase::Plain) {
    // Content is the whole text once it is not all spaces.
    skip_space(lead_, n);
    content_ = lead_ < n ? Span{0, n} : Span{0, 0};
    return;
  }
  if (phase_ == Phase::Inside) {
    const size_t close = text.find(close_tag, scan_);
    if (close == std::string::npos) {
      // The reasoning so far, without a tail that may still become "</think>"; the next search
      // starts where such a tail could begin.
      const size_t end = n - partial_tag(text.substr(n - std::min(n - start_, close_tag.size())), close_tag);
      scan_ = std::max(start_, n >= close_tag.size() ? n - close_tag.size() + 1 : start_);
      skip_space(lead_, end);
      reasoning_ = lead_ < end ? Span{lead_, end} : Span{lead_, lead_};
      return;
    }
    skip_space(lead_, close);
    reasoning_ = {std::min(lead_, close), close};
    phase_ = Phase::After;
    after_ = close + close_tag.size();
  }
  // After "</think>": the content, without its leading spaces.
  skip_space(after_, n);
  content_ = {after_, n};
}

}  // namespace ptn::serve
