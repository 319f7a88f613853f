"""Self-test of the generated catalog on the CPU EP (run with EPAUDIT_GENERATED=1 or unset).

    python benchmarks/generated_selftest.py all      # every generated probe x ignore, refuse,
                                                     # fallback, nan, perturb, unwritten (~40 s)
    python benchmarks/generated_selftest.py sample   # first probe of each operator x all 8 faults,
                                                     # kill and hang included (~70 s)

`kill` and `hang` cost a worker restart per probe (hang also its timeout), so they run on
the stratified sample; the other faults run on every probe. Exit 1 on any miss.
"""
import collections
import sys
import time


def main() -> int:
    from epaudit.catalog import FEATURES
    from epaudit.matrix.load import load
    from epaudit.run.selftest import FAULTS, cpu_skips, run_selftest

    gen = [f for f in FEATURES if f.id.startswith("onnx.")]
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else len(gen)
    mode = sys.argv[1]
    skip = cpu_skips(load())
    if mode == "sample":
        seen, feats = set(), []
        for f in gen:
            if f.op_type not in seen:
                seen.add(f.op_type); feats.append(f)
        faults = FAULTS
    else:
        feats = gen[:limit]
        faults = tuple(f for f in FAULTS if f not in ("kill", "hang"))
    t0 = time.time()
    r = run_selftest(feats, faults=faults, skip=skip)
    applied = sum(1 for d in r.cells.values() if d.got is not None)
    na = collections.Counter(d.summary.split(":")[0] + ": " + d.summary.split(":")[1][:60] if d.got is None else "" for d in r.cells.values())
    print(f"{mode}: {len(feats)} probes x {len(faults)} faults in {time.time()-t0:.0f} s: {applied} applicable cells, "
          f"{len(r.misses)} misses; exit {r.exit_code}")
    for m in r.misses:
        print("MISS", m.feature_id, m.fault, m.expected, m.got, m.summary[:150])
    for k, v in na.most_common(8):
        if k: print("not applicable:", v, k)
    return r.exit_code


if __name__ == "__main__":
    sys.exit(main())
