#pragma once
// The request bodies every run sends: streaming, asking for usage, with a
// run's extra fields (RunOptions::request_fields) added. Pure.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace kvgate::load {

// `extra`: an object whose fields are set on the body (replacing the
// body's own of the same name); anything else adds nothing.
std::string chat_body(const std::string& model, const nlohmann::json& messages, std::uint32_t max_tokens,
                      const nlohmann::json& extra = nlohmann::json::object());
std::string completion_body(const std::string& model, const std::string& prompt, std::uint32_t max_tokens,
                            const nlohmann::json& extra = nlohmann::json::object());

}  // namespace kvgate::load
