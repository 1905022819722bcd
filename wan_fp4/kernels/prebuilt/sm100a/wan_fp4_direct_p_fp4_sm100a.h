
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
} wan_fp4_direct_p_fp4_sm100a_Kernel_Module_t;

#ifdef __cplusplus
extern "C" {
#endif
void _mlir_wan_fp4_direct_p_fp4_sm100a_cuda_init(void **);
void _mlir_wan_fp4_direct_p_fp4_sm100a_cuda_load_to_device(void **);
static inline void wan_fp4_direct_p_fp4_sm100a_Kernel_Module_Load(wan_fp4_direct_p_fp4_sm100a_Kernel_Module_t *module) {
    cudaLibrary_t *libraryPtr = &(module->module);
    cudaError_t ret = cudaSuccess;
    struct {
        cudaLibrary_t **libraryPtr;
        cudaError_t *ret;
    } initArgs = {&libraryPtr, &ret};
    _mlir_wan_fp4_direct_p_fp4_sm100a_cuda_init((void **)(&initArgs));
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
        _mlir_wan_fp4_direct_p_fp4_sm100a_cuda_load_to_device((void **)(&loadArgs));
        CUTE_DSL_CUDA_ERROR_CHECK(ret);
    }
}

static inline void wan_fp4_direct_p_fp4_sm100a_Kernel_Module_Unload(wan_fp4_direct_p_fp4_sm100a_Kernel_Module_t *module) {
    CUTE_DSL_CUDA_ERROR_CHECK(cudaLibraryUnload(module->module));
}

#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
extern "C"
#endif
void _mlir_wan_fp4_direct_p_fp4_sm100a__mlir_ciface_cutlass___call___wan_fp4kernelssm100kernelDirectPFP4Sm100_object_at__Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_____________CUstream0x0(void **args, int32_t num_args);

static inline int32_t cute_dsl_wan_fp4_direct_p_fp4_sm100a_wrapper(wan_fp4_direct_p_fp4_sm100a_Kernel_Module_t *module, void *q_ptr, void *sfq_ptr, void *k_ptr, void *sfk_ptr, void *vt_ptr, void *sfv_ptr, void *o_ptr, void *l_ptr, void *m_ptr, int32_t seq_q, int32_t seq_kv, int32_t batch, int32_t heads, int32_t sq_pad, int32_t skv_pad, int32_t guard, float qk_log2, float affine_ac, float affine_a, float affine_b, int32_t num_ctas, cudaStream_t stream) {
    int32_t ret = 0;
    void *args[23] = {
        &q_ptr, &sfq_ptr, &k_ptr, &sfk_ptr, &vt_ptr, &sfv_ptr, &o_ptr, &l_ptr, &m_ptr, &seq_q, &seq_kv, &batch, &heads, &sq_pad, &skv_pad, &guard, &qk_log2, &affine_ac, &affine_a, &affine_b, &num_ctas, &stream,
        &ret
    };
    _mlir_wan_fp4_direct_p_fp4_sm100a__mlir_ciface_cutlass___call___wan_fp4kernelssm100kernelDirectPFP4Sm100_object_at__Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_Ptrgmem_____________CUstream0x0(args, 23);
    return ret;
}
