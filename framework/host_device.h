// LOOM_HOST_DEVICE marks the few framework functions nvcc also compiles for
// the device, so that a CUDA kernel computes with the CPU's one
// implementation (counter_rng.h, lr_schedule.h).
#ifndef LOOM_FRAMEWORK_HOST_DEVICE_H_
#define LOOM_FRAMEWORK_HOST_DEVICE_H_

#ifdef __CUDACC__
#define LOOM_HOST_DEVICE __host__ __device__
#else
#define LOOM_HOST_DEVICE
#endif

#endif  // LOOM_FRAMEWORK_HOST_DEVICE_H_
