#!/usr/bin/env bash
# gcomp-converge --real (4 processes under gcomp-run, libfabric shm) must reproduce the
# simulated run (4 threads over the loopback transport) bitwise: the same curves, minibatch
# losses, gradient errors and wire bytes, for the baseline, every codec and the noise
# floor's twins (a placement must mean the same in both modes).
# usage: real_vs_sim.sh GCOMP_RUN GCOMP_CONVERGE WORKDIR
set -euo pipefail
run=$1 conv=$2 dir=$3
mkdir -p "$dir"
args=(--problem gmm/softmax --problem gmm/mlp --steps 60 --synth-n 2000 --no-progress --quiet
      --codec bf16 --codec 'topk:ratio=0.01+ef' --codec none+ef --noise-floor 2)
# verdicts do not matter here (60 steps are short): exit status 1 is fine, 2 (an error) is not
rc=0; "$run" -n 4 -- "$conv" --real "${args[@]}" --json "$dir/real.json" 2>"$dir/real.log" || rc=$?
[ "$rc" -le 1 ] || { cat "$dir/real.log"; echo "real_vs_sim: --real run failed ($rc)"; exit 1; }
rc=0; "$conv" --workers 4 "${args[@]}" --json "$dir/sim.json" 2>"$dir/sim.log" || rc=$?
[ "$rc" -le 1 ] || { cat "$dir/sim.log"; echo "real_vs_sim: simulated run failed ($rc)"; exit 1; }
python3 - "$dir/real.json" "$dir/sim.json" <<'PY'
import json, sys
real, sim = (json.load(open(p)) for p in sys.argv[1:3])
assert real["config"]["workers"] == sim["config"]["workers"] == 4, "worker counts differ"
n = 0
for pr, ps in zip(real["problems"], sim["problems"]):
    pairs = [(pr["baseline"], ps["baseline"])] + [(a["run"], b["run"]) for a, b in zip(pr["codecs"], ps["codecs"])]
    assert len(pr["twins"]) == len(ps["twins"]) == 2 and pr["noise_floor"] == ps["noise_floor"]
    assert len(set(pr["noise_floor"]["placements"])) == 2, pr["noise_floor"]
    pairs += list(zip(pr["twins"], ps["twins"]))
    for a, b in pairs:
        where = "%s/%s %s" % (pr["task"], pr["model"], a["spec"])
        assert "error" not in a and "error" not in b, where + ": " + a.get("error", b.get("error", ""))
        for key in ("curve", "steps"):
            assert a[key] == b[key], "%s: %s differs between --real and simulated" % (where, key)
        for key in ("wire_bytes", "final_loss", "final_drift", "replicas_equal"):
            assert a[key] == b[key], "%s: %s %r vs %r" % (where, key, a[key], b[key])
        n += 1
assert n == 12, "expected 12 runs, compared %d" % n
print("real_vs_sim: %d runs identical between --real (4 processes) and simulated (4 threads)" % n)
PY

# --real with a baseline that diverges: every rank refuses the noise floor together (the
# decision rests on parameters all ranks share, not on rank 0's loss): exit 2, no hang.
# --grace: gcomp-run stops the other ranks as soon as one exits with an error, and a rank
# stopped that way (SIGTERM, which a library it loads turns into status 1) looked like one
# that went on alone; every rank must end on its own, so each gets 20 s to.
rc=0; timeout 120 "$run" -n 4 --grace 20000 -- "$conv" --real --problem gmm/mlp --steps 60 \
  --synth-n 1000 --no-progress --codec none --noise-floor 2 --lr 1000 >"$dir/div.log" 2>&1 || rc=$?
# (a rank that went on alone fails its next collective once rank 0 has left: status 1, or
# is stopped after the grace)
[ "$rc" -eq 2 ] && grep -q "no noise floor: the baseline diverged" "$dir/div.log" \
  && ! grep -q "exited with status 1" "$dir/div.log" && ! grep -q "killed by signal" "$dir/div.log" \
  || { cat "$dir/div.log"; echo "real_vs_sim: diverged baseline with --noise-floor: exit $rc"; exit 1; }
echo "real_vs_sim: a diverged baseline ends every rank's floor together"
