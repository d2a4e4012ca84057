"""Runs the checks of onnx.checker.check_model(path, full_check=True) on an ONNX file
without modifying it.

Usage: /usr/bin/python3 onnx_check.py MODEL.onnx
The checker is given the path, not a loaded proto, so models over 2 GiB with
external data are checked too. Exit status 0 and "ok" on success; otherwise
the checker's message on stderr and exit status 1.
"""
import os
import sys
import tempfile

import onnx
import onnx.checker
import onnx.shape_inference


def main():
    if len(sys.argv) != 2:
        print("usage: onnx_check.py MODEL.onnx", file=sys.stderr)
        return 2
    try:
        # check_model(path, full_check=True) in onnx 1.12 writes the
        # shape-inferred model back over the file it checks. Do the same two
        # checks, but send the inferred model to a scratch file.
        onnx.checker.check_model(sys.argv[1], full_check=False)
        with tempfile.TemporaryDirectory() as tmp:
            onnx.shape_inference.infer_shapes_path(
                sys.argv[1], os.path.join(tmp, "inferred.onnx"), check_type=True, strict_mode=True)
    except Exception as e:  # the checker raises several exception types
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
