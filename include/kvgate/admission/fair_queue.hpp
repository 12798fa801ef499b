#pragma once
// Deficit round robin across lanes (one per tenant), each lane FIFO: a
// tenant with weight w is served w times as often as one with weight 1
// while both wait, and a burst from one tenant never delays another's head
// by more than one round. Pure and single-threaded; the caller locks.
#include <algorithm>
#include <cstddef>
#include <deque>
#include <optional>
#include <vector>

namespace kvgate::admission {

template <class T>
class FairQueue {
 public:
  // One lane per weight (> 0). Quanta are the weights scaled so that the
  // smallest is 1: every lane is served at least once per round, and a pop
  // looks at each lane at most once.
  explicit FairQueue(std::vector<double> weights = {1.0}) { set_weights(std::move(weights)); }

  // Lanes added by a reload start empty; lanes dropped keep their items
  // until they are popped (their quantum becomes 1).
  void set_weights(std::vector<double> weights) {
    const double smallest = weights.empty() ? 1.0 : *std::min_element(weights.begin(), weights.end());
    if (lanes_.size() < weights.size()) {
      lanes_.resize(weights.size());
    }
    for (std::size_t lane = 0; lane < lanes_.size(); ++lane) {
      lanes_[lane].quantum = lane < weights.size() && smallest > 0 ? weights[lane] / smallest : 1.0;
    }
  }

  [[nodiscard]] std::size_t lanes() const { return lanes_.size(); }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }
  [[nodiscard]] std::size_t size_of(std::size_t lane) const {
    return lane < lanes_.size() ? lanes_[lane].items.size() : 0;
  }

  void push(std::size_t lane, T item) {
    if (lane >= lanes_.size()) {
      lanes_.resize(lane + 1);
    }
    auto& target = lanes_[lane];
    if (target.items.empty()) {
      active_.push_back(lane);
      target.deficit = 0;
    }
    target.items.push_back(std::move(item));
    ++size_;
  }

  // The next item in DRR order whose `may_go(item)` is true. A lane whose
  // head may not go is skipped and keeps its place and its deficit, so it
  // is first once it may. Items for which `dropped(item)` is true are
  // discarded on the way (waiters that gave up).
  template <class MayGo, class Dropped>
  std::optional<T> pop(MayGo&& may_go, Dropped&& dropped) {
    for (std::size_t position = 0; position < active_.size();) {
      const std::size_t lane_index = active_[position];
      auto& lane = lanes_[lane_index];
      while (!lane.items.empty() && dropped(lane.items.front())) {
        lane.items.pop_front();
        --size_;
      }
      if (lane.items.empty()) {
        lane.deficit = 0;
        active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(position));
        continue;
      }
      if (!may_go(lane.items.front())) {
        ++position;
        continue;
      }
      if (lane.deficit < 1.0) {
        lane.deficit += lane.quantum;
      }
      T item = std::move(lane.items.front());
      lane.items.pop_front();
      --size_;
      lane.deficit -= 1.0;
      if (lane.items.empty()) {
        lane.deficit = 0;
        active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(position));
      } else if (lane.deficit < 1.0) {
        // Its turn is over: to the back of the round.
        active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(position));
        active_.push_back(lane_index);
      }
      return item;
    }
    return std::nullopt;
  }

  template <class MayGo>
  std::optional<T> pop(MayGo&& may_go) {
    return pop(std::forward<MayGo>(may_go), [](const T&) { return false; });
  }
  std::optional<T> pop() {
    return pop([](const T&) { return true; });
  }

  // The first item, in service order and then in its lane, for which
  // `chosen(item)` is true, taken out of turn (its lane keeps its place
  // and deficit): for an item something was kept for.
  template <class Chosen>
  std::optional<T> take_first(Chosen&& chosen) {
    for (const std::size_t lane_index : active_) {
      auto& items = lanes_[lane_index].items;
      for (auto item = items.begin(); item != items.end(); ++item) {
        if (!chosen(*item)) {
          continue;
        }
        T taken = std::move(*item);
        items.erase(item);
        --size_;
        if (items.empty()) {
          lanes_[lane_index].deficit = 0;
          std::erase(active_, lane_index);
        }
        return taken;
      }
    }
    return std::nullopt;
  }

  // Calls `visit(item)` on every item, in no particular order.
  template <class Visit>
  void for_each(Visit&& visit) const {
    for (const auto& lane : lanes_) {
      for (const auto& item : lane.items) {
        visit(item);
      }
    }
  }

  // Removes every item for which `dropped` is true (e.g. a waiter that gave
  // up); returns how many.
  template <class Dropped>
  std::size_t remove_if(Dropped&& dropped) {
    std::size_t removed = 0;
    for (auto& lane : lanes_) {
      const auto before = lane.items.size();
      std::erase_if(lane.items, dropped);
      removed += before - lane.items.size();
    }
    size_ -= removed;
    std::erase_if(active_, [&](std::size_t lane) { return lanes_[lane].items.empty(); });
    return removed;
  }

 private:
  struct Lane {
    std::deque<T> items;
    double quantum = 1.0;
    double deficit = 0;
  };

  std::vector<Lane> lanes_;
  std::deque<std::size_t> active_;  // lanes with items, in service order
  std::size_t size_ = 0;
};

}  // namespace kvgate::admission
