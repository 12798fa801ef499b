#include "added_tokens.hpp"

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
        ++first_bytes_;
        single_first_byte_ = first_bytes_ == 1 ? byte : -1;
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
  while (position < text.size()) {
    if (single_first_byte_ >= 0) {  // e.g. every token starts with '<': memchr skips plain text
      const void* found = std::memchr(text.data() + position, single_first_byte_, text.size() - position);
      if (found == nullptr) {
        break;
      }
      position = static_cast<std::size_t>(static_cast<const char*>(found) - text.data());
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
