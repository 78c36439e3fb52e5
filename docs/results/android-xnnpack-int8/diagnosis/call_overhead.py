"""A program adding 1, timed through XNNPACK in float and in int8 at the table's input shapes (ms): how much more
an isolated int8 block pays at its boundary (quantize in, dequantize out) than a float one."""

import torch

from nas.latency.measure import Timer, TimingConfig, _AddOne

int8_timer, float_timer = Timer("xnnpack-int8", TimingConfig()), Timer("xnnpack", TimingConfig())
for shape in [(1, 3, 64, 64), (1, 32, 16, 16), (1, 48, 8, 8), (1, 96, 4, 4), (1, 192, 4, 4), (1, 384, 2, 2)]:
    x = torch.randn(shape)
    float_ms, int8_ms = float_timer.time(_AddOne(), x), int8_timer.time(_AddOne(), x)
    print(shape, f"float {float_ms:.4f} int8 {int8_ms:.4f}", flush=True)
