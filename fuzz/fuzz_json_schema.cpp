// JSON Schema text -> json_schema_to_gbnf -> parse_gbnf -> Matcher over the bytes after
// "\n--input--\n" (if any). Any input must either work or throw ptn::Error; a schema the
// converter accepts must give a grammar that parses.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.h"
#include "fuzz_common.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace ptn::fuzz {

int run_json_schema(const uint8_t* data, size_t size) {
  auto [schema, input] = ptn::fuzz::split(data, size, "\n--input--\n");
  if (schema.size() > (64u << 10)) return 0;
  std::string gbnf;
  try {
    gbnf = ptn::grammar::json_schema_to_gbnf(schema);
  } catch (const ptn::Error&) {
    return 0;
  }
  std::shared_ptr<const ptn::grammar::Grammar> g;
  try {
    g = std::make_shared<const ptn::grammar::Grammar>(ptn::grammar::parse_gbnf(gbnf, "json_schema"));
  } catch (const ptn::Error& e) {
    // The converter's output always parses, except for left recursion through $ref, which the
    // grammar check is the one to refuse.
    if (std::string(e.what()).find("left recursion") == std::string::npos) std::abort();
    return 0;
  }
  try {
    ptn::grammar::MatcherLimits ml;
    ml.max_stacks = 256;
    ml.max_expand_steps = 1 << 14;
    ptn::grammar::Matcher m(g, ml);
    if (m.accept(input)) (void)m.is_complete();
  } catch (const ptn::Error&) {
    return 0;
  }
  return 1;
}

}  // namespace ptn::fuzz

PTN_FUZZ_ENTRY(run_json_schema)
