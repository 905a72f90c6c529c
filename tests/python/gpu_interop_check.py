#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The CUDA paths of the cudaipc module, on a GPU machine (not a CI test): what CI cannot run.

    gpu_interop_check.py --socket PATH

Reads frames of `cudaipc-cuda-peer produce` (BGRA in CUDA memory, each frame filled with
cuda/test_pattern.h's pattern, seeded with its frame number, which is also its offset) and
checks, each on its own frame:

- torch.from_dlpack(frame): a cuda tensor of shape (H, W, 4) at frame.data_ptr, whose bytes are
  the pattern the producer wrote;
- cupy.asarray(frame) (__cuda_array_interface__) and cupy.from_dlpack(frame): the same memory;
- the slot comes back when the last tensor or array goes, and not before;
- a tensor taken on a torch side stream (non-blocking) with frame.release(stream=...);
- numpy.asarray(frame) refuses GPU memory; a released frame refuses every interface.

Prints one line per check and `PASS n/n` or `FAIL ...`; exit status 0 only when all passed.
"""

import argparse
import sys

import cupy
import numpy
import torch

import cudaipc

results = []


def check(name, condition, detail=""):
    results.append(bool(condition))
    print(f"{'ok  ' if condition else 'FAIL'} {name}{': ' + str(detail) if detail else ''}",
          flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--socket", required=True)
    args = parser.parse_args()

    def verify(label, seed, image):
        """The bytes are cuda/test_pattern.h's fill pattern for `seed`, in uint32 arithmetic."""
        rows = image.reshape(image.shape[0], -1)
        mask = 0xFFFFFFFF
        c = torch.arange(rows.shape[1], dtype=torch.int64, device=rows.device)
        r = torch.arange(rows.shape[0], dtype=torch.int64, device=rows.device)[:, None]
        value = ((c * 2654435761) & mask) ^ ((r * 40503) & mask) ^ ((seed * 2246822519) & mask)
        pattern = ((value >> 13) & 0xFF).to(torch.uint8)
        check(f"{label}: the producer's bytes for frame {seed}", torch.equal(rows, pattern))

    with cudaipc.Reader(args.socket, memory="cuda", max_in_flight=6) as reader:
        held = lambda: reader.stats["frames_held"]  # noqa: E731

        frame = reader.next(10000)
        check("a CUDA frame", frame is not None and frame.memory == "cuda", frame)
        tensor = torch.from_dlpack(frame)
        check("torch.from_dlpack: in place", tensor.is_cuda and
              tensor.data_ptr() == frame.data_ptr and
              tuple(tensor.shape) == (frame.height, frame.width, 4) and
              tensor.stride(0) == frame.planes[0].stride,
              (tensor.device, tuple(tensor.shape), tensor.stride()))
        verify("torch", frame.offset, tensor)
        del frame
        check("the tensor holds the frame", held() == 1, held())
        del tensor
        check("freeing the tensor releases it", held() == 0, held())

        frame = reader.next(10000)
        array = cupy.asarray(frame)
        check("cupy.asarray (__cuda_array_interface__): in place",
              array.data.ptr == frame.data_ptr and array.shape == (frame.height, frame.width, 4),
              (array.data.ptr, array.shape, array.strides))
        verify("cupy", frame.offset, torch.from_dlpack(array))
        from_dlpack = cupy.from_dlpack(frame)
        check("cupy.from_dlpack: in place", from_dlpack.data.ptr == frame.data_ptr)
        offset = frame.offset
        del frame
        del array
        check("one array left holds the frame", held() == 1, held())
        del from_dlpack
        torch.cuda.synchronize()
        check("freeing the arrays releases it", held() == 0, f"{held()} (frame {offset})")

        side = torch.cuda.Stream()  # non-blocking: the default release would not cover it
        frame = reader.next(10000)
        with torch.cuda.stream(side):
            tensor = torch.from_dlpack(frame)  # waits for the producer on `side`
            total = tensor.to(torch.int64).sum()
        frame.release(stream=side)
        del tensor
        check("release(stream=torch side stream)", held() == 0 and frame.released, held())
        side.synchronize()
        check("side-stream sum", int(total) > 0, int(total))

        frame = reader.next(10000)
        for label, use in (("numpy.asarray", numpy.asarray),
                           ("__array_interface__", lambda f: f.__array_interface__)):
            try:
                use(frame)
                check(f"{label} refuses GPU memory", False)
            except (TypeError, AttributeError) as e:
                check(f"{label} refuses GPU memory", True, e)
        check("__dlpack_device__", frame.__dlpack_device__() == (2, frame.device),
              frame.__dlpack_device__())
        frame.release()
        for label, use in (("__cuda_array_interface__", lambda f: f.__cuda_array_interface__),
                           ("__dlpack__", lambda f: f.__dlpack__())):
            try:
                use(frame)
                check(f"a released frame refuses {label}", False)
            except ValueError:
                check(f"a released frame refuses {label}", True)
        check("nothing held at the end", held() == 0, reader.stats)

    failed = results.count(False)
    print(f"PASS {len(results)}/{len(results)}" if not failed else
          f"FAIL {failed} of {len(results)} checks")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
