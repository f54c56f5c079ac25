#!/usr/bin/env python3
"""Writes the pickle and JSON fixtures of diag/hang/tests (run from this folder; the tests only read
the files, they never need Python).

- nested_p{0..5}.pkl: one nested value pickled by Python's pickle at each protocol, and
  nested.json: what dsdiag must read from each (tuples and sets as lists, keys as text).
- fr_2.2.pkl, fr_2.4.pkl: Flight Recorder dumps of rank 1 as Python's pickle writes them (protocol 2).
- fr_2.9.pkl, fr_2.10.pkl: the same as torch's C++ pickler writes them (torch/csrc/jit/serialization/
  pickler.cpp with tag_aggregates=false): strings memoized by value, a dict shared between entries
  (the frames) memoized after it is complete, and one MARK ... APPENDS around all entries.
- fr_2.10.json: the JSON form (_dump_fr_trace_json), which has no frames.
"""
import json
import pickle
import struct

NESTED = {
    "text": "plain",
    "unicode": "é€\n\\ 😀",
    "ints": [0, 1, 255, 256, 65535, 65536, -1, 2**31 - 1, -2**31, 2**40, -2**63, 2**63 - 1, 2**63, 2**64 - 1],
    "floats": [0.5, -2.25, 1e300],
    "none": None,
    "flags": [True, False],
    "tuple": (1, "two", (3.0, None)),
    "empty": [[], {}, ()],
    "deep": {"a": {"b": {"c": [[[1]]]}}},
    7: "int key",
    "long_list": list(range(1500)),  # more than one APPENDS batch (Python batches 1000)
}
SHARED = {"s": [1, 2]}
NESTED["shared"] = [SHARED, SHARED]  # memo: BINPUT once, BINGET later


def expected(v):
    if isinstance(v, dict):
        return {str(k): expected(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [expected(x) for x in v]
    return v


def frames(i):
    return [{"name": "all_reduce", "filename": "torch/distributed/c10d.py", "line": 2500 + i % 2},
            {"name": "train_step", "filename": "train.py", "line": 42}]


def fr_dump(version):
    """Rank 1 of 4, on the default group "0" and a subgroup "1" of ranks 0 and 1."""
    entries = []
    ops = [("nccl:all_reduce", "0", 5, 0, "completed"), ("nccl:all_reduce", "0", 6, 0, "started"),
           ("nccl:send 1->0", "1", 0, 1, "completed"), ("nccl:recv 1<-0", "1", 0, 2, "scheduled"),
           ("nccl:all_reduce", "0", 7, 0, "scheduled")]
    for i, (name, pg, seq, p2p, state) in enumerate(ops):
        e = {
            "record_id": 10 + i, "pg_id": int(pg),
            "process_group": (pg, "default_pg" if pg == "0" else "sub"),
            "collective_seq_id": seq, "p2p_seq_id": p2p, "op_id": 20 + i, "profiling_name": name,
            "time_created_ns": 1_700_000_000_000_000_000 + i, "input_sizes": [[1024, 4]],
            "input_dtypes": ["Float"], "output_sizes": [[1024, 4]], "output_dtypes": ["Float"],
            "state": state, "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
            "retired": state == "completed", "timeout_ms": 600000, "is_p2p": p2p != 0,
            "frames": frames(i),
        }
        if state == "completed":
            e["duration_ms"] = 1.25
        if version in ("2.9", "2.10"):
            e["thread_id"] = 140000000000 + i
            e["thread_name"] = "pt_main_thread"
        entries.append(e)
    d = {"version": version, "entries": entries,
         "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"},
                       "1": {"name": "1", "desc": "sub", "ranks": "[0,1]"}}}
    if version != "2.2":
        d["pg_status"] = {"0": {"last_enqueued_collective": 7, "last_started_collective": 6,
                                "last_completed_collective": 5},
                          "1": {"last_enqueued_collective": 0, "last_started_collective": -1,
                                "last_completed_collective": -1}}
    if version in ("2.4", "2.9"):
        d["nccl_version"] = "2.21.5"
    if version == "2.10":
        d["comm_lib_version"] = "2.27.3"
        d["nccl_comm_state"] = {"0": {"commId": "abc"}}
    return d


