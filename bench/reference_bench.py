"""The Python reference runtime (zgc-runtime 0.1.0) on the benchmark workloads.
Usage: python reference_bench.py <artifact.so> <workload>; prints {"median_ns", "batches_ns"},
timed like floor.c (median of batches, each at least 40 ms, fewer batches for slow ones)."""
import array
import json
import sys
import time

import zgc

MIN_BATCH_NS = 40e6


def measure(op, batches):
    iters = 1
    while True:
        t0 = time.perf_counter_ns()
        for _ in range(iters):
            op()
        if time.perf_counter_ns() - t0 >= MIN_BATCH_NS / 4:
            break
        iters *= 2
    iters = max(1, iters * 4 if iters > 1 else 1)
    out = []
    for _ in range(batches):
        t0 = time.perf_counter_ns()
        for _ in range(iters):
            op()
        out.append((time.perf_counter_ns() - t0) / iters)
    return {"median_ns": sorted(out)[len(out) // 2], "batches_ns": out}


def shaped(values, shape):
    """The reference checks a buffer's shape against the source's, not only its length."""
    return memoryview(values).cast("B").cast("f", shape)


def main():
    path, workload = sys.argv[1], sys.argv[2]
    rt = zgc.load(path)
    n = {"add-tiny": 4, "matmul": 256 * 256}.get(workload, 1 << 20)
    a = array.array("f", [(k % 1000) * 0.5 for k in range(n)])
    b = array.array("f", [1.0] * n)
    if workload in ("add-tiny", "add-owned-1m"):
        result = measure(lambda: rt.run(a=a, b=b), 15 if n == 4 else 7)
    elif workload == "add-bound-1m":
        rt.bind("a", memoryview(a))
        rt.bind("b", memoryview(b))
        result = measure(lambda: rt.run(), 7)
    elif workload == "pack":
        # The reference takes a buffer of the logical shape.
        w = shaped(a, [1024, 1024])
        result = measure(lambda: rt.set_source("w", w), 3)
    elif workload == "half-1m":
        values = list(a)
        result = measure(lambda: rt.run(x=values)[0].values, 3)
    elif workload == "matmul":
        rt.bind("b", shaped(b, [256, 256]))
        result = measure(lambda: rt.run(a=a), 7)
    else:
        raise SystemExit(f"unknown workload {workload}")
    rt.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
