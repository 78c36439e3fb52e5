"""S0 and S2 quantized and timed end to end through XNNPACK in one fresh process (ms), to set beside the
checks' timings of the same networks."""

import time

from nas.config.spaces import load_space
from nas.latency.measure import Timer, TimingConfig, measure_network

space = load_space("efficientformerv2")
timer = Timer("xnnpack-int8", TimingConfig())
for name in ["efficientformerv2_s0", "efficientformerv2_s2", "efficientformerv2_s0"]:
    start = time.time()
    ms = measure_network(timer, space.members[name], 64, 1000)
    print(name, f"{ms:.3f} ms", f"({time.time() - start:.0f} s)", flush=True)
