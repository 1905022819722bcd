
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
} wanfp4_sm90_prepass_directp_d64_stagekv_Kernel_Module_t;

#ifdef __cplusplus
extern "C" {
#endif
void _mlir_wanfp4_sm90_prepass_directp_d64_stagekv_cuda_init(void **);
void _mlir_wanfp4_sm90_prepass_directp_d64_stagekv_cuda_load_to_device(void **);
static inline void wanfp4_sm90_prepass_directp_d64_stagekv_Kernel_Module_Load(wanfp4_sm90_prepass_directp_d64_stagekv_Kernel_Module_t *module) {
    cudaLibrary_t *libraryPtr = &(module->module);
    cudaError_t ret = cudaSuccess;
    struct {
        cudaLibrary_t **libraryPtr;
        cudaError_t *ret;
    } initArgs = {&libraryPtr, &ret};
    _mlir_wanfp4_sm90_prepass_directp_d64_stagekv_cuda_init((void **)(&initArgs));
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
        _mlir_wanfp4_sm90_prepass_directp_d64_stagekv_cuda_load_to_device((void **)(&loadArgs));
        CUTE_DSL_CUDA_ERROR_CHECK(ret);
    }
}

static inline void wanfp4_sm90_prepass_directp_d64_stagekv_Kernel_Module_Unload(wanfp4_sm90_prepass_directp_d64_stagekv_Kernel_Module_t *module) {
    CUTE_DSL_CUDA_ERROR_CHECK(cudaLibraryUnload(module->module));
}

#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
extern "C"
#endif
void _mlir_wanfp4_sm90_prepass_directp_d64_stagekv__mlir_ciface_cutlass___call___wan_fp4kernelssm90prepass_kernelShortPrepass_object_at__Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_____________FakeStr(void **args, int32_t num_args);

static inline int32_t cute_dsl_wanfp4_sm90_prepass_directp_d64_stagekv_wrapper(wanfp4_sm90_prepass_directp_d64_stagekv_Kernel_Module_t *module, void *p_q, void *p_k, void *p_v, void *p_q8, void *p_k8, void *p_v8t, void *p_qs, void *p_ks, void *p_vs, void *p_km, void *p_st, int64_t qb, int64_t qs, int64_t qh, int64_t kb, int64_t ks, int64_t kh, int64_t vb, int64_t vs, int64_t vh, int32_t b, int32_t h, int32_t s, cudaStream_t stream) {
    int32_t ret = 0;
    void *args[25] = {
        &p_q, &p_k, &p_v, &p_q8, &p_k8, &p_v8t, &p_qs, &p_ks, &p_vs, &p_km, &p_st, &qb, &qs, &qh, &kb, &ks, &kh, &vb, &vs, &vh, &b, &h, &s, &stream,
        &ret
    };
    _mlir_wanfp4_sm90_prepass_directp_d64_stagekv__mlir_ciface_cutlass___call___wan_fp4kernelssm90prepass_kernelShortPrepass_object_at__Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_____________FakeStr(args, 25);
    return ret;
}
