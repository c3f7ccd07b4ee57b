#include "generate/stop_strings.h"

#include "core/text.h"

#include <algorithm>
#include <utility>

namespace ptn::gen {

StopStrings::StopStrings(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

size_t StopStrings::held_tail() const {
  size_t keep = 0;
  for (const auto& st : stops_) keep = std::max(keep, text::partial_prefix_suffix(pending_, st));
  return keep;
}

std::string StopStrings::push(const std::string& piece, bool* hit) {
  if (hit_) {
    *hit = true;
    return "";
  }
  pending_ += piece;
  if (stops_.empty()) return std::exchange(pending_, std::string());
  size_t cut = std::string::npos;
  for (const auto& st : stops_)
    if (const size_t at = pending_.find(st); at < cut) {
      cut = at;
      matched_ = st;
    }
  if (cut != std::string::npos) {
    hit_ = *hit = true;
    std::string out = pending_.substr(0, cut);
    pending_.clear();
    return out;
  }
  const size_t keep = held_tail();
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StopStrings::finish() { return std::exchange(pending_, std::string()); }

}  // namespace ptn::gen
