#include "kvgate/app/cpus.hpp"

#include <gtest/gtest.h>

#include <thread>

namespace kvgate::app {
namespace {

TEST(Cpus, AQuotaGrantsItsWholeCpusRoundedUp) {
  EXPECT_EQ(cpus_of_cpu_max("200000 100000\n"), 2U);
  EXPECT_EQ(cpus_of_cpu_max("150000 100000"), 2U);  // 1.5 CPUs: two threads, each throttled a little
  EXPECT_EQ(cpus_of_cpu_max("50000 100000\n"), 1U);
  EXPECT_EQ(cpus_of_quota("400000\n", "100000\n"), 4U);  // cgroup v1's two files
}

TEST(Cpus, NoLimitOrAnUnreadableTextGrantsNothing) {
  EXPECT_EQ(cpus_of_cpu_max("max 100000\n"), std::nullopt);
  EXPECT_EQ(cpus_of_quota("-1\n", "100000\n"), std::nullopt);  // v1's "no limit"
  EXPECT_EQ(cpus_of_cpu_max(""), std::nullopt);
  EXPECT_EQ(cpus_of_cpu_max("200000"), std::nullopt);
  EXPECT_EQ(cpus_of_cpu_max("200000 0"), std::nullopt);
  EXPECT_EQ(cpus_of_cpu_max("0 100000"), std::nullopt);
  EXPECT_EQ(cpus_of_cpu_max("2e5 100000"), std::nullopt);
  EXPECT_EQ(cpus_of_quota("99999999999999999999999", "1"), std::nullopt);  // past 64 bits
}

TEST(Cpus, TheCgroupPathIsFoundForV2AndForTheV1CpuHierarchy) {
  const std::string_view v2 = "0::/kubepods.slice/pod-1/container-2\n";
  EXPECT_EQ(cgroup_path(v2, ""), "/kubepods.slice/pod-1/container-2");
  EXPECT_EQ(cgroup_path(v2, "cpu"), std::nullopt);
  const std::string_view hybrid =
      "9:name=systemd:/\n4:memory:/process_api/90a4\n3:cpuset:/\n2:cpu,cpuacct:/docker/abc\n0::/\n";
  EXPECT_EQ(cgroup_path(hybrid, "cpu"), "/docker/abc");
  EXPECT_EQ(cgroup_path(hybrid, "cpuacct"), "/docker/abc");
  EXPECT_EQ(cgroup_path(hybrid, "cpuset"), "/");
  EXPECT_EQ(cgroup_path(hybrid, ""), "/");
  EXPECT_EQ(cgroup_path("1:cpu:/a:b\n", "cpu"), "/a:b");          // a path may hold colons
  EXPECT_EQ(cgroup_path("2:cpuacct:/x\n", "cpu"), std::nullopt);  // a controller name, not a prefix
  EXPECT_EQ(cgroup_path("garbage\n\n1:cpu\n", "cpu"), std::nullopt);
  EXPECT_EQ(cgroup_path("", ""), std::nullopt);
}

// This process's own budget: at least one CPU and never more than the
// machine has (a quota or a mask can only lower it).
TEST(Cpus, TheProcessMayUseAtLeastOneCpuAndNoMoreThanTheMachineHas) {
  const unsigned cpus = available_cpus();
  EXPECT_GE(cpus, 1U);
  EXPECT_LE(cpus, std::max(1U, std::thread::hardware_concurrency()));
}

}  // namespace
}  // namespace kvgate::app
