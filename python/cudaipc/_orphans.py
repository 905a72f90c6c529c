# SPDX-License-Identifier: LGPL-2.1-or-later
"""What a finalizer cut short by Ctrl-C left behind: frames and slots given back later.

A frame's or slot's handle gives its pointer back to the library in __del__. But __del__ is
Python code, and CPython raises a pending KeyboardInterrupt at its first instruction or after
any call in it - and then ignores it ("Exception ignored in ... __del__"). A handle dropped
just as Ctrl-C comes can therefore die still holding its pointer: a slot lost to the writer
for good, a frame the reader never releases. So each owner (a Writer, a Reader) keeps every
handle's pointer box, and gives back, at its next call, what a dead handle left in its box.
"""

import threading
import weakref


class Orphans:
    """The pointer boxes (ctypes.c_void_p) of an owner's live handles. `give_back(pointer,
    *args)`, a library function (not Python code, whose first instruction a KeyboardInterrupt
    could cut short), returns one pointer to the library."""

    def __init__(self, give_back, *args):
        self._give_back = give_back
        self._args = args
        self._boxes = {}  # id(box) -> (weak reference to the handle, box)
        self._lock = threading.Lock()

    def track(self, handle):
        """From now on, what `handle` leaves in `handle.pointer` when it dies is given back."""
        with self._lock:
            self._boxes[id(handle.pointer)] = (weakref.ref(handle), handle.pointer)

    def sweep(self):
        """Gives back the pointers of handles that died holding one; forgets dead handles."""
        with self._lock:
            dead = [key for key, (ref, _) in self._boxes.items() if ref() is None]
        for key in dead:
            box = self._boxes[key][1]
            # Taken and handed over with no call in between (a KeyboardInterrupt lands at calls),
            # and forgotten only after: an interrupted sweep leaves the box to the next one.
            taken, box.value = box.value, None
            if taken:
                self._give_back(taken, *self._args)
            with self._lock:
                self._boxes.pop(key, None)
