#include "kvgate/crypto/digest.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace kvgate::crypto {

Sha256 sha256(std::string_view data) {
  Sha256 digest{};
  unsigned int length = 0;
  // EVP_Digest cannot fail for SHA-256 on a valid pointer; the length is
  // fixed by the algorithm.
  EVP_Digest(data.data(), data.size(), digest.data(), &length, EVP_sha256(), nullptr);
  return digest;
}

Sha256 hmac_sha256(std::string_view key, std::string_view message) {
  Sha256 digest{};
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
       message.size(), digest.data(), &length);
  return digest;
}

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

}  // namespace

std::optional<Sha256> parse_sha256_hex(std::string_view hex) {
  Sha256 digest{};
  if (hex.size() != digest.size() * 2) {
    return std::nullopt;
  }
  for (std::size_t index = 0; index < digest.size(); ++index) {
    const int high = hex_value(hex[index * 2]);
    const int low = hex_value(hex[index * 2 + 1]);
    if (high < 0 || low < 0) {
      return std::nullopt;
    }
    digest[index] = static_cast<std::uint8_t>(high * 16 + low);
  }
  return digest;
}

std::string to_hex(std::span<const std::uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text(bytes.size() * 2, '0');
  for (std::size_t index = 0; index < bytes.size(); ++index) {
    text[index * 2] = kDigits[bytes[index] >> 4];
    text[index * 2 + 1] = kDigits[bytes[index] & 0xF];
  }
  return text;
}

bool equal_constant_time(const Sha256& left, const Sha256& right) {
  return CRYPTO_memcmp(left.data(), right.data(), left.size()) == 0;
}

}  // namespace kvgate::crypto
