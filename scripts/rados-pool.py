#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""What the shared level's tests do to a live pool, as an attacker or an
accident would, over Ceph's own Python binding (python3-rados, with
ceph-common): one process per step rather than a rados CLI per object.

  rados-pool.py CONF corrupt      flip the last payload byte of every slice
                                  (the header left valid); print how many
  rados-pool.py CONF rm-slice     remove slice s0.c0 of the first column
                                  (start 0) of a column that has a record;
                                  print NS/SLICE and the record's name
  rados-pool.py CONF has NS/NAME  exit 0 if the object is there, 1 if not
  rados-pool.py CONF namespaces   the namespaces that hold slices, one a line
  rados-pool.py CONF unseal NS    every sealed slice of NS rewritten as a
                                  plain one that checks (version 1, its
                                  ciphertext as its bytes, both checksums
                                  made again: XXH3 is no secret); print how many
  rados-pool.py CONF versions NS  the slices of namespace NS by their format
                                  version ("plain=N sealed=M")
  rados-pool.py CONF backup NS F  every object of namespace NS (slices, records,
                                  its generation) copied into file F, as a
                                  backup of the pool keeps them; print how many
  rados-pool.py CONF restore F    every object of backup F written back over
                                  what the pool holds (the generation too);
                                  print how many

The pool is "kvss"; every op waits at most 30 s.
"""
import re
import struct
import sys

import ctypes
import json

import rados

SLICE = re.compile(r"[0-9a-f]{16}\.s\d+\.c\d+")


def open_pool(conf):
    c = rados.Rados(conffile=conf)
    c.conf_set("rados_osd_op_timeout", "30")
    c.connect(timeout=30)
    return c, c.open_ioctx("kvss")


def listing(io):
    io.set_namespace(rados.LIBRADOS_ALL_NSPACES)
    return sorted((o.nspace, o.key) for o in io.list_objects())


def corrupt(io):
    n = 0
    for ns, key in listing(io):
        if not SLICE.fullmatch(key):
            continue
        io.set_namespace(ns)
        b = bytearray(io.read(key, 1 << 26))
        b[-1] ^= 0x5a
        io.write_full(key, bytes(b))
        n += 1
    print(n)
    return 0


def rm_slice(io):
    objs = listing(io)
    recs = {(ns, k[:16]) for ns, k in objs if re.fullmatch(r"[0-9a-f]{16}\.r", k)}
    for ns, key in objs:
        if not re.fullmatch(r"[0-9a-f]{16}\.s0\.c0", key) or (ns, key[:16]) not in recs:
            continue
        io.set_namespace(ns)
        # The header's start (offset 76): a prompt's first column.
        if struct.unpack_from("<I", io.read(key, 128), 76)[0] != 0:
            continue
        io.remove_object(key)
        print(ns + "/" + key, key[:16] + ".r")
        return 0
    return 1


def has(io, what):
    ns, name = what.split("/", 1)
    io.set_namespace(ns)
    try:
        io.stat(name)
        return 0
    except rados.ObjectNotFound:
        return 1


def xxh3(b, seed):
    x = ctypes.CDLL("libxxhash.so.0")
    x.XXH3_64bits_withSeed.restype = ctypes.c_uint64
    x.XXH3_64bits_withSeed.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]
    return x.XXH3_64bits_withSeed(bytes(b), len(b), seed)


def unseal(io, ns):
    n = 0
    io.set_namespace(ns)
    for o in list(io.list_objects()):
        if not SLICE.fullmatch(o.key):
            continue
        b = bytearray(io.read(o.key, 1 << 26))
        if struct.unpack_from("<H", b, 4)[0] != 2:
            continue
        payload = bytes(b[128:-16])
        h = bytearray(b[:128])
        struct.pack_into("<H", h, 4, 1)
        struct.pack_into("<I", h, 88, len(payload))
        h[92:96] = bytes(4)
        h[104:120] = bytes(16)
        oid = struct.unpack_from("<Q", h, 32)[0]
        struct.pack_into("<Q", h, 96, xxh3(payload, oid))
        struct.pack_into("<Q", h, 120, xxh3(h[:120], 0x6b7673732d6f626a))
        io.write_full(o.key, bytes(h) + payload)
        n += 1
    print(n)
    return 0


def namespaces(io):
    for ns in sorted({ns for ns, key in listing(io) if SLICE.fullmatch(key)}):
        print(ns)
    return 0


def versions(io, ns):
    n = {1: 0, 2: 0}
    io.set_namespace(ns)
    for o in io.list_objects():
        if SLICE.fullmatch(o.key):
            v = struct.unpack_from("<H", io.read(o.key, 8), 4)[0]
            n[v] = n.get(v, 0) + 1
    print(f"plain={n[1]} sealed={n[2]}")
    return 0


def backup(io, ns, path):
    io.set_namespace(ns)
    objs = {o.key: io.read(o.key, 1 << 26).hex() for o in list(io.list_objects())}
    with open(path, "w") as f:
        json.dump({"ns": ns, "objects": objs}, f)
    print(len(objs))
    return 0


def restore(io, path):
    with open(path) as f:
        b = json.load(f)
    io.set_namespace(b["ns"])
    for key, data in b["objects"].items():
        io.write_full(key, bytes.fromhex(data))
    print(len(b["objects"]))
    return 0


def main(argv):
    two = ("backup",)
    one = ("has", "versions", "unseal", "restore")
    if len(argv) < 3 or argv[2] not in ("corrupt", "rm-slice", "has", "versions", "namespaces", "unseal",
                                        "backup", "restore") or \
            len(argv) != 3 + (argv[2] in one) + 2 * (argv[2] in two):
        print(__doc__, file=sys.stderr)
        return 2
    c, io = open_pool(argv[1])
    try:
        if argv[2] == "corrupt":
            return corrupt(io)
        if argv[2] == "rm-slice":
            return rm_slice(io)
        if argv[2] == "namespaces":
            return namespaces(io)
        if argv[2] == "unseal":
            return unseal(io, argv[3])
        if argv[2] == "versions":
            return versions(io, argv[3])
        if argv[2] == "backup":
            return backup(io, argv[3], argv[4])
        if argv[2] == "restore":
            return restore(io, argv[3])
        return has(io, argv[3])
    finally:
        io.close()
        c.shutdown()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
