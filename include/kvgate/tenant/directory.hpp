#pragma once
// Who sent a request: the tenants of the configuration, found by the
// digest of the API key in the request's Authorization header. Pure and
// immutable (one per routing table, rebuilt on reload); read by every I/O
// thread without a lock.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/config/options.hpp"
#include "kvgate/core/result.hpp"

namespace kvgate::tenant {

struct Tenant {
  std::string name;
  crypto::Sha256 key_digest{};
  double weight = 1;
  config::TenantLimitOptions limits;
  // The cache_salt of this tenant's requests to an isolating model: an
  // HMAC of the name keyed by security.salt_secret, so nobody without the
  // secret can compute (and so share) another tenant's salt. Empty without
  // a secret.
  std::string cache_salt;
  std::size_t index = 0;  // position in Directory::tenants(); the anonymous tenant's is tenants().size()
};

enum class AuthFailure {
  missing_key,  // no Authorization header
  not_bearer,   // another scheme, or an empty key
  unknown_key,  // a key no tenant has
};
[[nodiscard]] std::string_view to_string(AuthFailure failure);

class Directory {
 public:
  Directory() : Directory(config::Options{}) {}
  explicit Directory(const config::Options& options);

  // Tenants are configured: every request must present one's key.
  [[nodiscard]] bool authenticates() const { return !tenants_.empty(); }
  // Without tenants every request is the anonymous tenant. The key is
  // hashed and compared with every tenant's digest in constant time
  // (no early exit), so timing tells nothing about which digest came close.
  [[nodiscard]] Result<const Tenant*, AuthFailure> authenticate(std::string_view authorization_header) const;

  [[nodiscard]] const std::vector<Tenant>& tenants() const { return tenants_; }
  [[nodiscard]] const Tenant& anonymous() const { return anonymous_; }
  [[nodiscard]] const Tenant* find(std::string_view name) const;

 private:
  std::vector<Tenant> tenants_;
  Tenant anonymous_;
};

// "Bearer KEY" (the scheme case-insensitive, RFC 9110 11.1); empty when the
// header is anything else.
[[nodiscard]] std::string_view bearer_token(std::string_view authorization_header);

}  // namespace kvgate::tenant
