#pragma once
// How many CPUs this process may use, for the defaults that mean "one
// thread per core" (the gateway's `threads: 0`, `kvgate tokenize`'s
// `--threads`): the scheduler's affinity mask (taskset, a container's
// cpuset), capped by any CPU quota on the process's cgroup or its
// ancestors (a Kubernetes CPU limit; cgroup v2's cpu.max, or v1's
// cpu.cfs_quota_us), which the mask does not show.
// std::thread::hardware_concurrency() counts the machine's CPUs: on a
// 64-core node, a pod limited to two CPUs would start 64 threads, each
// throttled by the quota, each with its own buffers and caches.
#include <optional>
#include <string_view>

namespace kvgate::app {

// Whole CPUs a quota grants per period (both in microseconds, as the
// kernel writes them), rounded up; nullopt for no limit ("max" in v2, -1 in
// v1) or a text that is not a number.
std::optional<unsigned> cpus_of_quota(std::string_view quota, std::string_view period);
// The same from a cgroup v2 `cpu.max` text ("QUOTA PERIOD").
std::optional<unsigned> cpus_of_cpu_max(std::string_view cpu_max);

// The process's cgroup in a /proc/self/cgroup text: the cgroup v2 path
// ("0::/PATH") when `controller` is empty, else the path of the v1
// hierarchy that lists `controller` ("3:cpu,cpuacct:/PATH"). nullopt when
// there is none.
std::optional<std::string_view> cgroup_path(std::string_view proc_self_cgroup, std::string_view controller);

// At least 1. Reads the affinity mask, /proc/self/cgroup and the quota
// files under /sys/fs/cgroup: for start-up, not for a request path.
unsigned available_cpus();

}  // namespace kvgate::app
