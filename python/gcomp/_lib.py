"""Loads libgcomp and declares the C prototypes the package calls (include/gcomp.h).

Where the library comes from, in order: $GCOMP_LIBRARY (a path); the path CMake wrote into
_paths.py beside this file (the build tree's library, or for an installed package the
library installed beside it, relative to this directory, so the prefix can move); else the
dynamic loader's search path. Nothing is compiled at install time.
"""
import ctypes
import os

c_int, c_size_t, c_double, c_uint64, c_void_p, c_char_p = (
    ctypes.c_int, ctypes.c_size_t, ctypes.c_double, ctypes.c_uint64, ctypes.c_void_p,
    ctypes.c_char_p)
P = ctypes.POINTER

# int (*gcomp_allgather_fn)(void *ctx, const void *mine, size_t len, void *all)
ALLGATHER_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t, c_void_p)


class CommStats(ctypes.Structure):
    """gcomp_comm_stats: sized (struct_size first); the library fills what fits."""
    _fields_ = [("struct_size", c_size_t), ("calls", c_uint64), ("bytes", c_uint64),
                ("wire_bytes", c_uint64), ("total_s", c_double), ("wait_s", c_double),
                ("reduce_s", c_double), ("encode_s", c_double), ("decode_s", c_double),
                ("nonfinite", c_uint64), ("shm_bytes", c_uint64)]


class CodecStats(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("frames_encoded", c_uint64),
                ("elements_encoded", c_uint64), ("bytes_in", c_uint64), ("bytes_out", c_uint64),
                ("nonfinite_inputs", c_uint64), ("overflows", c_uint64),
                ("underflows", c_uint64)]


class ParamInfo(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("type", c_char_p), ("value", c_char_p),
                ("dflt", c_char_p), ("help", c_char_p), ("is_set", c_int)]


# name: (restype, argtypes)
_PROTOS = {
    "gcomp_strerror": (c_char_p, [c_int]),
    "gcomp_last_error": (c_char_p, []),
    "gcomp_version": (c_char_p, []),
    "gcomp_init": (c_int, []),
    "gcomp_param_count": (c_int, []),
    "gcomp_param_describe": (c_int, [c_int, P(ParamInfo)]),
    "gcomp_codec_create": (c_int, [c_char_p, P(c_void_p)]),
    "gcomp_codec_destroy": (None, [c_void_p]),
    "gcomp_codec_spec": (c_size_t, [c_void_p, c_char_p, c_size_t]),
    "gcomp_codec_get_stats": (c_int, [c_void_p, c_void_p]),
    "gcomp_codec_save_residuals": (c_int, [c_void_p, c_char_p]),
    "gcomp_codec_load_residuals": (c_int, [c_void_p, c_char_p]),
    "gcomp_codec_reset_residuals": (c_int, [c_void_p]),
    "gcomp_config_create": (c_int, [P(c_void_p)]),
    "gcomp_config_set": (c_int, [c_void_p, c_char_p, c_char_p]),
    "gcomp_config_destroy": (None, [c_void_p]),
    "gcomp_comm_init_env": (c_int, [P(c_void_p)]),
    "gcomp_comm_init_oob": (c_int, [c_int, c_int, c_char_p, ALLGATHER_FN, c_void_p, c_void_p,
                                    P(c_void_p)]),
    "gcomp_comm_rank": (c_int, [c_void_p]),
    "gcomp_comm_size": (c_int, [c_void_p]),
    "gcomp_comm_node": (c_int, [c_void_p]),
    "gcomp_comm_nnodes": (c_int, [c_void_p]),
    "gcomp_comm_destroy": (c_int, [c_void_p]),
    "gcomp_comm_abort": (c_int, [c_void_p]),
    "gcomp_comm_get_stats": (c_int, [c_void_p, c_void_p]),
    "gcomp_allreduce": (c_int, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p,
                                c_uint64]),
    "gcomp_iallreduce": (c_int, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p,
                                 c_uint64, P(c_void_p)]),
    "gcomp_ireduce_scatter": (c_int, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_int,
                                      c_void_p, c_uint64, P(c_void_p)]),
    "gcomp_iallgather": (c_int, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_void_p,
                                 c_uint64, P(c_void_p)]),
    "gcomp_ibroadcast": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int, P(c_void_p)]),
    "gcomp_ibarrier": (c_int, [c_void_p, P(c_void_p)]),
    "gcomp_ialltoall": (c_int, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, P(c_void_p)]),
    "gcomp_request_wait": (c_int, [c_void_p]),
    "gcomp_request_test": (c_int, [c_void_p, P(c_int)]),
}


def _candidates():
    env = os.environ.get("GCOMP_LIBRARY")
    if env:
        return [env], "GCOMP_LIBRARY"
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from . import _paths   # written by CMake (build tree or install)
        lib = _paths.LIBRARY
        return [lib if os.path.isabs(lib) else os.path.normpath(os.path.join(here, lib))], \
            "the path CMake recorded in " + os.path.join(here, "_paths.py")
    except ImportError:
        return ["libgcomp.so.0", "libgcomp.so"], "the dynamic loader's search path"


def load():
    """Returns the loaded library with its prototypes set. Raises OSError saying where it
    looked when the library cannot be loaded or lacks a function this package needs."""
    names, where = _candidates()
    errors = []
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError as e:
            errors.append(str(e))
    else:
        raise OSError("gcomp: cannot load libgcomp (looked at %s, from %s): %s; set GCOMP_LIBRARY "
                      "to the library's path" % (", ".join(names), where, "; ".join(errors)))
    missing = [n for n in _PROTOS if not hasattr(lib, n)]
    if missing:
        raise OSError("gcomp: %s lacks %s (a libgcomp older than this package?)"
                      % (lib._name, ", ".join(missing)))
    for n, (res, args) in _PROTOS.items():
        f = getattr(lib, n)
        f.restype, f.argtypes = res, args
    return lib
