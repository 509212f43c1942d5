// What the tests of the emulated network share: skipping loudly where no
// network can be built, and finding what a network left behind.
#ifndef LOOM_UNITTESTS_EMULATED_NETWORK_UTIL_H_
#define LOOM_UNITTESTS_EMULATED_NETWORK_UTIL_H_

#include <regex>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "runtime/emulated_network.h"
#include "unittests/loom_cli.h"

namespace loom {

// Why this host cannot build a network; empty if it can.
inline std::string WhyNoNetwork() {
  Status s = CheckEmulatedNetworkSupport();
  return s.ok() ? "" : s.message();
}

#define SKIP_WITHOUT_NETWORK()                                                                 \
  if (const std::string why = WhyNoNetwork(); !why.empty())                                   \
  GTEST_SKIP() << "SKIPPED LOUDLY: the emulated network was not tested on this host: " << why \
               << " (run the tests as root with iproute2 installed)"

// Interfaces named like ours in this (the root) namespace, where ours
// never live.
inline std::string OurLinksHere() {
  std::string found;
  std::istringstream links(Shell("ip -o link show").out);
  for (std::string line; std::getline(links, line);) {
    if (std::regex_search(line, std::regex("^[0-9]+: (rank[0-9]+|node[0-9]+|br0)[@:]"))) found += line + "; ";
  }
  return found;
}

// The namespaces of network `prefix`, and any interface of ours here;
// empty when nothing is left.
inline std::string Leftovers(const std::string& prefix) {
  std::string left;
  std::istringstream netns(Shell("ip netns list").out);
  for (std::string line; std::getline(netns, line);) {
    if (line.rfind(prefix + "-", 0) == 0) left += "namespace " + line + "; ";
  }
  return left + OurLinksHere();
}

}  // namespace loom

#endif  // LOOM_UNITTESTS_EMULATED_NETWORK_UTIL_H_
