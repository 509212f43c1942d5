// What an op does, counted from its shapes alone: floating-point
// operations, bytes touched, and for communication ops the bytes they move.
// The cost model prices this work; the pipeline cut balances it. Counting
// is not costing: there are no rates or constants here.
#ifndef LOOM_FRAMEWORK_OP_WORK_H_
#define LOOM_FRAMEWORK_OP_WORK_H_

#include <array>
#include <cstdint>
#include <string>

#include "framework/program.h"

namespace loom {

struct OpWork {
  // matmul and its gradient: 2*M*N*K per product; every other op: the
  // number of elements it writes (a memory-bound op touches each once).
  double flops = 0;
  // Bytes of every tensor it reads (buffers only) and writes.
  double bytes = 0;
  // Ops whose schema communicates: bytes this rank contributes to one call
  // (a collective's inputs, a send's X, a recv's Out), and how many calls
  // the op makes (the vocabulary-parallel cross entropy makes three
  // all-reduces of one float per row).
  int64_t comm_bytes = 0;
  int comm_calls = 0;
  // matmul and its gradient: the output of each product, for a device that
  // computes a product in tiles of its output (a gradient computes up to
  // two, of equal FLOPs: X's gradient and Y's). The product's rows and
  // columns are its output's last two dims, its batch the rest.
  struct Product {
    int64_t batch = 0, rows = 0, cols = 0;
  };
  std::array<Product, 2> products;
  int num_products = 0;
};

OpWork WorkOf(const Op& op);

// The key of an op in the cost table: its type, the dtype and shape of
// every input and output, and the attributes that change its work, e.g.
// "matmul fp32[256,64] fp32[64,192] -> fp32[256,192] transpose_y=1".
std::string OpSignature(const Op& op);

}  // namespace loom

#endif  // LOOM_FRAMEWORK_OP_WORK_H_
