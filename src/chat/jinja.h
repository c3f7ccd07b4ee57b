// A Jinja template engine for chat templates: parse once, render many times. It follows what
// Hugging Face's renderers do with chat templates (the @huggingface/jinja reference and
// transformers' Jinja settings): trim_blocks and lstrip_blocks on, a single trailing newline
// dropped, `{% generation %}` tags removed, undefined values printing as "", loop controls
// (break/continue) enabled. Templates come from strangers, so parsing and rendering are
// bounded (Limits) and every failure is a ptn::Error naming the construct and line/column.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "chat/jinja_value.h"

namespace ptn::jinja {

// At these defaults, parsing and rendering need about 1 MiB of stack (measured: the deepest
// template the limits allow parses within 512 KiB and renders within 1 MiB).
struct Limits {
  size_t max_template_bytes = 1 << 20;       // source size
  int max_nesting = 200;                     // parser nesting (blocks, parentheses)
  int max_call_depth = 100;                  // macro / caller recursion
  uint64_t max_loop_iterations = 1000000;    // total loop iterations (and range() length) per render
  size_t max_output_bytes = 16u << 20;       // rendered text, and any one string value
  size_t max_list_items = 1000000;           // any one list built while rendering
  int max_eval_depth = 1000;                 // nested statement + expression evaluation (stack use)
};

struct Node;

class Template {
 public:
  explicit Template(const std::string& source, Limits limits = {});
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with the given variables (a dict Value; keys are variable names).
  std::string render(const Value& context) const;
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  Limits limits_;
  std::vector<std::unique_ptr<Node>> body_;
};

}  // namespace ptn::jinja
