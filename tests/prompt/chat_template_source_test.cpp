#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kvgate/prompt/model_tokenizer.hpp"

namespace kvgate::prompt {
namespace {

// A folder of its own per test, removed at the end.
class ChatTemplateSource : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ =
        std::filesystem::temp_directory_path() / ("kvgate-template-" + std::to_string(::getpid()) + "-" +
                                                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(folder_);
  }
  void TearDown() override { std::filesystem::remove_all(folder_); }
  [[nodiscard]] std::string folder() const { return folder_.string(); }
  void write_file(const std::string& name, const std::string& text) const {
    std::ofstream(folder_ / name, std::ios::binary) << text;
  }

 private:
  std::filesystem::path folder_;
};

TEST_F(ChatTemplateSource, TheConfigsStringIsTheTemplate) {
  const auto source = read_chat_template(folder(), {{"chat_template", "{{ messages }}"}});
  ASSERT_TRUE(source);
  EXPECT_EQ(source->value_or(""), "{{ messages }}");
}

// transformers loads chat_template.jinja over the config's entry.
TEST_F(ChatTemplateSource, AJinjaFileBesideTheConfigWins) {
  write_file("chat_template.jinja", "{%- for m in messages %}{{ m.content }}{% endfor %}\n");
  const auto source = read_chat_template(folder(), {{"chat_template", "from the config"}});
  ASSERT_TRUE(source);
  EXPECT_EQ(source->value_or(""), "{%- for m in messages %}{{ m.content }}{% endfor %}\n");
}

TEST_F(ChatTemplateSource, TheListFormGivesTheTemplateNamedDefault) {
  const nlohmann::json config = {
      {"chat_template", {{{"name", "tool_use"}, {"template", "tools"}}, {{"name", "default"}, {"template", "plain"}}}}};
  const auto source = read_chat_template(folder(), config);
  ASSERT_TRUE(source);
  EXPECT_EQ(source->value_or(""), "plain");
  const nlohmann::json no_default = {{"chat_template", {{{"name", "tool_use"}, {"template", "tools"}}}}};
  const auto missing = read_chat_template(folder(), no_default);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("default"), std::string::npos);
}

TEST_F(ChatTemplateSource, NoneIsEmptyAndAnotherTypeIsAnError) {
  const auto none = read_chat_template(folder(), {{"eos_token", "</s>"}});
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
  const auto null_entry = read_chat_template(folder(), {{"chat_template", nullptr}});
  ASSERT_TRUE(null_entry);
  EXPECT_FALSE(null_entry->has_value());
  const auto number = read_chat_template(folder(), {{"chat_template", 5}});
  ASSERT_FALSE(number);
  EXPECT_NE(number.error().find("tokenizer_config.json"), std::string::npos);
}

// A template path that is not a readable file (a directory of that name
// here) is an error naming it, not an empty template.
TEST_F(ChatTemplateSource, AnUnreadableFileIsAnErrorNamingIt) {
  std::filesystem::create_directories(std::filesystem::path(folder()) / "chat_template.jinja");
  const auto source = read_chat_template(folder(), {{"chat_template", "from the config"}});
  ASSERT_FALSE(source);
  EXPECT_NE(source.error().find("chat_template.jinja"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::prompt
