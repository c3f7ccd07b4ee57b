// Stop strings over streamed text. Text arrives in pieces (one token's worth at a time); a stop
// string may span several pieces, so the tail of what arrived that could still grow into a stop
// string is held back until the next piece says whether it does. What push() returns can be
// shown at once and never contains any part of a stop string.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace ptn::gen {

class StopStrings {
 public:
  StopStrings() = default;
  // Empty strings in `stops` are ignored; no stop strings passes everything through.
  explicit StopStrings(std::vector<std::string> stops);

  // Appends `piece`; returns the text that can be shown now. When a stop string has appeared
  // (the earliest one in the text, if several), *hit is set, the stop string and everything
  // after it are dropped, and later calls return "".
  std::string push(const std::string& piece, bool* hit);
  // The text held back, for a stream that ended without a stop string.
  std::string finish();
  bool empty() const { return stops_.empty(); }
  // The stop string that ended the text ("" before one has appeared).
  const std::string& matched() const { return matched_; }

 private:
  size_t held_tail() const;  // bytes at the end of pending_ that begin some stop string

  std::vector<std::string> stops_;
  std::string pending_;
  std::string matched_;
  bool hit_ = false;
};

}  // namespace ptn::gen
