// The program verifier. Loading a program runs it; passes run it after each
// rewrite. It checks, op by op:
//   - the op type is registered and its slots and attributes fit its schema;
//   - every var an op reads is declared, and is data, persistable, a job
//     input (made by an earlier job), or written by an earlier op (a read of a var written only later is reported as a
//     cycle when the writer depends on the reader, as use-before-def
//     otherwise);
//   - shape inference reproduces every output's declared dtype and shape.
// The first error found is returned, located as "block B, op I (type)".
#ifndef LOOM_FRAMEWORK_VERIFIER_H_
#define LOOM_FRAMEWORK_VERIFIER_H_

#include "framework/program.h"

namespace loom {

Status VerifyProgram(const Program& program);
Status VerifyBlock(const Block& block);

}  // namespace loom

#endif  // LOOM_FRAMEWORK_VERIFIER_H_
