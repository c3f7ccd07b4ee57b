// GBNF text -> parse_gbnf -> Matcher, then a few steps: the bytes after "\n--input--\n" (or the
// input's last 32 bytes) fed one at a time and in one piece, with can_accept / is_complete.
// Any input must either work or throw ptn::Error.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.h"
#include "fuzz_common.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"

namespace ptn::fuzz {

int run_grammar(const uint8_t* data, size_t size) {
  auto [text, input] = ptn::fuzz::split(data, size, "\n--input--\n");
  if (input.empty()) input = text.substr(text.size() - std::min<size_t>(text.size(), 32));
  std::shared_ptr<const ptn::grammar::Grammar> g;
  try {
    ptn::grammar::Limits lim;
    lim.max_elements = 1 << 16;  // keep each input fast
    g = std::make_shared<const ptn::grammar::Grammar>(ptn::grammar::parse_gbnf(text, "fuzz", lim));
  } catch (const ptn::Error&) {
    return 0;
  }
  try {
    ptn::grammar::MatcherLimits ml;
    ml.max_stacks = 256;
    ml.max_expand_steps = 1 << 14;
    ptn::grammar::Matcher whole(g, ml), bytewise(g, ml);
    (void)whole.can_accept(input);
    bool ok = whole.accept(input);
    bool ok2 = true;
    for (size_t i = 0; i < input.size() && ok2; ++i) ok2 = bytewise.accept(input.substr(i, 1));
    // Byte by byte and in one piece accept the same bytes and end in the same place.
    if (ok != ok2 || (ok && whole.is_complete() != bytewise.is_complete())) std::abort();
  } catch (const ptn::Error&) {
    return 0;
  }
  return 1;
}

}  // namespace ptn::fuzz

PTN_FUZZ_ENTRY(run_grammar)
