#include "added_tokens.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kvgate::tokenizer {

int AddedTokenSplitter::child(int node, unsigned char byte) const {
  if (node == 0) {
    return root_children_[byte];
  }
  for (const auto& [key, next] : nodes_[static_cast<std::size_t>(node)].children) {
    if (key == byte) {
      return next;
    }
  }
  return 0;
}

void AddedTokenSplitter::add(std::string_view content, int token) {
  if (content.empty()) {
    return;
  }
  int node = 0;
  for (char symbol : content) {
    auto byte = static_cast<unsigned char>(symbol);
    int next = child(node, byte);
    if (next == 0) {
      next = static_cast<int>(nodes_.size());
      nodes_.push_back(Node{});
      if (node == 0) {
        root_children_[byte] = next;
        if (first_bytes_ < kScannedFirstBytes) {
          first_byte_list_[first_bytes_] = byte;
        }
        ++first_bytes_;
      } else {
        nodes_[static_cast<std::size_t>(node)].children.emplace_back(byte, next);
      }
    }
    node = next;
  }
  nodes_[static_cast<std::size_t>(node)].token = token;
}

void AddedTokenSplitter::split(std::string_view text, std::vector<Section>& out) const {
  std::size_t start = 0;
  std::size_t position = 0;
  // The next occurrence of each first byte at or after `position`, found by
  // memchr once passed (`kUnknown` before the first search).
  constexpr std::size_t kUnknown = SIZE_MAX;
  const bool scanned = first_bytes_ <= kScannedFirstBytes;
  std::array<std::size_t, kScannedFirstBytes> next{};
  next.fill(kUnknown);
  auto next_candidate = [&] {
    std::size_t nearest = text.size();
    for (std::size_t index = 0; index < first_bytes_; ++index) {
      if (next[index] == kUnknown || next[index] < position) {
        const void* found = std::memchr(text.data() + position, first_byte_list_[index], text.size() - position);
        next[index] =
            found != nullptr ? static_cast<std::size_t>(static_cast<const char*>(found) - text.data()) : text.size();
      }
      nearest = std::min(nearest, next[index]);
    }
    return nearest;
  };
  while (position < text.size()) {
    if (scanned) {
      position = next_candidate();
      if (position >= text.size()) {
        break;
      }
    }
    int node = root_children_[static_cast<unsigned char>(text[position])];
    int matched = -1;
    std::size_t matched_end = 0;
    for (std::size_t cursor = position + 1; node != 0; ++cursor) {
      if (nodes_[static_cast<std::size_t>(node)].token >= 0) {
        matched = nodes_[static_cast<std::size_t>(node)].token;
        matched_end = cursor;
      }
      if (cursor >= text.size()) {
        break;
      }
      node = child(node, static_cast<unsigned char>(text[cursor]));
    }
    if (matched < 0) {
      ++position;
      continue;
    }
    if (position > start) {
      out.push_back(Section{text.substr(start, position - start), -1});
    }
    out.push_back(Section{text.substr(position, matched_end - position), matched});
    position = matched_end;
    start = position;
  }
  if (start < text.size()) {
    out.push_back(Section{text.substr(start), -1});
  }
}

}  // namespace kvgate::tokenizer
