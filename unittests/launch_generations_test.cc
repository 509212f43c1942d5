// The starts of a job that its nodes' launches agree on through a real
// redis-server (runtime/launch_generations.h); skipped loudly where
// redis-server is not installed.
#include "runtime/launch_generations.h"

#include <string>

#include <gtest/gtest.h>

#include "framework/status.h"
#include "runtime/redis_server.h"

namespace loom {
namespace {

// Two nodes' launches see start 0 fail and both mark it; each then starts
// 1, as does a launch that comes later to replace a node. Another job on
// the same store is untouched.
TEST(LaunchGenerations, LaunchesAgreeOnTheStartAfterAFailedOne) {
  if (!HaveRedisServer()) GTEST_SKIP() << "SKIPPED LOUDLY: redis-server is not installed";
  auto redis = RedisServer::Start({});
  ASSERT_TRUE(redis.ok()) << redis.status();
  auto node0 = LaunchGenerations::InRedis((*redis)->endpoint(), "job-a");
  auto node1 = LaunchGenerations::InRedis((*redis)->endpoint(), "job-a");
  auto other = LaunchGenerations::InRedis((*redis)->endpoint(), "job-b");
  ASSERT_TRUE(node0.ok() && node1.ok() && other.ok()) << node0.status();
  EXPECT_EQ(*node0->Next(0), 0);
  EXPECT_EQ(*node1->Next(0), 0);
  ASSERT_TRUE(node0->MarkFailed(0).ok());
  ASSERT_TRUE(node1->MarkFailed(0).ok()) << "the second mark of one start";
  EXPECT_EQ(*node0->Next(0), 1);
  EXPECT_EQ(*node1->Next(0), 1);
  ASSERT_TRUE(node1->MarkFailed(1).ok());
  auto replacement = LaunchGenerations::InRedis((*redis)->endpoint(), "job-a");
  ASSERT_TRUE(replacement.ok());
  EXPECT_EQ(*replacement->Next(0), 2);
  EXPECT_EQ(*node0->Next(1), 2);
  EXPECT_EQ(*other->Next(0), 0);
  // One node, no store: the launch counts alone.
  LaunchGenerations alone;
  ASSERT_TRUE(alone.MarkFailed(4).ok());
  EXPECT_EQ(*alone.Next(4), 4);
}

TEST(LaunchGenerations, AStoreThatGoesAwayIsNamed) {
  if (!HaveRedisServer()) GTEST_SKIP() << "SKIPPED LOUDLY: redis-server is not installed";
  auto redis = RedisServer::Start({});
  ASSERT_TRUE(redis.ok()) << redis.status();
  const std::string endpoint = (*redis)->endpoint();
  auto generations = LaunchGenerations::InRedis(endpoint, "job");
  ASSERT_TRUE(generations.ok());
  (*redis)->Stop();
  const Status next = generations->Next(0).status();
  EXPECT_EQ(next.code(), StatusCode::kUnavailable);
  EXPECT_NE(next.message().find("the redis store at " + endpoint +
                                " did not say which start of job job is next: "),
            std::string::npos)
      << next;
  const Status marked = generations->MarkFailed(0);
  EXPECT_NE(marked.message().find("took no mark that start 0 of job job failed"),
            std::string::npos)
      << marked;
  EXPECT_EQ(LaunchGenerations::InRedis(endpoint, "job").status().code(),
            StatusCode::kUnavailable);
}

}  // namespace
}  // namespace loom
