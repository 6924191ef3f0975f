"""What the tests and the benchmark scripts need and students never do: the scanner that finds every
CUDA C source to compile (``cuda_snippets``) and the traffic model's test set with its Nsight Compute
record (``traffic_testset``, ``ncu_h100.json``). Kept here, out of the ``kernels`` package that
Colab installs."""
