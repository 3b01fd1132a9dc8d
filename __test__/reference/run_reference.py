"""Runs steps through the Python reference runtime (zgc-runtime 0.1.0) and prints outputs.

stdin: {"artifact": path, "steps": [{"set": {name: values}} | {"run": {name: values}}]}
stdout: one JSON list per "run" step: [{"dtype", "shape", "values"}] per output.
"""
import json
import struct
import sys

import zgc

FORMATS = {"f32": "f", "f16": "e", "i8": "b", "bool": "?"}


def packed(runtime, name, values):
    """Values as raw logical bytes. The reference checks a list's length against the
    physical element count, so it refuses lists for padded BOUND sources; bytes it takes."""
    source = next(s for s in runtime.sources if s.name == name)
    fmt = FORMATS[source.tensor.dtype.name]
    return struct.pack(f"={len(values)}{fmt}", *values)


def main() -> None:
    job = json.load(sys.stdin)
    runtime = zgc.load(job["artifact"])
    results = []
    for step in job["steps"]:
        if "set" in step:
            for name, values in step["set"].items():
                runtime.set_source(name, packed(runtime, name, values))
        else:
            outputs = runtime.run(**{n: packed(runtime, n, v) for n, v in step["run"].items()})
            results.append(
                [
                    {"dtype": t.dtype.name, "shape": list(t.shape), "values": [float(v) for v in t.values]}
                    for t in outputs
                ]
            )
    runtime.close()
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
