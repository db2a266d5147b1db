#!/usr/bin/env python3
"""Generates the walk benchmark's tree: FILES small files spread over
TOP x MID x LEAF directories (default 200,000 files in 21,621 directories
counting the root), every file 0-2047 bytes. Deterministic."""
import os
import sys

def main():
    root = sys.argv[1]
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 200_000
    top, mid, leaf = 20, 40, 26
    leaves = []
    for t in range(top):
        for m in range(mid):
            for l in range(leaf):
                d = os.path.join(root, f"t{t:02}", f"m{m:02}", f"l{l:02}")
                os.makedirs(d, exist_ok=True)
                leaves.append(d)
    payload = bytes(range(256)) * 8
    for i in range(files):
        d = leaves[(i * 7919) % len(leaves)]
        with open(os.path.join(d, f"f{i:06}.dat"), "wb") as f:
            f.write(payload[: (i * 37) % 2048])

if __name__ == "__main__":
    main()
