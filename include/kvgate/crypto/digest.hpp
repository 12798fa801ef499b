#pragma once
// The digests kvgate keeps instead of secrets: an API key is stored as its
// SHA-256 and compared in constant time; a tenant's cache salt is an
// HMAC-SHA256 keyed by the operator's secret. OpenSSL's libcrypto does the
// hashing (a reviewed implementation, in every Debian system already).
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kvgate::crypto {

using Sha256 = std::array<std::uint8_t, 32>;

[[nodiscard]] Sha256 sha256(std::string_view data);
[[nodiscard]] Sha256 hmac_sha256(std::string_view key, std::string_view message);

// 64 hexadecimal digits, either case; anything else is nullopt.
[[nodiscard]] std::optional<Sha256> parse_sha256_hex(std::string_view hex);
[[nodiscard]] std::string to_hex(std::span<const std::uint8_t> bytes);

// Takes the same time whatever the contents, so a caller that compares a
// presented key's digest with a stored one leaks nothing through timing.
[[nodiscard]] bool equal_constant_time(const Sha256& left, const Sha256& right);

}  // namespace kvgate::crypto
