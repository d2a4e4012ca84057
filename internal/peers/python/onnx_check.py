"""Runs onnx.checker.check_model(path, full_check=True) on an ONNX file.

Usage: /usr/bin/python3 onnx_check.py MODEL.onnx
The checker is given the path, not a loaded proto, so models over 2 GiB with
external data are checked too. Exit status 0 and "ok" on success; otherwise
the checker's message on stderr and exit status 1.
"""
import sys

import onnx
import onnx.checker


def main():
    if len(sys.argv) != 2:
        print("usage: onnx_check.py MODEL.onnx", file=sys.stderr)
        return 2
    try:
        onnx.checker.check_model(sys.argv[1], full_check=True)
    except Exception as e:  # the checker raises several exception types
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
