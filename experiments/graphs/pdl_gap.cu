// Probe (`nvcc -O2 -arch=sm_90 -o pdl_gap pdl_gap.cu && ./pdl_gap BLOCKS CHAIN`): what
// programmatic dependent launch saves between small dependent kernels in a CUDA
// graph on this GPU. Five kernels, each a few blocks that read the previous kernel's output
// and write their own; captured into a graph with and without the programmatic-serialization
// launch attribute (each kernel waits for its predecessor with griddepcontrol.wait before
// reading, and lets its dependent launch at its start). Prints the median graph replay time.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void step(const float* in, float* out, int n, int pdl, int chain) {
  if (pdl) {
    asm volatile("griddepcontrol.launch_dependents;");
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  // A short dependent chain of loads, like the IVF kernels' item decoding.
  float v = 0.f;
  int j = i;
  for (int c = 0; c < chain; ++c) { v += in[j % n]; j = (j * 7 + (int)v) & (n - 1); }
  if (i < n) out[i] = v + 1.f;
}

int main(int argc, char** argv) {
  int blocks = argc > 1 ? atoi(argv[1]) : 16, kernels = 5, reps = 2000, chain = argc > 2 ? atoi(argv[2]) : 4;
  int n = 1 << 16;
  float *a, *b;
  CK(cudaMalloc(&a, n * 4)); CK(cudaMalloc(&b, n * 4));
  CK(cudaMemset(a, 0, n * 4)); CK(cudaMemset(b, 0, n * 4));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int pdl = 0; pdl < 2; ++pdl) {
    cudaGraph_t g; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int k = 0; k < kernels; ++k) {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(blocks); cfg.blockDim = dim3(256); cfg.stream = s;
      cudaLaunchAttribute at[1];
      at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      at[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = at; cfg.numAttrs = (pdl && k > 0) ? 1 : 0;
      const float* in = (k % 2) ? b : a; float* out = (k % 2) ? a : b;
      CK(cudaLaunchKernelEx(&cfg, step, in, out, n, pdl, chain));
    }
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int r = 0; r < reps; ++r) {
      CK(cudaEventRecord(e0, s)); CK(cudaGraphLaunch(ge, s)); CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (r >= 100) t.push_back(ms * 1000.f);
    }
    std::sort(t.begin(), t.end());
    printf("blocks %d chain %d pdl %d: graph of %d kernels p50 %.2f us p10 %.2f p90 %.2f\n",
           blocks, chain, pdl, kernels, t[t.size() / 2], t[t.size() / 10], t[t.size() * 9 / 10]);
    CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
  }
  CK(cudaGetLastError());
  return 0;
}
