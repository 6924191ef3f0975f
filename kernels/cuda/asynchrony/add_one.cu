// The smallest useful kernel: add 1 to every element, in place.
//
// The chapter launches it many times in a row on a small array to measure what a launch
// costs when the kernel itself does almost nothing: first one launch after another from
// Python, then the same chain captured once into a CUDA graph and replayed.
// After a chain of L launches every element has grown by exactly L (small whole numbers
// are exact in float32), which makes it easy to check that no launch was lost.
extern "C" __global__ void add_one(float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] += 1.0f;
    }
}
