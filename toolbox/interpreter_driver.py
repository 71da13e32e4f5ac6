# The sandplane toolbox's interpreter worker: one long-lived python process
# per interpreter context, whose globals persist from one run to the next.
#
# Requests arrive on fd 4, one JSON object per line: {"code": ..., "envs": {...}}.
# Messages go out on fd 3, one JSON object per line:
#   {"type": "error", "name", "value", "traceback"} an exception it raised
#   {"type": "done"}                            the run is over
# Output goes to file descriptors 1 and 2, what the code prints as well as
# what subprocesses and C code write there, so that each stream reaches the
# toolbox through one pipe, in the order it was written. Before "done", the
# worker writes the marker from SANDPLANE_INTERPRETER_MARKER on both, so that
# the toolbox knows it has all of a run's output.
import io
import json
import linecache
import os
import sys
import traceback

_marker = os.environ.pop("SANDPLANE_INTERPRETER_MARKER").encode()
_ctl = os.fdopen(3, "w", encoding="utf-8", errors="replace")
_requests = os.fdopen(4, "r", encoding="utf-8")


def _send(msg):
    _ctl.write(json.dumps(msg) + "\n")
    _ctl.flush()


class _Stream(io.TextIOBase):
    """A text stream written straight through to a file descriptor, so that
    it interleaves with what child processes write there."""

    def __init__(self, fd):
        self._fd = fd

    @property
    def encoding(self):
        return "utf-8"

    def writable(self):
        return True

    def isatty(self):
        return False

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not " + type(s).__name__)
        data = s.encode("utf-8", "replace")
        while data:
            data = data[os.write(self._fd, data):]
        return len(s)


def _user_traceback(exc):
    """The traceback without the worker's own frame."""
    if isinstance(exc, SyntaxError):
        return "".join(traceback.format_exception_only(type(exc), exc))
    tb = exc.__traceback__
    if tb is not None and tb.tb_frame.f_code.co_filename == _WORKER_FILE:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


_cells = 0


def _run(request, scope):
    global _cells
    _cells += 1
    name = "<cell-%d>" % _cells
    code = request["code"]
    # Tracebacks quote the cell's lines, as they would a file's.
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    envs = request.get("envs") or {}
    saved = {k: os.environ.get(k) for k in envs}
    os.environ.update(envs)
    try:
        exec(compile(code, name, "exec"), scope)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the worker lives on
        _send({
            "type": "error",
            "name": type(exc).__name__,
            "value": str(exc),
            "traceback": _user_traceback(exc),
        })
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _finish():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass
    os.write(1, _marker)
    os.write(2, _marker)
    _send({"type": "done"})


def main():
    sys.stdout = _Stream(1)
    sys.stderr = _Stream(2)
    scope = {"__name__": "__main__", "__builtins__": __builtins__}
    while True:
        line = ""
        try:
            line = _requests.readline()
            if not line:
                return
            _run(json.loads(line), scope)
        except KeyboardInterrupt:
            # An interrupt that missed the code it was meant for.
            pass
        finally:
            if line:
                try:
                    _finish()
                except KeyboardInterrupt:
                    _finish()


_WORKER_FILE = _user_traceback.__code__.co_filename
main()
