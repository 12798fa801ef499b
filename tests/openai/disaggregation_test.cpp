#include "kvgate/openai/disaggregation.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace kvgate::openai {
namespace {

using nlohmann::json;

const std::string kClient =
    R"({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},)"
    R"("max_completion_tokens":300,"min_tokens":5,"temperature":0.2})";

TEST(VllmDisaggregation, ThePrefillRequestAsksForOneTokenAndARemoteDecode) {
  const auto prefill = json::parse(vllm_prefill_body(kClient));
  EXPECT_EQ(prefill["kv_transfer_params"], (json{{"do_remote_decode", true},
                                                 {"do_remote_prefill", false},
                                                 {"remote_engine_id", nullptr},
                                                 {"remote_block_ids", nullptr},
                                                 {"remote_host", nullptr},
                                                 {"remote_port", nullptr}}));
  EXPECT_EQ(prefill["stream"], false);
  EXPECT_EQ(prefill["max_tokens"], 1);
  EXPECT_EQ(prefill["max_completion_tokens"], 1);
  EXPECT_FALSE(prefill.contains("stream_options"));
  EXPECT_FALSE(prefill.contains("min_tokens"));
  // Everything else reaches the engine as the client sent it.
  EXPECT_EQ(prefill["messages"], json::parse(kClient)["messages"]);
  EXPECT_EQ(prefill["temperature"], 0.2);
}

TEST(VllmDisaggregation, TheDecoderGetsTheClientsRequestWithThePrefillAnswersParams) {
  const std::string answer =
      R"({"id":"x","choices":[{"index":0,"message":{"content":"a"}}],"usage":{"prompt_tokens":900,)"
      R"("completion_tokens":1,"prompt_tokens_details":{"cached_tokens":640}},"kv_transfer_params":)"
      R"({"do_remote_prefill":true,"do_remote_decode":false,"remote_block_ids":[1,2,3],"remote_engine_id":"e1",)"
      R"("remote_host":"10.0.0.5","remote_port":5600,"tp_size":1}})";
  const auto read = read_prefill_answer(answer);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->prompt_tokens, 900u);
  EXPECT_EQ(read->cached_tokens, 640u);
  const auto decode = json::parse(vllm_decode_body(kClient, read->kv_transfer_params));
  EXPECT_EQ(decode["kv_transfer_params"], json::parse(answer)["kv_transfer_params"]);
  EXPECT_EQ(decode["stream"], true);
  EXPECT_EQ(decode["max_completion_tokens"], 300);
  EXPECT_EQ(decode["min_tokens"], 5);
  EXPECT_EQ(decode["stream_options"]["include_usage"], true);
}

TEST(VllmDisaggregation, AnswersWithoutParamsOrNotJsonAreTold) {
  EXPECT_FALSE(read_prefill_answer("not json"));
  EXPECT_FALSE(read_prefill_answer("[1,2]"));
  const auto bare = read_prefill_answer(R"({"choices":[],"kv_transfer_params":"nope","usage":{"prompt_tokens":-3}})");
  ASSERT_TRUE(bare);
  EXPECT_TRUE(bare->kv_transfer_params.empty());
  EXPECT_FALSE(bare->prompt_tokens);
  EXPECT_FALSE(bare->cached_tokens);
}

TEST(SglangDisaggregation, BothWorkersGetTheRequestWithTheBootstrapRoom) {
  const auto body = json::parse(sglang_pd_body(kClient, "10.0.0.7", 8998, 12345678901234ull));
  EXPECT_EQ(body["bootstrap_host"], "10.0.0.7");
  EXPECT_EQ(body["bootstrap_port"], 8998);
  EXPECT_EQ(body["bootstrap_room"], 12345678901234ull);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["max_completion_tokens"], 300);
}

}  // namespace
}  // namespace kvgate::openai
