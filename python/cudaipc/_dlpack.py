# SPDX-License-Identifier: LGPL-2.1-or-later
"""DLPack export in pure Python: a DLManagedTensor in ctypes memory, handed over in a PyCapsule.

Ownership: every export is an entry of `_exports`, keyed by the DLManagedTensor's address; the
entry holds the struct, its shape and strides arrays, and the object whose memory it describes
(which keeps the Frame, and so the producer's slot, claimed). Dropping the entry is the only
thing either callback does:

- the DLManagedTensor's deleter, which the consumer (torch, CuPy, NumPy) calls when its tensor
  is freed, from any thread, with or without the GIL (ctypes takes it);
- the capsule's destructor, when a capsule nobody consumed is freed (a consumer renames the
  capsule "used_dltensor" when it takes ownership; then the destructor leaves the entry alone).

Both are ctypes callbacks, and CPython may free a capsule or a tensor while an exception is
being raised (C code that sets an error, then drops its references). A callback entered like that
cannot restore the exception (ctypes reports whatever the callback leaves behind as "Exception
ignored" and clears it), and every ctypes call it makes would fail on the pending exception. So
each callback first takes the pending exception off (a Python C-API call through ctypes raises
it as a Python exception, which we catch), does its work, and raises it again, so that it is
reported rather than lost silently. The caller then sees a SystemError in place of its own
exception: unavoidable without compiled code, and only on paths that already failed. The slot is
released in any case.
"""

import ctypes
import sys

# DLDeviceType
KDL_CPU = 1
KDL_CUDA = 2
# DLDataTypeCode
KDL_UINT = 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),  # in elements
        ("byte_offset", ctypes.c_uint64),
    ]


# void (*deleter)(DLManagedTensor*): the pointer arrives as a plain address.
_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", _Deleter),
    ]


# void (*PyCapsule_Destructor)(PyObject*): a raw pointer, never a Python reference (the capsule
# is being freed; taking a reference to it would resurrect it).
_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CapsuleDestructor]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
# A ctypes call into the Python C API raises the exception that is pending, if one is.
_err_occurred = ctypes.pythonapi.PyErr_Occurred
_err_occurred.restype = ctypes.c_void_p
_err_occurred.argtypes = []

# The capsule keeps a pointer to its name: this buffer lives as long as the module (and the
# callbacks, which refer to it).
_CAPSULE_NAME = ctypes.create_string_buffer(b"dltensor")

# address of a DLManagedTensor -> (struct, shape, strides, owner)
_exports = {}


def _take_pending_exception(probe=_err_occurred):
    try:
        probe()
    except BaseException as pending:  # noqa: B902 - whatever was pending, KeyboardInterrupt too
        return pending
    return None


def _on_deleter(address, _drop=_exports.pop, _take=_take_pending_exception):
    pending = _take()
    _drop(address, None)
    if pending is not None:
        raise pending  # reported by ctypes as "Exception ignored"; see the module comment


def _on_capsule_destroyed(capsule, _drop=_exports.pop, _take=_take_pending_exception,
                          _is_valid=_capsule_is_valid, _get=_capsule_get_pointer,
                          _name=_CAPSULE_NAME):
    pending = _take()
    if _is_valid(capsule, _name):  # still "dltensor": never consumed
        _drop(_get(capsule, _name), None)
    if pending is not None:
        raise pending


# Module-level: the C function pointers must outlive every struct and capsule that holds them.
_DELETER = _Deleter(_on_deleter)
_CAPSULE_DESTRUCTOR = _CapsuleDestructor(_on_capsule_destroyed)


def data_type(typestr):
    """The DLDataType of an __array_interface__ typestr, or raises BufferError."""
    byteorder = typestr[0]
    if typestr[1] != "u" or (byteorder not in "|=" and
                             byteorder != ("<" if sys.byteorder == "little" else ">")):
        raise BufferError(f"DLPack cannot describe elements of type {typestr!r} "
                          f"(only unsigned integers in this machine's byte order)")
    return DLDataType(KDL_UINT, 8 * int(typestr[2:]), 1)


def export(owner, data_ptr, device_type, device_id, shape, strides_bytes, typestr):
    """A "dltensor" capsule describing `shape` at `data_ptr`, keeping `owner` alive until the
    consumer's tensor is freed (or the capsule, if nobody consumes it)."""
    dtype = data_type(typestr)
    itemsize = dtype.bits // 8
    if any(stride % itemsize for stride in strides_bytes):
        raise BufferError(f"rows of {strides_bytes[0]} bytes are not a whole number of "
                          f"{itemsize}-byte elements, which DLPack strides cannot express")
    ndim = len(shape)
    shape_array = (ctypes.c_int64 * ndim)(*shape)
    strides_array = (ctypes.c_int64 * ndim)(*(stride // itemsize for stride in strides_bytes))
    managed = DLManagedTensor()
    tensor = managed.dl_tensor  # a view into `managed`
    # The pointer itself, byte_offset 0: torch ignores byte_offset.
    tensor.data = data_ptr
    tensor.device = DLDevice(device_type, device_id)
    tensor.ndim = ndim
    tensor.dtype = dtype
    tensor.shape = ctypes.cast(shape_array, ctypes.POINTER(ctypes.c_int64))
    tensor.strides = ctypes.cast(strides_array, ctypes.POINTER(ctypes.c_int64))
    tensor.byte_offset = 0
    managed.manager_ctx = None
    managed.deleter = _DELETER
    address = ctypes.addressof(managed)
    _exports[address] = (managed, shape_array, strides_array, owner)
    try:
        return _capsule_new(address, _CAPSULE_NAME, _CAPSULE_DESTRUCTOR)
    except BaseException:
        _exports.pop(address, None)
        raise


def live_exports():
    """How many exports are held (by consumers' tensors or unconsumed capsules); for tests."""
    return len(_exports)
