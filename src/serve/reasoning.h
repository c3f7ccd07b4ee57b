// Reasoning in replies: a `<think> ... </think>` section (Qwen 3, QwQ, DeepSeek-R1 and its
// distills) is returned as `reasoning_content`, the rest as `content`, as vLLM's and
// llama-server's reasoning parsers return them. On when the chat template writes both tags.
// A prompt that ends inside an open <think> (templates that open it in the generation prompt)
// makes the reply start in the reasoning; a reply that never closes it is all reasoning.
#pragma once
#include <cstddef>
#include <string>

namespace ptn::serve {

struct ReasoningMode {
  bool enabled = false;
  bool starts_inside = false;  // the prompt ends in an open <think>
  bool harmony = false;        // a harmony reply (serve/harmony.h): channels, not <think> tags
};

// From the template and the rendered prompt of a request.
ReasoningMode reasoning_mode(const std::string& chat_template, const std::string& prompt_text);

struct ReasoningSplit {
  std::string reasoning;  // the text inside the think section (trimmed)
  std::string content;    // the text after it (leading whitespace dropped)
};

// A finished reply, split; with `trim` false the reasoning keeps its trailing whitespace (the
// end of a stream continues what split_reasoning_so_far gave).
ReasoningSplit split_reasoning(const ReasoningMode& m, const std::string& text, bool trim = true);

// Streaming: the parts of the reply so far that can be sent now. Both only grow as text grows:
// a tag that may still be forming is held back, and so is content that is all whitespace.
ReasoningSplit split_reasoning_so_far(const ReasoningMode& m, const std::string& text);

// split_reasoning_so_far for a stream, with work proportional to the new text rather than to
// the whole reply: after update(text), reasoning() and content() are the parts
// split_reasoning_so_far(m, text) gives, as byte ranges of `text`. `text` is the whole reply so
// far and only grows between calls.
class ReasoningStream {
 public:
  struct Span {
    size_t begin = 0, end = 0;
    size_t size() const { return end - begin; }
  };
  explicit ReasoningStream(const ReasoningMode& m) : m_(m) {}
  void update(const std::string& text);
  Span reasoning() const { return reasoning_; }
  Span content() const { return content_; }

 private:
  enum class Phase { Undecided, Plain, Inside, After };
  ReasoningMode m_;
  Phase phase_ = Phase::Undecided;
  size_t start_ = 0;  // Inside / After: the first byte after <think>
  size_t lead_ = 0;   // the first byte not a space (of the reply, or of the reasoning), as far as seen
  size_t scan_ = 0;   // Inside: where the search for </think> goes on
  size_t after_ = 0;  // After: the first byte of the content not a space, as far as seen
  Span reasoning_, content_;
};

}  // namespace ptn::serve
