
#pragma once

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdio.h>
#include <stdint.h>


// Macro to check for cuda errors.
#ifndef CUTE_DSL_CUDA_ERROR_CHECK
#define CUTE_DSL_CUDA_ERROR_CHECK(err) { \
    if ((err) != cudaSuccess) { \
        printf("Got Cuda Error %s: %s\n", cudaGetErrorName(err), cudaGetErrorString(err)); \
    } \
}

#endif

typedef struct {
    cudaLibrary_t module;
} wanfp4_sm90_directp_d128_fold1_persistent132_Kernel_Module_t;

#ifdef __cplusplus
extern "C" {
#endif
void _mlir_wanfp4_sm90_directp_d128_fold1_persistent132_cuda_init(void **);
void _mlir_wanfp4_sm90_directp_d128_fold1_persistent132_cuda_load_to_device(void **);
static inline void wanfp4_sm90_directp_d128_fold1_persistent132_Kernel_Module_Load(wanfp4_sm90_directp_d128_fold1_persistent132_Kernel_Module_t *module) {
    cudaLibrary_t *libraryPtr = &(module->module);
    cudaError_t ret = cudaSuccess;
    struct {
        cudaLibrary_t **libraryPtr;
        cudaError_t *ret;
    } initArgs = {&libraryPtr, &ret};
    _mlir_wanfp4_sm90_directp_d128_fold1_persistent132_cuda_init((void **)(&initArgs));
    CUTE_DSL_CUDA_ERROR_CHECK(ret);
    int32_t device_id = 0;
    struct {
        cudaLibrary_t **library;
        int32_t *device_id;
        cudaError_t *ret;
    } loadArgs = {&libraryPtr, &device_id, &ret};
    int32_t device_count;
    CUTE_DSL_CUDA_ERROR_CHECK(cudaGetDeviceCount(&device_count));
    for (int32_t i = 0; i < device_count; i++) {
        device_id = i;
        _mlir_wanfp4_sm90_directp_d128_fold1_persistent132_cuda_load_to_device((void **)(&loadArgs));
        CUTE_DSL_CUDA_ERROR_CHECK(ret);
    }
}

static inline void wanfp4_sm90_directp_d128_fold1_persistent132_Kernel_Module_Unload(wanfp4_sm90_directp_d128_fold1_persistent132_Kernel_Module_t *module) {
    CUTE_DSL_CUDA_ERROR_CHECK(cudaLibraryUnload(module->module));
}

#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
extern "C"
#endif
void _mlir_wanfp4_sm90_directp_d128_fold1_persistent132__mlir_ciface_cutlass___call___wan_fp4kernelssm90kernelSm90Attention_object_at__Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem________FakeStream(void **args, int32_t num_args);

static inline int32_t cute_dsl_wanfp4_sm90_directp_d128_fold1_persistent132_wrapper(wanfp4_sm90_directp_d128_fold1_persistent132_Kernel_Module_t *module, void *p_q, void *p_k, void *p_vt, void *p_o, void *p_lse, void *p_sq, void *p_sk, void *p_sv, void *p_part, void *p_ticket, void *p_stats, int32_t b, int32_t h, int32_t s_q, int32_t s_kv, int32_t split, int32_t segments, float c, cudaStream_t stream) {
    int32_t ret = 0;
    void *args[20] = {
        &p_q, &p_k, &p_vt, &p_o, &p_lse, &p_sq, &p_sk, &p_sv, &p_part, &p_ticket, &p_stats, &b, &h, &s_q, &s_kv, &split, &segments, &c, &stream,
        &ret
    };
    _mlir_wanfp4_sm90_directp_d128_fold1_persistent132__mlir_ciface_cutlass___call___wan_fp4kernelssm90kernelSm90Attention_object_at__Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem________FakeStream(args, 20);
    return ret;
}
