# SPDX-License-Identifier: LGPL-2.1-or-later
"""How each video format's planes look as arrays: shapes, element types and strides.

A plane's array covers its visible pixels only: rows of the plane's height, each the plane's
visible bytes (the stride's padding and other planes are not part of it).
"""

import collections

# One plane: log2 of the horizontal and vertical chroma subsampling, values per pixel (1: a
# 2-D array (rows, columns); more: a 3-D array (rows, columns, values)) and the element type
# (an __array_interface__ typestr).
_Plane = collections.namedtuple("_Plane", "x_shift y_shift values typestr")

_U8 = "|u1"
_U16 = "<u2"


def _packed(values, typestr=_U8):
    return (_Plane(0, 0, values, typestr),)


def _planes(*planes, typestr=_U8):
    return tuple(_Plane(x, y, values, typestr) for x, y, values in planes)


# Formats whose frame is itself an array of pixels: one plane.
PACKED_FORMATS = {
    **{name: _packed(4) for name in
       ("BGRA", "BGRx", "RGBA", "RGBx", "ARGB", "ABGR", "xRGB", "xBGR", "AYUV")},
    "RGB": _packed(3),
    "BGR": _packed(3),
    "GRAY8": _packed(1),
    "GRAY16_LE": _packed(1, _U16),
    "GRAY16_BE": _packed(1, ">u2"),
}

# Formats with several planes: each is an array of its own (frame.planes[i]).
PLANAR_FORMATS = {
    # 4:2:0 with interleaved chroma: a (H/2, W/2, 2) plane of UV (NV21: VU) pairs
    "NV12": _planes((0, 0, 1), (1, 1, 2)),
    "NV21": _planes((0, 0, 1), (1, 1, 2)),
    "NV16": _planes((0, 0, 1), (1, 0, 2)),
    "NV61": _planes((0, 0, 1), (1, 0, 2)),
    "NV24": _planes((0, 0, 1), (0, 0, 2)),
    "P010_10LE": _planes((0, 0, 1), (1, 1, 2), typestr=_U16),
    "P012_LE": _planes((0, 0, 1), (1, 1, 2), typestr=_U16),
    "P016_LE": _planes((0, 0, 1), (1, 1, 2), typestr=_U16),
    # three planes
    "I420": _planes((0, 0, 1), (1, 1, 1), (1, 1, 1)),
    "YV12": _planes((0, 0, 1), (1, 1, 1), (1, 1, 1)),
    "I420_10LE": _planes((0, 0, 1), (1, 1, 1), (1, 1, 1), typestr=_U16),
    "Y42B": _planes((0, 0, 1), (1, 0, 1), (1, 0, 1)),
    "Y444": _planes((0, 0, 1), (0, 0, 1), (0, 0, 1)),
    "RGBP": _planes((0, 0, 1), (0, 0, 1), (0, 0, 1)),
    "BGRP": _planes((0, 0, 1), (0, 0, 1), (0, 0, 1)),
    "GBR": _planes((0, 0, 1), (0, 0, 1), (0, 0, 1)),
}

# One plane of one frame as an array. `offset` is from the frame's first byte; `strides` are
# in bytes, as __array_interface__ and __cuda_array_interface__ want them.
PlaneLayout = collections.namedtuple(
    "PlaneLayout", "index offset stride shape typestr itemsize strides row_bytes")


def _scaled(size, shift):
    return -((-size) >> shift)  # rounded up, as GStreamer's GST_VIDEO_SUB_SCALE


def plane_layouts(info):
    """The array layout of each plane of a frame, or a sentence saying why there is none.

    `info` has format, width, height, size, n_planes, plane_offset and plane_stride.
    Returns (layouts, None) or (None, why).
    """
    planes = PACKED_FORMATS.get(info.format) or PLANAR_FORMATS.get(info.format)
    if planes is None:
        return None, (f"cudaipc does not know the pixel layout of {info.format}; its planes are "
                      f"at frame.planes[i].data_ptr, .stride bytes per row")
    if info.n_planes != len(planes):
        return None, (f"a {info.format} frame should have {len(planes)} planes, this one has "
                      f"{info.n_planes}")
    layouts = []
    for index, plane in enumerate(planes):
        itemsize = int(plane.typestr[2:])
        rows = _scaled(info.height, plane.y_shift)
        columns = _scaled(info.width, plane.x_shift)
        row_bytes = columns * plane.values * itemsize
        stride = info.plane_stride[index]
        offset = info.plane_offset[index]
        if stride < row_bytes:
            return None, (f"plane {index} of a {info.width}x{info.height} {info.format} frame "
                          f"has rows of {stride} bytes, shorter than its {row_bytes} visible bytes")
        if offset + (rows - 1) * stride + row_bytes > info.size:
            return None, (f"plane {index} of a {info.width}x{info.height} {info.format} frame "
                          f"ends past the frame's {info.size} bytes")
        if plane.values == 1:
            shape, strides = (rows, columns), (stride, itemsize)
        else:
            shape = (rows, columns, plane.values)
            strides = (stride, plane.values * itemsize, itemsize)
        layouts.append(PlaneLayout(index, offset, stride, shape, plane.typestr, itemsize, strides,
                                   row_bytes))
    return tuple(layouts), None


def is_packed(format_name):
    return format_name in PACKED_FORMATS
