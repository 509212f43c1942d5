// Typed access to proto::Attr values.
#ifndef LOOM_FRAMEWORK_ATTRIBUTE_H_
#define LOOM_FRAMEWORK_ATTRIBUTE_H_

#include <cstdint>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "framework/framework.pb.h"

namespace loom {

// AttrValue<T>::Get reads an attribute of C++ type T, CHECK-failing on a type
// mismatch (the verifier checks attribute types against the op schema before
// anything reads them). Set writes one.
template <typename T>
struct AttrValue;

#define LOOM_SCALAR_ATTR(CPP, TYPE, FIELD)                                  \
  template <>                                                               \
  struct AttrValue<CPP> {                                                   \
    static constexpr proto::AttrType kType = proto::TYPE;                   \
    static CPP Get(const proto::Attr& a) {                                  \
      CHECK_EQ(a.type(), kType) << "attribute " << a.name() << " has type " \
                                << proto::AttrType_Name(a.type());          \
      return a.FIELD();                                                     \
    }                                                                       \
    static void Set(const CPP& v, proto::Attr* a) {                         \
      a->set_type(kType);                                                   \
      a->set_##FIELD(v);                                                    \
    }                                                                       \
  };

#define LOOM_LIST_ATTR(CPP, TYPE, FIELD)                                    \
  template <>                                                               \
  struct AttrValue<std::vector<CPP>> {                                      \
    static constexpr proto::AttrType kType = proto::TYPE;                   \
    static std::vector<CPP> Get(const proto::Attr& a) {                     \
      CHECK_EQ(a.type(), kType) << "attribute " << a.name() << " has type " \
                                << proto::AttrType_Name(a.type());          \
      return std::vector<CPP>(a.FIELD().begin(), a.FIELD().end());          \
    }                                                                       \
    static void Set(const std::vector<CPP>& v, proto::Attr* a) {            \
      a->set_type(kType);                                                   \
      a->clear_##FIELD();                                                   \
      for (const auto& x : v) a->add_##FIELD(x);                            \
    }                                                                       \
  };

LOOM_SCALAR_ATTR(int32_t, INT, i)
LOOM_SCALAR_ATTR(int64_t, LONG, l)
LOOM_SCALAR_ATTR(float, FLOAT, f)
LOOM_SCALAR_ATTR(std::string, STRING, s)
LOOM_SCALAR_ATTR(bool, BOOLEAN, b)
LOOM_LIST_ATTR(int32_t, INTS, ints)
LOOM_LIST_ATTR(int64_t, LONGS, longs)
LOOM_LIST_ATTR(float, FLOATS, floats)
LOOM_LIST_ATTR(std::string, STRINGS, strings)
LOOM_LIST_ATTR(bool, BOOLEANS, bools)

#undef LOOM_SCALAR_ATTR
#undef LOOM_LIST_ATTR

// A string literal is a string attribute.
template <size_t N>
struct AttrValue<char[N]> {
  static void Set(const char (&v)[N], proto::Attr* a) {
    AttrValue<std::string>::Set(std::string(v), a);
  }
};

// Builds a named attribute of any supported type.
template <typename T>
proto::Attr MakeAttr(const std::string& name, const T& value) {
  proto::Attr a;
  a.set_name(name);
  AttrValue<T>::Set(value, &a);
  return a;
}

// "3", "0.5", "\"causal\"", "[1, 2]"; for listings.
std::string AttrToString(const proto::Attr& attr);

}  // namespace loom

#endif  // LOOM_FRAMEWORK_ATTRIBUTE_H_
