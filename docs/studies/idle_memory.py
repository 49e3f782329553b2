"""What a sleep costs a Python process on this machine (issue 17's host figure): the CPU time
to touch the same Python objects again after sleeping S seconds, against touching them at
once.  Nothing else runs in the process and no page fault is counted (no swap), so the
difference is the machine's: memory left idle comes back slowly, and the longer it was idle
the more it costs.

`dlforge bench loader` sleeps as long as the simulated board needs for a batch (10-45 s
here, where a PCIe card would take some 35 ms), so every wake-up pays this for the host's
code and data.

    .venv/bin/python docs/studies/idle_memory.py [--objects N]
"""
import argparse
import json
import resource
import time


def touch(objects, stride):
    total = 0
    for entry in objects[::stride]:
        total += entry["a"]
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=200_000)
    parser.add_argument("--stride", type=int, default=16)
    args = parser.parse_args()
    objects = [{"a": i, "b": str(i)} for i in range(args.objects)]
    touch(objects, args.stride)
    rows = []
    for sleep in (0.1, 1.0, 5.0, 15.0, 30.0):
        time.sleep(sleep)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.process_time()
        touch(objects, args.stride)
        first = time.process_time() - start
        start = time.process_time()
        touch(objects, args.stride)
        again = time.process_time() - start
        rows.append({"sleep_s": sleep, "first_touch_ms": round(1e3 * first, 2),
                     "again_ms": round(1e3 * again, 2),
                     "page_faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults})
    print(json.dumps({"objects": args.objects, "touched": len(objects[::args.stride]),
                      "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
