// Keeps the GPU busy for about `ns` nanoseconds without touching memory.
//
// benchmark() queues this (one thread) just before each start event. While it runs, Python
// queues the timed work behind it, so when the start event fires the work is already waiting
// and the interval between the events holds GPU time only, not Python's launch overhead.
// %globaltimer is the GPU's nanosecond clock; __nanosleep keeps the waiting thread quiet.
extern "C" __global__ void gpu_sleep(long long ns)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    now = start;
    while (now - start < (unsigned long long)ns) {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    }
}
