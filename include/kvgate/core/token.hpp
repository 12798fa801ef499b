#pragma once
// A token id: what tokenizers produce, block hashes consume and engines
// report. One definition for every module.
#include <cstdint>

namespace kvgate {

using TokenId = std::uint32_t;

}  // namespace kvgate
