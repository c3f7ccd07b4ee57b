// Chat templates: render_chat with the input split at "\n--messages--\n" into a Jinja template and
// a messages JSON: either the messages list itself, or an object {"messages", "tools", "extra"}
// (the shape of tests/data/chat/messages/*.json). The render limits are tightened so that one
// input stays fast; they are still the real checks.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "core/error.h"
#include "fuzz_common.h"

namespace ptn::fuzz {

// 1 if the input was accepted all the way, 0 if a stage rejected it with a documented error.
int run_chat_template(const uint8_t* data, size_t size) {
  auto [tmpl, messages_text] = ptn::fuzz::split(data, size, "\n--messages--\n");
  nlohmann::ordered_json messages = nlohmann::ordered_json::parse(messages_text, nullptr, false);
  if (messages.is_discarded())
    messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "Hello"}},
                                              {{"role", "assistant"}, {"content", "Hi there"}}});
  ptn::chat::ChatOptions opts;
  if (messages.is_object() && messages.contains("messages")) {
    nlohmann::ordered_json whole = std::move(messages);
    messages = whole["messages"];
    if (whole.contains("tools")) opts.tools = whole["tools"];
    if (whole.contains("extra") && whole["extra"].is_object()) opts.extra = whole["extra"];
  }
  opts.add_generation_prompt = true;
  opts.bos_token = "<s>";
  opts.eos_token = "</s>";
  opts.limits.max_loop_iterations = 100000;
  opts.limits.max_output_bytes = 1u << 20;
  opts.limits.max_list_items = 100000;
  try {
    (void)ptn::chat::render_chat(std::string(tmpl), messages, opts);
  } catch (const ptn::Error&) {
    return 0;
  }
  return 1;
}

}  // namespace ptn::fuzz

PTN_FUZZ_ENTRY(run_chat_template)
