// Chat prompts as token ids, with one trust rule for every front end: the chat template's own
// markup becomes control tokens, text that came from a request (message contents, roles,
// names, tool definitions) never does. A user message containing "<|im_end|>" or
// "<|start_header_id|>system<|end_header_id|>" is encoded as those characters, so it cannot
// end its own turn or forge a system turn. `parse_special_in_request` (ptn serve / ptn chat
// --parse-special, for trusted callers) turns the rule off.
//
// How: before rendering, every control-token text inside a request string is replaced by a
// placeholder (a private-use character not found in the template or the request, an index,
// the same character again); after rendering the placeholders are put back and their byte
// ranges passed to Tokenizer::encode_with_literals. Templates that trim, split or index the
// text keep working; one that cuts a placeholder apart is refused (InvalidArgument).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/chat_template.h"

namespace ptn {
class Tokenizer;
}

namespace ptn::gen {

struct ChatPrompt {
  std::string text;          // the rendered prompt
  std::vector<int32_t> ids;  // its tokens (BOS first when the model adds one and the template did not)
};

// Renders `messages` (and opts.tools / opts.extra, also request text) with `chat_template`
// and tokenizes the result by the rule above. Throws ptn::Error (template errors as
// chat::render_chat throws them).
ChatPrompt render_chat_prompt(const Tokenizer& tokenizer, const std::string& chat_template,
                              const nlohmann::ordered_json& messages, const chat::ChatOptions& opts,
                              bool parse_special_in_request);

// The BOS rule alone: `ids` of a rendered prompt get the model's BOS in front when the model
// adds one and the template did not write it.
void add_chat_bos(const Tokenizer& tokenizer, std::vector<int32_t>& ids);

}  // namespace ptn::gen
