// OpenAI's harmony response format (gpt-oss): a reply is a series of messages, each a header and
// a body,
//   [<|start|>assistant][ to=RECIPIENT]<|channel|>CHANNEL[ to=RECIPIENT][ <|constrain|>TYPE | TYPE]<|message|>BODY
// ended by <|end|> (more follows), <|call|> (a tool call: generation stops) or <|return|> (the
// reply is done). The generation prompt ends in "<|start|>assistant", so the first header starts
// at the channel. Channels: `analysis` (chain of thought) becomes reasoning_content, `final`
// content, `commentary` to `functions.NAME` a tool call whose arguments are the body, commentary
// without a recipient (a preamble the user may see) content.
//
// The reply is decoded with its control tokens kept as text, so the markers can be found; text
// without any harmony header is content as it stands (nothing is lost).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "serve/tools.h"

namespace ptn::serve {

struct HarmonyMessage {
  std::string channel;    // "analysis", "final", "commentary", or "" when the header names none
  std::string recipient;  // e.g. "functions.get_weather"; "" for none
  std::string content_type;  // "json" from "<|constrain|>json" or a bare " json"; "" for none
  std::string body;
  bool complete = false;  // its end marker was seen
};

// Whether a chat template and its tokenizer speak harmony: the template writes "<|channel|>"
// and "<|message|>", and the tokenizer has them, <|return|> and <|call|> as control tokens.
bool is_harmony_template(const std::string& chat_template);

// The messages of a reply. A header still forming (no <|message|> yet) is left out; so is the
// tail of a body that may be the start of an end marker when `final` is false.
std::vector<HarmonyMessage> parse_harmony(std::string_view text, bool final);

struct HarmonyReply {
  std::string reasoning;  // the analysis bodies, "\n\n" between them
  ToolOutput out;         // content: final and preamble bodies, "\n\n" between them; calls
};

// A reply split into reasoning, content and tool calls. A call needs `tools` (the request's) to
// name one of its functions and its body to be a JSON object; otherwise its body stays content.
// With `final` false (streaming) the parts are prefixes of what the finished reply gives, and
// calls are left out until the reply is finished. `trim` trims the reasoning and the content
// (raw_content keeps its spaces either way).
HarmonyReply harmony_reply(std::string_view text, const ToolRequest* tools, bool final, bool trim);

// harmony_reply for a stream whose text only grows, in time linear in the new text: messages
// already ended are kept and only the open one is parsed again.
class HarmonyStream {
 public:
  void update(const std::string& text);
  const std::string& reasoning() const { return reasoning_; }
  const std::string& content() const { return content_; }

 private:
  bool plain_ = false;  // the reply does not start with a harmony header: all of it is content
  size_t done_ = 0;     // bytes of text that ended messages cover
  std::string done_reasoning_, done_content_;
  std::string reasoning_, content_;
};

}  // namespace ptn::serve
