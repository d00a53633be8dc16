"""gcomp.metrics: the lines gcomp-converge reads, from rank 0 only, and errors for a step
that does not increase, a non-number loss or an accuracy that is not a percentage."""
import json
import math
import os
import sys
import tempfile

import gcomp.metrics as m

d = tempfile.mkdtemp()
path = os.path.join(d, "m.jsonl")
os.environ.pop("GCOMP_METRICS", None)
assert not m.enabled() and m.log(0, loss=1.0) is False   # not asked for: nothing written
os.environ["GCOMP_METRICS"] = path
os.environ["RANK"] = "1"
assert not m.enabled() and m.log(0, loss=1.0) is False   # rank 1 writes nothing
assert not os.path.exists(path)
os.environ["RANK"] = "0"
assert m.enabled()
assert m.log(0, loss=2.5, accuracy=10.0, test_rows=360, comm={"wire_bytes": [1, 2]})
assert m.log(10, loss=float("nan"))                       # a diverged run is a record
for bad in [lambda: m.log(10, loss=1.0), lambda: m.log(5, loss=1.0),
            lambda: m.log(20, loss="x"), lambda: m.log(20, loss=1.0, accuracy=0.9 * 200),
            lambda: m.log(2.5 + 18, loss=1.0), lambda: m.log(-1, loss=1.0)]:
    try:
        bad()
    except ValueError:
        continue
    sys.exit("metrics_check: no error")
assert m.log(20, loss=0.5, rank=0)
m.close()
lines = open(path).read().splitlines()
assert len(lines) == 3, lines
r = [json.loads(x) for x in lines]
assert r[0] == {"step": 0, "loss": 2.5, "accuracy": 10.0, "test_rows": 360,
                "comm": {"wire_bytes": [1, 2]}}, r[0]
assert math.isnan(r[1]["loss"]) and r[2]["step"] == 20
os.environ["GCOMP_SEED"] = "7"
assert m.seed(0) == 7
os.environ["GCOMP_SEED"] = ""
assert m.seed(3) == 3
os.environ["GCOMP_SEED"] = "x"
try:
    m.seed(0)
    sys.exit("metrics_check: GCOMP_SEED=x accepted")
except ValueError:
    pass
print("metrics_check: ok")
