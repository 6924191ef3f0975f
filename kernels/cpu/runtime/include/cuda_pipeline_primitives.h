#error "asynchronous copies (__pipeline_memcpy_async, cp.async) are not supported by the CPU backend; run this kernel on a GPU"
