#include "kvgate/app/cpus.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>

#include "kvgate/core/file.hpp"
#include "kvgate/core/units.hpp"

namespace kvgate::app {

namespace {

constexpr std::size_t kSmallFile = std::size_t{64} * 1024;  // each of these files is a line or a few

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.remove_suffix(1);
  }
  return text;
}

std::optional<std::string> read_small(const std::string& path) {
  auto text = read_whole_file(path, kSmallFile);
  if (!text) {
    return std::nullopt;
  }
  return std::move(*text);
}

// The smallest quota on `group` (a cgroup path starting with "/") and its
// ancestors, under the hierarchy mounted at `mount`. A container that sees
// only its own cgroup as "/" finds its quota at the top of the walk.
template <typename QuotaAt>
std::optional<unsigned> smallest_quota(const std::string& mount, std::string group, QuotaAt quota_at) {
  std::optional<unsigned> smallest;
  for (;;) {
    const std::string folder = mount + (group == "/" ? std::string() : group);
    if (auto cpus = quota_at(folder); cpus && (!smallest || *cpus < *smallest)) {
      smallest = cpus;
    }
    if (group == "/") {
      return smallest;
    }
    const auto slash = group.rfind('/');
    group.resize(slash == 0 ? 1 : slash);
  }
}

}  // namespace

std::optional<unsigned> cpus_of_quota(std::string_view quota, std::string_view period) {
  const auto quota_us = parse_whole_number(trimmed(quota));
  const auto period_us = parse_whole_number(trimmed(period));
  if (!quota_us || !period_us || *quota_us == 0 || *period_us == 0) {
    return std::nullopt;  // "max", "-1", or not a quota
  }
  return static_cast<unsigned>(std::min<std::uint64_t>((*quota_us + *period_us - 1) / *period_us, UINT32_MAX));
}

std::optional<unsigned> cpus_of_cpu_max(std::string_view cpu_max) {
  cpu_max = trimmed(cpu_max);
  const auto space = cpu_max.find(' ');
  if (space == std::string_view::npos) {
    return std::nullopt;
  }
  return cpus_of_quota(cpu_max.substr(0, space), cpu_max.substr(space + 1));
}

std::optional<std::string_view> cgroup_path(std::string_view proc_self_cgroup, std::string_view controller) {
  while (!proc_self_cgroup.empty()) {
    const auto end = proc_self_cgroup.find('\n');
    const std::string_view line = proc_self_cgroup.substr(0, end);
    proc_self_cgroup.remove_prefix(end == std::string_view::npos ? proc_self_cgroup.size() : end + 1);
    // "ID:CONTROLLERS:PATH"; the path may itself hold colons.
    const auto first = line.find(':');
    const auto second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) {
      continue;
    }
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string_view path = line.substr(second + 1);
    if (!path.starts_with('/')) {
      continue;
    }
    if (controller.empty()) {
      if (line.substr(0, first) == "0" && controllers.empty()) {
        return path;
      }
      continue;
    }
    for (std::string_view rest = controllers; !rest.empty();) {
      const auto comma = rest.find(',');
      if (rest.substr(0, comma) == controller) {
        return path;
      }
      rest.remove_prefix(comma == std::string_view::npos ? rest.size() : comma + 1);
    }
  }
  return std::nullopt;
}

unsigned available_cpus() {
  unsigned cpus = std::max(1U, std::thread::hardware_concurrency());
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0 && CPU_COUNT(&mask) > 0) {
    cpus = static_cast<unsigned>(CPU_COUNT(&mask));
  }
  const auto groups = read_small("/proc/self/cgroup");
  if (!groups) {
    return cpus;
  }
  std::optional<unsigned> quota;
  if (auto path = cgroup_path(*groups, "")) {
    quota = smallest_quota("/sys/fs/cgroup", std::string(*path), [](const std::string& folder) {
      const auto text = read_small(folder + "/cpu.max");
      return text ? cpus_of_cpu_max(*text) : std::nullopt;
    });
  }
  if (auto path = cgroup_path(*groups, "cpu"); path && !quota) {
    // cgroup v1: the cpu controller's hierarchy, mounted alone or with cpuacct.
    for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
      quota = smallest_quota(mount, std::string(*path), [](const std::string& folder) {
        const auto quota_text = read_small(folder + "/cpu.cfs_quota_us");
        const auto period_text = read_small(folder + "/cpu.cfs_period_us");
        return quota_text && period_text ? cpus_of_quota(*quota_text, *period_text) : std::nullopt;
      });
      if (quota) {
        break;
      }
    }
  }
  return quota ? std::clamp(*quota, 1U, cpus) : cpus;
}

}  // namespace kvgate::app
