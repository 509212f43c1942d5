#include "framework/attribute.h"

#include <sstream>

namespace loom {
namespace {

template <typename List>
std::string ListToString(const List& list, bool quote) {
  std::ostringstream os;
  os << "[";
  bool first = true;
  for (const auto& x : list) {
    if (!first) os << ", ";
    first = false;
    if (quote) {
      os << '"' << x << '"';
    } else {
      os << x;
    }
  }
  os << "]";
  return os.str();
}

}  // namespace

std::string AttrToString(const proto::Attr& a) {
  std::ostringstream os;
  switch (a.type()) {
    case proto::INT: os << a.i(); break;
    case proto::LONG: os << a.l(); break;
    case proto::FLOAT: os << a.f(); break;
    case proto::STRING: os << '"' << a.s() << '"'; break;
    case proto::BOOLEAN: os << (a.b() ? "true" : "false"); break;
    case proto::INTS: return ListToString(a.ints(), false);
    case proto::LONGS: return ListToString(a.longs(), false);
    case proto::FLOATS: return ListToString(a.floats(), false);
    case proto::STRINGS: return ListToString(a.strings(), true);
    case proto::BOOLEANS: return ListToString(a.bools(), false);
  }
  return os.str();
}

}  // namespace loom
