#include "kvgate/app/ordered_lines.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <sstream>
#include <streambuf>
#include <string>
#include <thread>

namespace kvgate::app {
namespace {

std::string numbered_lines(int count) {
  std::string text;
  for (int index = 0; index < count; ++index) text += "line " + std::to_string(index) + "\n";
  return text;
}

std::string upper(const std::string& text) {
  std::string out = text;
  for (char& character : out) character = static_cast<char>(std::toupper(static_cast<unsigned char>(character)));
  return out;
}

// The first line is held until the three after it are processed, so they
// complete first; they must still be written after it.
TEST(OrderedLines, LinesAreWrittenInInputOrderWhenLaterLinesFinishFirst) {
  std::istringstream input(numbered_lines(8));
  std::ostringstream output;
  std::atomic<int> finished{0};
  process_lines_in_order(input, output, OrderedLinesOptions{.threads = 4, .window = 8}, [&]() -> LineProcessor {
    return [&](const std::string& line, std::string& out) {
      if (line == "line 0") {
        while (finished.load() < 3) std::this_thread::yield();
      }
      out = upper(line);
      finished.fetch_add(1);
    };
  });
  EXPECT_EQ(output.str(), upper(numbered_lines(8)));
}

TEST(OrderedLines, EmptyLinesGiveNoOutputAndALastLineWithoutNewlineIsProcessed) {
  std::istringstream input("a\n\n\nb\n\nc");
  std::ostringstream output;
  process_lines_in_order(input, output, OrderedLinesOptions{.threads = 2}, [] {
    return LineProcessor([](const std::string& line, std::string& out) { out = "<" + line + ">"; });
  });
  EXPECT_EQ(output.str(), "<a>\n<b>\n<c>\n");
}

TEST(OrderedLines, AnEmptyOutputIsStillALine) {
  std::istringstream input("a\nb\n");
  std::ostringstream output;
  process_lines_in_order(input, output, OrderedLinesOptions{.threads = 3},
                         [] { return LineProcessor([](const std::string&, std::string&) {}); });
  EXPECT_EQ(output.str(), "\n\n");
}

// Per-thread state (a tokenizer's workspace) is made by the thread that
// uses it, once.
TEST(OrderedLines, EachWorkerThreadMakesOneProcessorAndUsesItAlone) {
  std::istringstream input(numbered_lines(200));
  std::ostringstream output;
  std::mutex mutex;
  std::set<std::thread::id> makers;
  int made = 0;
  std::atomic<bool> shared_use{false};
  process_lines_in_order(input, output, OrderedLinesOptions{.threads = 3, .window = 5}, [&]() -> LineProcessor {
    {
      const std::lock_guard lock(mutex);
      makers.insert(std::this_thread::get_id());
      ++made;
    }
    auto owner = std::this_thread::get_id();
    return [&, owner](const std::string& line, std::string& out) {
      if (std::this_thread::get_id() != owner) shared_use = true;
      out = line;
    };
  });
  EXPECT_EQ(made, 3);
  EXPECT_EQ(makers.size(), 3U);
  EXPECT_FALSE(makers.contains(std::this_thread::get_id()));
  EXPECT_FALSE(shared_use.load());
  EXPECT_EQ(output.str(), numbered_lines(200));
}

// A stream buffer that hands out one character per read, counting them, so
// the test sees how far the reader got.
class CountingBuffer : public std::streambuf {
 public:
  explicit CountingBuffer(std::string text) : text_(std::move(text)) {}
  [[nodiscard]] std::size_t consumed() const { return consumed_.load(); }

 protected:
  // The get area holds one character; a call finding it used counts it.
  int_type underflow() override {
    if (eback() != nullptr && gptr() == egptr()) {
      ++position_;
      consumed_.store(position_);
    }
    if (position_ >= text_.size()) {
      setg(nullptr, nullptr, nullptr);
      return traits_type::eof();
    }
    current_ = text_[position_];
    setg(&current_, &current_, &current_ + 1);
    return traits_type::to_int_type(current_);
  }

