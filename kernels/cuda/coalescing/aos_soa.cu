// Array of structs (AoS) against struct of arrays (SoA), reading one field.
//
// A particle has four floats: x, y, z and mass. Stored as an array of structs,
// particle i occupies bytes 16 i .. 16 i + 15, so the x fields of 32 consecutive
// particles are 16 bytes apart and a warp's load of x touches 16 sectors (512
// bytes) to use 128 of them. Stored as a struct of arrays, all x values are
// contiguous and the same load touches 4 sectors.
//
// Both kernels compute out[i] = 2 * x_i. The AoS kernel takes the particles as a
// plain float array of 4 n floats (an (n, 4) CuPy array) and views it as structs.
struct Particle {
    float x, y, z, mass;
};

extern "C" __global__ void scale_x_aos(const float* __restrict__ particles,
                                       float* __restrict__ out, int n)
{
    const Particle* p = reinterpret_cast<const Particle*>(particles);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        out[i] = 2.0f * p[i].x;
    }
}

extern "C" __global__ void scale_x_soa(const float* __restrict__ xs,
                                       float* __restrict__ out, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        out[i] = 2.0f * xs[i];
    }
}
