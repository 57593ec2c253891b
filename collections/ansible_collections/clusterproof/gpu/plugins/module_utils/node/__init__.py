"""What runs on (or is judged for) a GPU host: GPU facts, passive health, the benchmark runner, the host
test suite.

``gpu_benchmark_runner`` is shipped to the host as a file and must stay self-contained.
May import: the standard library, ``nvidia-ml-py`` lazily, and ``report.model`` (never the
renderers: they would travel in every payload sent to a host); ``gpu_benchmark_runner`` alone, on the
host and only when a benchmark asks for one, the array libraries it measures with (torch,
torchvision, cupy, numpy). Touches: the host's GPUs, read only.
"""
