"""Training metrics for convergence checks: JSON lines to the file GCOMP_METRICS names.

    import gcomp.metrics
    gcomp.metrics.log(step, loss=0.53, accuracy=91.2, test_rows=360)

One line per evaluation, written by rank 0 only (any rank may call log()):

    {"step": 40, "loss": 0.53, "accuracy": 91.2, "test_rows": 360}

step: a whole number that increases from call to call; loss: the training loss;
accuracy (optional): test accuracy in percent; test_rows (optional): the test rows it is
counted on, which tells gcomp-converge what one row is worth. Other keywords are written
beside them (numbers, strings, lists) and ignored by the verdicts.

`gcomp-converge run -- COMMAND` sets GCOMP_METRICS for each run of COMMAND (and
GCOMP_SEED when it measures a noise floor: seed() reads it); without GCOMP_METRICS, log()
does nothing. Any language can write the same lines; this module needs neither torch nor
libgcomp.
"""
import json
import os
import sys

__all__ = ["log", "enabled", "path", "seed", "close"]

_file = None
_path = None
_last_step = None


def path():
    """The metrics file of this run (GCOMP_METRICS), or None."""
    return os.environ.get("GCOMP_METRICS") or None


def seed(default=0):
    """The seed gcomp-converge asks for (GCOMP_SEED), else `default`."""
    text = os.environ.get("GCOMP_SEED", "")
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError("GCOMP_SEED=%r is not a whole number" % text) from None


def _rank():
    """This process's rank: torch.distributed's when it is running, else the launcher's."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    for name in ("RANK", "GCOMP_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
        text = os.environ.get(name, "")
        if text.lstrip("-").isdigit():
            return int(text)
    return 0


def enabled(rank=None):
    """True when log() writes here: GCOMP_METRICS is set and this is rank 0."""
    return path() is not None and (_rank() if rank is None else rank) == 0


def log(step, loss, rank=None, **more):
    """Writes one record {"step", "loss", **more} when enabled(rank); returns whether it did.

    Raises ValueError for a step that is not a whole number above the previous one, a loss
    that is not a number, or an accuracy outside [0, 100] (a fraction is not a percent)."""
    global _file, _path, _last_step
    p = path()
    if p is None or (_rank() if rank is None else rank) != 0:
        return False
    if isinstance(step, bool) or int(step) != step or step < 0:
        raise ValueError("gcomp.metrics.log: step %r is not a whole number >= 0" % (step,))
    step = int(step)
    if _last_step is not None and step <= _last_step and p == _path:
        raise ValueError("gcomp.metrics.log: step %d after step %d: steps must increase"
                         % (step, _last_step))
    loss = float(loss)   # a tensor's .item() or a number; NaN is a diverged run, kept
    acc = more.get("accuracy")
    if acc is not None and not (0 <= float(acc) <= 100):
        raise ValueError("gcomp.metrics.log: accuracy %r is not a percentage in [0, 100]" % (acc,))
    for key in ("step", "loss"):
        more.pop(key, None)
    if _file is None or p != _path:
        close()
        # appended: a run that resumes goes on in the same file
        _file = open(p, "a", encoding="utf-8")
        _path = p
    record = {"step": step, "loss": loss}
    for key, value in more.items():   # tensors and numpy scalars as plain numbers
        record[key] = value.item() if hasattr(value, "item") else value
    _file.write(json.dumps(record) + "\n")
    _file.flush()   # whole lines on disk as they come: a crashed run keeps its curve
    _last_step = step
    return True


def close():
    """Closes the file (log() opens it again when called)."""
    global _file, _path, _last_step
    if _file is not None:
        _file.close()
    _file, _path, _last_step = None, None, None
