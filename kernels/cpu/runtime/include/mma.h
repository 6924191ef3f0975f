#error "tensor core matrix operations (nvcuda::wmma from <mma.h>) are not supported by the CPU backend; run this kernel on a GPU"
