#include "serve/harmony.h"

#include <algorithm>

#include "core/text.h"

namespace ptn::serve {
namespace {

constexpr std::string_view kStart = "<|start|>", kChannel = "<|channel|>", kMessage = "<|message|>",
                           kConstrain = "<|constrain|>";
constexpr std::string_view kEnds[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};

// A header word: up to a space or the next marker.
std::string word_at(std::string_view h, size_t at) {
  size_t e = at;
  while (e < h.size() && h[e] != ' ' && h[e] != '\t' && h[e] != '\n' && h[e] != '<') ++e;
  return std::string(h.substr(at, e - at));
}

void parse_header(std::string_view h, HarmonyMessage& m) {
  if (const size_t c = h.find(kChannel); c != std::string_view::npos) m.channel = word_at(h, c + kChannel.size());
  if (const size_t t = h.find("to="); t != std::string_view::npos) m.recipient = word_at(h, t + 3);
  if (const size_t k = h.find(kConstrain); k != std::string_view::npos) {
    m.content_type = word_at(h, k + kConstrain.size());
  } else if (const size_t c = h.find(kChannel); c != std::string_view::npos) {
    // "<|channel|>commentary json": a bare content type after the channel (not "to=...").
    size_t at = c + kChannel.size() + m.channel.size();
    while (at < h.size()) {
      while (at < h.size() && h[at] == ' ') ++at;
      if (at >= h.size() || h[at] == '<') break;
      std::string w = word_at(h, at);
      if (w.empty()) break;
      if (w.rfind("to=", 0) != 0) m.content_type = w;
      at += w.size();
    }
  }
}

// The first end marker at or after `from`: its position and length (npos when none).
std::pair<size_t, size_t> find_end(std::string_view text, size_t from) {
  size_t best = std::string_view::npos, len = 0;
  for (std::string_view e : kEnds) {
    const size_t at = text.find(e, from);
    if (at < best) best = at, len = e.size();
  }
  return {best, len};
}

// How many bytes at the end of `s` may be the start of some marker ("<|", "<|en", ...).
size_t partial_marker(std::string_view s) {
  size_t held = 0;
  for (std::string_view e : kEnds) held = std::max(held, text::partial_prefix_suffix(s, e));
  return held;
}

bool starts_like_harmony(std::string_view t) {
  for (std::string_view m : {kChannel, kStart, std::string_view(" to="), std::string_view("to=")}) {
    const size_t n = std::min(t.size(), m.size());
    if (t.substr(0, n) == m.substr(0, n)) return true;
  }
  return false;
}

// Parses from `pos`; `consumed` is set past the last message that ended.
std::vector<HarmonyMessage> parse_from(std::string_view text, size_t pos, bool final, size_t* consumed) {
  std::vector<HarmonyMessage> out;
  if (consumed) *consumed = pos;
  while (pos < text.size()) {
    const size_t msg = text.find(kMessage, pos);
    if (msg == std::string_view::npos) {
      // A header still forming; in a finished reply what is left is kept as text.
      if (final) {
        HarmonyMessage m;
        m.body = std::string(text.substr(pos));
        m.complete = true;
        out.push_back(std::move(m));
      }
      break;
    }
    HarmonyMessage m;
    parse_header(text.substr(pos, msg - pos), m);
    const size_t body = msg + kMessage.size();
    const auto [end, len] = find_end(text, body);
    if (end == std::string_view::npos) {
      std::string_view b = text.substr(body);
      if (!final) b.remove_suffix(partial_marker(b));
      m.body = std::string(b);
      m.complete = final;
      out.push_back(std::move(m));
      break;
    }
    m.body = std::string(text.substr(body, end - body));
    m.complete = true;
    out.push_back(std::move(m));
    // "<|start|>" opens the next header (its role follows); the other markers end the message.
    pos = text.compare(end, kStart.size(), kStart) == 0 ? end : end + len;
    if (consumed) *consumed = pos;
  }
  return out;
}

void append_part(std::string& acc, const std::string& part) {
  if (part.empty()) return;
  if (!acc.empty()) acc += "\n\n";
  acc += part;
}

bool is_call(const HarmonyMessage& m) { return m.recipient.rfind("functions.", 0) == 0; }

}  // namespace

bool is_harmony_template(const std::string& chat_template) {
  return chat_template.find(kChannel) != std::string::npos && chat_template.find(kMessage) != std::string::npos;
}

std::vector<HarmonyMessage> parse_harmony(std::string_view text, bool final) {
  const size_t b = text.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  if (!starts_like_harmony(text.substr(b))) {
    // Not harmony at all: the whole reply is one plain message.
    HarmonyMessage m;
    m.body = std::string(text);
    m.complete = final;
    return {m};
  }
  return parse_from(text, 0, final, nullptr);
}

HarmonyReply harmony_reply(std::string_view text, const ToolRequest* tools, bool final, bool trim) {
  HarmonyReply r;
  std::string unparsed;  // call bodies that are not calls: content, after everything else
  for (const HarmonyMessage& m : parse_harmony(text, final)) {
    if (m.channel == "analysis") {
      append_part(r.reasoning, m.body);
    } else if (is_call(m)) {
      if (!final) continue;  // a call is known when the reply is done
      std::optional<ToolCall> call;
      if (tools) call = tool_call_of(*tools, m.recipient.substr(10), m.body);
      if (call) r.out.calls.push_back(std::move(*call));
      else append_part(unparsed, m.body);
    } else if (m.recipient.empty() || m.channel != "commentary") {
      append_part(r.out.raw_content, m.body);  // final, a preamble, or text outside the format
    }
    // (A message to another recipient, e.g. a built-in tool ptn does not run, is left out.)
  }
  append_part(r.out.raw_content, unparsed);
  r.out.content = trim ? std::string(text::trim(r.out.raw_content)) : r.out.raw_content;
  if (trim) r.reasoning = std::string(text::trim(r.reasoning));
  return r;
}

void HarmonyStream::update(const std::string& text) {
  // Whether the reply is harmony at all is decided by its first bytes that are not spaces.
  if (done_ == 0 && !plain_) {
    const size_t b = text.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return;
    plain_ = !starts_like_harmony(std::string_view(text).substr(b));
  }
  if (plain_) {
    content_ = text;
    return;
  }
  size_t consumed = done_;
  const auto msgs = parse_from(text, done_, false, &consumed);
  std::string reasoning = done_reasoning_, content = done_content_;
  for (const HarmonyMessage& m : msgs) {
    std::string& into = m.channel == "analysis" ? reasoning : content;
    const bool shown = m.channel == "analysis" || (!is_call(m) && (m.recipient.empty() || m.channel != "commentary"));
    if (shown) append_part(into, m.body);
    if (m.complete) {
      done_reasoning_ = reasoning;
      done_content_ = content;
    }
  }
  done_ = consumed;
  reasoning_ = std::move(reasoning);
  content_ = std::move(content);
}

}  // namespace ptn::serve
