// One token's KV bytes from the models' own config.json fields (the
// figures each model card's config gives), and a folder's config.json read
// or refused.
#include "kvgate/prompt/kv_shape.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kvgate/prompt/model_tokenizer.hpp"

namespace kvgate::prompt {
namespace {

using nlohmann::json;

double bytes_of(const json& config) {
  auto shape = kv_shape_from_config(config);
  EXPECT_TRUE(shape) << (shape ? "" : shape.error());
  return shape ? shape->bytes_per_token : -1;
}

TEST(KvShape, GroupedQueryAttentionKeepsKeysAndValuesOfEveryKvHead) {
  // Llama-3.1-8B: 32 layers x 8 KV heads x 128 (4096 / 32) x 2 x 2 bytes.
  const json llama{{"num_hidden_layers", 32},
                   {"num_attention_heads", 32},
                   {"num_key_value_heads", 8},
                   {"hidden_size", 4096},
                   {"torch_dtype", "bfloat16"}};
  EXPECT_EQ(bytes_of(llama), 131'072);
  EXPECT_EQ(kv_shape_from_config(llama)->derivation, "32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes (bfloat16)");
  // Qwen3-8B names its head size: 36 x 8 x 128 x 2 x 2.
  EXPECT_EQ(bytes_of({{"num_hidden_layers", 36},
                      {"num_attention_heads", 32},
                      {"num_key_value_heads", 8},
                      {"head_dim", 128},
                      {"hidden_size", 4096},
                      {"torch_dtype", "bfloat16"}}),
            147'456);
  // gpt-oss-20b: a head size below hidden_size / heads (2880 / 64).
  EXPECT_EQ(bytes_of({{"num_hidden_layers", 24},
                      {"num_attention_heads", 64},
                      {"num_key_value_heads", 8},
                      {"head_dim", 64},
                      {"hidden_size", 2880},
                      {"torch_dtype", "bfloat16"}}),
            49'152);
}

TEST(KvShape, WithoutKvHeadsEveryHeadKeepsItsOwn) {
  // GPT-2: multi-head attention in float32, 12 x 12 x 64 x 2 x 4.
  EXPECT_EQ(
      bytes_of(
          {{"num_hidden_layers", 12}, {"num_attention_heads", 12}, {"hidden_size", 768}, {"torch_dtype", "float32"}}),
      73'728);
  // Newer configs name the dtype "dtype"; none at all is 16-bit.
  EXPECT_EQ(bytes_of({{"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"hidden_size", 64}, {"dtype", "float32"}}),
            2 * 4 * 16 * 2 * 4);
  EXPECT_EQ(bytes_of({{"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"hidden_size", 64}}), 2 * 4 * 16 * 2 * 2);
}

TEST(KvShape, LatentAttentionKeepsOneLatentPerLayer) {
  // DeepSeek-V3: 61 layers x (512 + 64) x 2 bytes; its 128 heads do not count.
  const json deepseek{{"num_hidden_layers", 61}, {"num_attention_heads", 128}, {"num_key_value_heads", 128},
                      {"kv_lora_rank", 512},     {"qk_rope_head_dim", 64},     {"qk_nope_head_dim", 128},
                      {"v_head_dim", 128},       {"hidden_size", 7168},        {"torch_dtype", "bfloat16"}};
  EXPECT_EQ(bytes_of(deepseek), 70'272);
}

TEST(KvShape, AMultimodalModelsLanguageModelIsItsTextConfig) {
  // Gemma 3 27B: 62 x 16 x 128 x 2 x 2, the dtype at the top.
  EXPECT_EQ(bytes_of({{"architectures", {"Gemma3ForConditionalGeneration"}},
                      {"torch_dtype", "bfloat16"},
                      {"text_config",
                       {{"num_hidden_layers", 62},
                        {"num_attention_heads", 32},
                        {"num_key_value_heads", 16},
                        {"head_dim", 128},
                        {"hidden_size", 5376}}},
                      {"vision_config", {{"num_hidden_layers", 27}, {"hidden_size", 1152}}}}),
            507'904);
}

TEST(KvShape, AConfigWithoutTheShapeSaysWhatIsMissing) {
  EXPECT_FALSE(kv_shape_from_config(json::array()));
  auto no_layers = kv_shape_from_config({{"hidden_size", 4096}});
  ASSERT_FALSE(no_layers);
  EXPECT_NE(no_layers.error().find("num_hidden_layers"), std::string::npos);
  EXPECT_FALSE(kv_shape_from_config({{"num_hidden_layers", 32}, {"hidden_size", 4096}}));
  EXPECT_FALSE(kv_shape_from_config({{"num_hidden_layers", -1}, {"num_attention_heads", 8}, {"hidden_size", 64}}));
  EXPECT_FALSE(kv_shape_from_config({{"num_hidden_layers", "32"}, {"num_attention_heads", 8}, {"hidden_size", 64}}));
}

class KvShapeFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ =
        std::filesystem::temp_directory_path() / ("kvgate-kv-shape-" + std::to_string(::getpid()) + "-" +
                                                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(folder_);
  }
  void TearDown() override { std::filesystem::remove_all(folder_); }
  [[nodiscard]] std::string folder() const { return folder_.string(); }
  void write_config(const std::string& text) const { std::ofstream(folder_ / "config.json", std::ios::binary) << text; }

 private:
  std::filesystem::path folder_;
};

TEST_F(KvShapeFolder, AFolderWithoutConfigJsonHasNoShapeAndNoError) {
  auto shape = read_kv_shape(folder());
  ASSERT_TRUE(shape);
  EXPECT_FALSE(*shape);
}

TEST_F(KvShapeFolder, TheFoldersConfigJsonGivesTheShape) {
  write_config(R"({"num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128})");
  auto shape = read_kv_shape(folder());
  ASSERT_TRUE(shape);
  ASSERT_TRUE(*shape);
  EXPECT_EQ((*shape)->bytes_per_token, 147'456);
}

TEST_F(KvShapeFolder, AConfigJsonThatIsNotJsonOrHasNoShapeIsAnError) {
  write_config("{not json");
  auto broken = read_kv_shape(folder());
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.error().find("config.json: not JSON"), std::string::npos);
  write_config(R"({"model_type": "mystery"})");
  auto empty = read_kv_shape(folder());
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().find("num_hidden_layers"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::prompt
