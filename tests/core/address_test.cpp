#include "kvgate/core/address.hpp"

#include <gtest/gtest.h>

namespace kvgate {
namespace {

TEST(ParseListenAddress, AcceptsIpv4Ipv6AndPortZero) {
  auto v4 = parse_listen_address("127.0.0.1:8080");
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 8080);
  auto v6 = parse_listen_address("[::1]:0");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 0);
  EXPECT_EQ(v6->to_string(), "[::1]:0");
}

TEST(ParseListenAddress, ExplainsWhatIsWrong) {
  EXPECT_EQ(parse_listen_address("127.0.0.1").error(), "expected host:port");
  EXPECT_EQ(parse_listen_address(":80").error(), "host is empty");
  EXPECT_EQ(parse_listen_address("host:99999").error(), "port must be a number from 0 to 65535");
  EXPECT_EQ(parse_listen_address("[::1:80").error(), "unterminated '[' in IPv6 address");
  EXPECT_FALSE(parse_listen_address("ho st:80"));
}

TEST(ParseUpstreamUrl, AcceptsPlainHttpWithOrWithoutPort) {
  auto url = parse_upstream_url("http://10.0.0.7:8000/");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->authority.host, "10.0.0.7");
  EXPECT_EQ(url->authority.port, 8000);
  EXPECT_EQ(url->host_header, "10.0.0.7:8000");
  auto named = parse_upstream_url("http://vllm-0.vllm.default.svc");
  ASSERT_TRUE(named);
  EXPECT_EQ(named->authority.port, 80);
}

TEST(ParseUpstreamUrl, RejectsUrlsThatCannotBeReached) {
  EXPECT_NE(parse_upstream_url("https://a:1").error().find("https"), std::string::npos);
  EXPECT_NE(parse_upstream_url("ftp://a:1").error().find("http://"), std::string::npos);
  EXPECT_NE(parse_upstream_url("http://a:1/v1").error().find("path"), std::string::npos);
  EXPECT_NE(parse_upstream_url("http://a:0").error().find("port 0"), std::string::npos);
  EXPECT_NE(parse_upstream_url("http://0.0.0.0:80").error().find("wildcard"), std::string::npos);
  EXPECT_NE(parse_upstream_url("http://user:pw@a:80").error().find("credentials"), std::string::npos);
  EXPECT_FALSE(parse_upstream_url("http://:80"));
  EXPECT_FALSE(parse_upstream_url("localhost:8000"));
}

}  // namespace
}  // namespace kvgate