class TorchPickler:
    """torch's C++ Pickler for plain data (pickler.cpp, tag_aggregates=false)."""

    def __init__(self, shared=()):
        self.out = bytearray(b"\x80\x02")
        self.memo_id = 0
        self.strings = {}  # strings are memoized by value
        self.shared = {id(s) for s in shared}  # values held twice (use_count > 1): memoized by pointer
        self.written = {}

    def put(self):
        self.out += b"q" + bytes([self.memo_id]) if self.memo_id < 256 else b"r" + struct.pack("<I", self.memo_id)
        self.memo_id += 1
        return self.memo_id - 1

    def get(self, i):
        self.out += b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i)

    def push(self, v):
        if id(v) in self.written:
            self.get(self.written[id(v)])
            return
        self.push_impl(v)
        if id(v) in self.shared:  # memoized once complete, as pushIValue does
            self.written[id(v)] = self.put()

    def push_impl(self, v):
        if isinstance(v, bool):
            self.out += b"\x88" if v else b"\x89"
        elif v is None:
            self.out += b"N"
        elif isinstance(v, int):
            if 0 <= v < 256:
                self.out += b"K" + bytes([v])
            elif 0 <= v < 65536:
                self.out += b"M" + struct.pack("<H", v)
            elif -2**31 <= v < 2**31:
                self.out += b"J" + struct.pack("<i", v)
            else:
                self.out += b"\x8a\x08" + struct.pack("<q", v)
        elif isinstance(v, float):
            self.out += b"G" + struct.pack(">d", v)
        elif isinstance(v, str):
            if v in self.strings:
                self.get(self.strings[v])
            else:
                b = v.encode()
                self.out += b"X" + struct.pack("<I", len(b)) + b
                self.strings[v] = self.put()
        elif isinstance(v, tuple):
            for x in v:
                self.push(x)
            self.out += bytes([0x84 + len(v)])  # TUPLE1..3
        elif isinstance(v, list):
            self.out += b"]("
            for x in v:
                self.push(x)
            self.out += b"e"
        elif isinstance(v, dict):
            self.out += b"}("
            for k, x in v.items():
                self.push(k)
                self.push(x)
            self.out += b"u"
        else:
            raise TypeError(type(v))


def torch_dumps(d):
    # torch's all_frames: one dict per distinct frame, shared by every entry that has it.
    table = {}
    for e in d["entries"]:
        e["frames"] = [table.setdefault(json.dumps(f, sort_keys=True), f) for f in e["frames"]]
    p = TorchPickler(shared=table.values())
    p.push(d)
    return bytes(p.out + b".")


def main():
    for p in range(6):
        v = dict(NESTED)
        if p >= 3:
            v["bytes"] = b"raw\xff"
        if p >= 4:
            v["set"] = {3}
            v["frozenset"] = frozenset({4})
        with open(f"nested_p{p}.pkl", "wb") as f:
            f.write(pickle.dumps(v, protocol=p))
    with open("nested.json", "w") as f:
        json.dump(expected(NESTED), f, indent=1, ensure_ascii=False)
    for version in ("2.2", "2.4"):
        with open(f"fr_{version}.pkl", "wb") as f:
            f.write(pickle.dumps(fr_dump(version), protocol=2))
    for version in ("2.9", "2.10"):
        with open(f"fr_{version}.pkl", "wb") as f:
            f.write(torch_dumps(fr_dump(version)))
    d = fr_dump("2.10")
    for e in d["entries"]:
        del e["frames"]
    with open("fr_2.10.json", "w") as f:
        json.dump(d, f, indent=1)


if __name__ == "__main__":
    main()
