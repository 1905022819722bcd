// How many CTA pairs (and larger clusters) this H200 can hold at once at one CTA per SM: a
// cluster's CTAs must share a GPC, so a GPC with an odd SM count leaves one SM out of pairs.
#include <cstdio>
#include <cuda_runtime.h>
__global__ void probe(unsigned* smid) {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  if (threadIdx.x == 0) smid[blockIdx.x] = s;
}
int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int smem = 120 * 1024;  // above half an SM's shared memory: one CTA per SM, as our kernels
  cudaFuncSetAttribute(probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  for (unsigned cs : {1u, 2u, 4u, 8u, 16u}) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(cs * sms);
    cfg.blockDim = dim3(384);
    cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute a;
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = cs; a.val.clusterDim.y = 1; a.val.clusterDim.z = 1;
    cfg.attrs = &a;
    cfg.numAttrs = 1;
    int n = 0;
    cudaError_t e = cudaOccupancyMaxActiveClusters(&n, probe, &cfg);
    printf("cluster size %2u: at most %3d clusters at once, %3d of %d SMs busy (%s)\n", cs, n, n * cs, sms,
           cudaGetErrorString(e));
  }
  return 0;
}
