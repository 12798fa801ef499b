#include "kvgate/tenant/directory.hpp"

#include <algorithm>

namespace kvgate::tenant {

std::string_view to_string(AuthFailure failure) {
  switch (failure) {
    case AuthFailure::missing_key:
      return "missing_key";
    case AuthFailure::not_bearer:
      return "not_bearer";
    case AuthFailure::unknown_key:
      return "unknown_key";
  }
  return "unknown_key";
}

std::string_view bearer_token(std::string_view header) {
  constexpr std::string_view kScheme = "bearer";
  if (header.size() <= kScheme.size() || header[kScheme.size()] != ' ') {
    return {};
  }
  for (std::size_t index = 0; index < kScheme.size(); ++index) {
    const char c = header[index];
    if ((c | 0x20) != kScheme[index]) {
      return {};
    }
  }
  auto token = header.substr(kScheme.size() + 1);
  while (!token.empty() && token.front() == ' ') {
    token.remove_prefix(1);
  }
  while (!token.empty() && token.back() == ' ') {
    token.remove_suffix(1);
  }
  return token;
}

Directory::Directory(const config::Options& options) {
  tenants_.reserve(options.tenants.size());
  for (const auto& configured : options.tenants) {
    Tenant tenant;
    tenant.name = configured.name;
    tenant.key_digest = configured.api_key_sha256;
    tenant.weight = configured.weight;
    tenant.limits = configured.limits;
    if (!options.security.salt_secret.empty()) {
      // Hex of the first 16 bytes: 128 bits are beyond guessing, and the
      // salt travels in every request body.
      auto mac = crypto::hmac_sha256(options.security.salt_secret, "kvgate cache_salt\n" + configured.name);
      tenant.cache_salt = "kvgate-" + crypto::to_hex(std::span(mac).first(16));
    }
    tenant.index = tenants_.size();
    tenants_.push_back(std::move(tenant));
  }
  anonymous_.name = "anonymous";
  anonymous_.index = tenants_.size();
}

Result<const Tenant*, AuthFailure> Directory::authenticate(std::string_view authorization_header) const {
  if (tenants_.empty()) {
    return &anonymous_;
  }
  if (authorization_header.empty()) {
    return unexpected(AuthFailure::missing_key);
  }
  auto key = bearer_token(authorization_header);
  if (key.empty()) {
    return unexpected(AuthFailure::not_bearer);
  }
  const auto digest = crypto::sha256(key);
  const Tenant* found = nullptr;
  for (const auto& tenant : tenants_) {
    // Every digest is compared, whether or not one matched already.
    const bool match = crypto::equal_constant_time(digest, tenant.key_digest);
    found = match ? &tenant : found;
  }
  if (found == nullptr) {
    return unexpected(AuthFailure::unknown_key);
  }
  return found;
}

const Tenant* Directory::find(std::string_view name) const {
  auto found =
      std::find_if(tenants_.begin(), tenants_.end(), [&](const Tenant& tenant) { return tenant.name == name; });
  return found == tenants_.end() ? nullptr : &*found;
}

}  // namespace kvgate::tenant
