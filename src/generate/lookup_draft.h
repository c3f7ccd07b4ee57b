// Prompt-lookup drafts for speculative decoding (n-gram speculation, as llama.cpp's lookup and
// vLLM's "ngram" method): the sequence's last n tokens are looked up earlier in the sequence (the
// prompt and what was generated), and the tokens that followed their latest earlier occurrence
// are the draft. No second model: it pays off where the output repeats its input (editing,
// summarizing, code), and costs one slightly wider step where it does not.
#pragma once
#include <cstdint>
#include <vector>

namespace ptn::gen {

struct LookupOptions {
  int draft_tokens = 0;  // the most tokens drafted per step (0: speculation off)
  int ngram_max = 3;     // the longest suffix looked up; shorter ones are tried next
  int ngram_min = 1;     // the shortest
};

// Checks the ranges (draft_tokens 0..32, 1 <= ngram_min <= ngram_max <= 16); throws ptn::Error
// (InvalidArgument) naming `flag` otherwise.
void check_lookup_options(const LookupOptions& o, const char* flag);

// The draft for `tokens` (the whole sequence so far): up to o.draft_tokens tokens, empty when no
// suffix of length ngram_max..ngram_min occurs earlier. The longest matching suffix wins, and
// among its occurrences the latest.
std::vector<int32_t> lookup_draft(const std::vector<int32_t>& tokens, const LookupOptions& o);

// How a speculative generation went: steps taken, tokens drafted, drafted tokens accepted.
struct SpeculationStats {
  int64_t steps = 0, drafted = 0, accepted = 0;
};

}  // namespace ptn::gen
