#error "cooperative_groups::memcpy_async (asynchronous copies) is not supported by the CPU backend; run this kernel on a GPU"
