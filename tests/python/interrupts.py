# SPDX-License-Identifier: LGPL-2.1-or-later
"""Ctrl-C's KeyboardInterrupt, injected where a real one can land, for the module's tests."""

import contextlib
import linecache
import sys


@contextlib.contextmanager
def interrupt_in_finalizer(line):
    """Raises KeyboardInterrupt at line event `line` of a __del__ that runs inside the block -
    except at the line that hands a pointer over (`...(taken...)`): a signal lands at a
    function's start and after calls, never between taking the pointer and that call, while a
    trace function could raise anywhere. Yields [n]: n is the line events __del__ ran."""
    events = [0]

    def local(frame, event, arg):
        if event == "line":
            if "(taken" in linecache.getline(frame.f_code.co_filename, frame.f_lineno):
                return local
            events[0] += 1
            if events[0] == line:
                raise KeyboardInterrupt(f"injected at line event {line} of __del__")
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_name == "__del__" else None

    sys.settrace(tracer)
    try:
        yield events
    finally:
        sys.settrace(None)
