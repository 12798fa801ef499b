#include "kvgate/tenant/directory.hpp"

#include <gtest/gtest.h>

namespace kvgate::tenant {
namespace {

config::TenantOptions tenant_with_key(const std::string& name, const std::string& key) {
  config::TenantOptions tenant;
  tenant.name = name;
  tenant.api_key_sha256 = crypto::sha256(key);
  return tenant;
}

TEST(Crypto, KnownAnswers) {
  // FIPS 180-2 appendix B.1 and RFC 4231 test case 2.
  EXPECT_EQ(crypto::to_hex(crypto::sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(crypto::to_hex(crypto::hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  auto parsed = crypto::parse_sha256_hex("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD");
  ASSERT_TRUE(parsed);
  EXPECT_TRUE(crypto::equal_constant_time(*parsed, crypto::sha256("abc")));
  EXPECT_FALSE(crypto::equal_constant_time(*parsed, crypto::sha256("abd")));
  EXPECT_FALSE(crypto::parse_sha256_hex(std::string(63, 'a')));
  EXPECT_FALSE(crypto::parse_sha256_hex(std::string(63, 'a') + "g"));
}

TEST(BearerToken, SchemeIsCaseInsensitiveAndTheKeyTrimmed) {
  EXPECT_EQ(bearer_token("Bearer k1"), "k1");
  EXPECT_EQ(bearer_token("bearer  k1 "), "k1");
  EXPECT_EQ(bearer_token("BEARER k1"), "k1");
  EXPECT_EQ(bearer_token("Basic azE6"), "");
  EXPECT_EQ(bearer_token("Bearer"), "");
  EXPECT_EQ(bearer_token("Bearer "), "");
  EXPECT_EQ(bearer_token("Bearerk1"), "");
}

TEST(Directory, WithoutTenantsEveryRequestIsAnonymous) {
  Directory directory;
  EXPECT_FALSE(directory.authenticates());
  auto who = directory.authenticate("");
  ASSERT_TRUE(who);
  EXPECT_EQ((*who)->name, "anonymous");
  EXPECT_EQ((*who)->index, 0u);
  EXPECT_TRUE((*who)->cache_salt.empty());
}

TEST(Directory, FindsTheTenantByItsKeyAndRefusesOthers) {
  config::Options options;
  options.tenants = {tenant_with_key("acme", "key-a"), tenant_with_key("beta", "key-b")};
  Directory directory(options);
  ASSERT_TRUE(directory.authenticates());
  auto acme = directory.authenticate("Bearer key-a");
  ASSERT_TRUE(acme);
  EXPECT_EQ((*acme)->name, "acme");
  auto beta = directory.authenticate("bearer key-b");
  ASSERT_TRUE(beta);
  EXPECT_EQ((*beta)->name, "beta");
  EXPECT_EQ((*beta)->index, 1u);
  EXPECT_EQ(directory.authenticate("").error(), AuthFailure::missing_key);
  EXPECT_EQ(directory.authenticate("Basic a2V5LWE=").error(), AuthFailure::not_bearer);
  EXPECT_EQ(directory.authenticate("Bearer key-c").error(), AuthFailure::unknown_key);
  // A prefix or an extension of a key is another key.
  EXPECT_EQ(directory.authenticate("Bearer key-").error(), AuthFailure::unknown_key);
  EXPECT_EQ(directory.authenticate("Bearer key-aa").error(), AuthFailure::unknown_key);
  EXPECT_EQ(directory.find("beta"), *beta);
  EXPECT_EQ(directory.find("gamma"), nullptr);
}

TEST(Directory, CacheSaltsAreKeyedPerTenantAndBySecret) {
  config::Options options;
  options.tenants = {tenant_with_key("acme", "key-a"), tenant_with_key("beta", "key-b")};
  options.security.salt_secret = "first secret, 32 bytes long ....";
  Directory first(options);
  const auto& acme = first.tenants()[0];
  const auto& beta = first.tenants()[1];
  EXPECT_TRUE(acme.cache_salt.starts_with("kvgate-"));
  EXPECT_EQ(acme.cache_salt.size(), 7u + 32u);
  EXPECT_NE(acme.cache_salt, beta.cache_salt);
  // Deterministic: every gateway replica with the same secret agrees, so
  // the engines' blocks are shared across replicas within a tenant.
  EXPECT_EQ(Directory(options).tenants()[0].cache_salt, acme.cache_salt);
  options.security.salt_secret = "another secret, 32 bytes long ..";
  EXPECT_NE(Directory(options).tenants()[0].cache_salt, acme.cache_salt);
  // The salt does not reveal the name or the key.
  EXPECT_EQ(acme.cache_salt.find("acme"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::tenant