 private:
  std::string text_;
  std::size_t position_ = 0;
  std::atomic<std::size_t> consumed_{0};
  char current_ = 0;
};

// While the oldest line is held, the reader stops once the window is full:
// at most `window` lines are unwritten, plus the one it has read and waits
// to place.
TEST(OrderedLines, TheReaderStaysWithinTheWindowWhileTheOldestLineIsHeld) {
  const std::string text = numbered_lines(100);  // "line N\n": 7 or 8 bytes
  CountingBuffer buffer(text);
  std::istream input(&buffer);
  std::ostringstream output;
  std::atomic<int> finished{0};
  std::size_t consumed_while_held = 0;
  process_lines_in_order(input, output, OrderedLinesOptions{.threads = 2, .window = 4}, [&]() -> LineProcessor {
    return [&](const std::string& line, std::string& out) {
      if (line == "line 0") {
        while (finished.load() < 3) std::this_thread::yield();
        // Time for a reader that ignored the window to run ahead.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        consumed_while_held = buffer.consumed();
      }
      out = line;
      finished.fetch_add(1);
    };
  });
  EXPECT_EQ(output.str(), text);
  EXPECT_LE(consumed_while_held, 5 * std::string("line 0\n").size());
  EXPECT_GE(consumed_while_held, 4 * std::string("line 0\n").size());
}

TEST(OrderedLines, ManyLinesThroughMoreThreadsThanTheWindowHoldsStayInOrder) {
  std::istringstream input(numbered_lines(3000));
  std::ostringstream output;
  process_lines_in_order(input, output, OrderedLinesOptions{.threads = 6, .window = 3}, [] {
    return LineProcessor([](const std::string& line, std::string& out) { out = upper(line); });
  });
  EXPECT_EQ(output.str(), upper(numbered_lines(3000)));
}

// A program driving the command a line at a time: it sends the next line
// only once the answer to the one before has been delivered (flushed out
// of the output stream's buffer). Gives up after ten seconds, ending the
// input, so a missing flush fails the test instead of hanging it.
class Conversation {
 public:
  explicit Conversation(int lines) : lines_(lines) {}

  class Input : public std::streambuf {
   public:
    explicit Input(Conversation& owner) : owner_(owner) {}

   protected:
    int_type underflow() override {
      if (!owner_.next_line(line_)) return traits_type::eof();
      setg(line_.data(), line_.data(), line_.data() + line_.size());
      return traits_type::to_int_type(line_.front());
    }

   private:
    Conversation& owner_;
    std::string line_;
  };

  // Holds what is written until the stream is flushed.
  class Output : public std::streambuf {
   public:
    explicit Output(Conversation& owner) : owner_(owner) { setp(buffer_, buffer_ + sizeof buffer_); }

   protected:
    int_type overflow(int_type character) override {
      sync();
      if (!traits_type::eq_int_type(character, traits_type::eof())) {
        *pptr() = traits_type::to_char_type(character);
        pbump(1);
      }
      return traits_type::not_eof(character);
    }
    int sync() override {
      owner_.deliver(std::string(pbase(), pptr()));
      setp(buffer_, buffer_ + sizeof buffer_);
      return 0;
    }

   private:
    Conversation& owner_;
    char buffer_[4096];
  };

  [[nodiscard]] std::string delivered() {
    const std::lock_guard lock(mutex_);
    return delivered_;
  }
  [[nodiscard]] bool gave_up() {
    const std::lock_guard lock(mutex_);
    return gave_up_;
  }

 private:
  bool next_line(std::string& line) {
    std::unique_lock lock(mutex_);
    if (sent_ == lines_) return false;
    const bool answered = changed_.wait_for(lock, std::chrono::seconds(10), [&] {
      return static_cast<int>(std::count(delivered_.begin(), delivered_.end(), '\n')) == sent_;
    });
    if (!answered) {
      gave_up_ = true;
      return false;
    }
    line = "line " + std::to_string(sent_++) + "\n";
    return true;
  }
  void deliver(const std::string& text) {
    const std::lock_guard lock(mutex_);
    delivered_ += text;
    changed_.notify_all();
  }

  const int lines_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string delivered_;
  int sent_ = 0;
  bool gave_up_ = false;
};

TEST(OrderedLines, EachAnswerIsFlushedWhenEveryLineReadSoFarIsAnswered) {
  Conversation conversation(5);
  Conversation::Input input_buffer(conversation);
  Conversation::Output output_buffer(conversation);
  std::istream input(&input_buffer);
  std::ostream output(&output_buffer);
  process_lines_in_order(input, output, OrderedLinesOptions{.threads = 2}, [] {
    return LineProcessor([](const std::string& line, std::string& out) { out = upper(line); });
  });
  EXPECT_FALSE(conversation.gave_up()) << "an answer stayed in the stream's buffer";
  EXPECT_EQ(conversation.delivered(), upper(numbered_lines(5)));
}

// std::cin is tied to std::cout: every read would flush the output from the
// reading thread while workers write to it.
TEST(OrderedLines, TheInputIsUntiedWhileItRunsAndTiedAgainAfter) {
  std::ostringstream output;
  std::istringstream input("a\nb\n");
  input.tie(&output);
  std::atomic<bool> tied_during{false};
  process_lines_in_order(input, output, OrderedLinesOptions{.threads = 2}, [&] {
    return LineProcessor([&](const std::string& line, std::string& out) {
      if (input.tie() != nullptr) tied_during = true;
      out = line;
    });
  });
  EXPECT_FALSE(tied_during.load());
  EXPECT_EQ(input.tie(), &output);
  EXPECT_EQ(output.str(), "a\nb\n");
}

}  // namespace
}  // namespace kvgate::app
