"""One case of bench/memory (see main.go) in Python: child.py compact|lossless INPUT STORE.

Prints one JSON line: the output's count and SHA-256, the archived count, the
resident set after the call and after gc.collect()."""

import gc
import hashlib
import json
import sys
import time

import ctxcompact


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    which, path, store = sys.argv[1:4]
    c = ctxcompact.Compactor()
    before = rss_mb()
    with open(path, encoding="utf-8") as f:
        messages = json.load(f)
    res = engine = None
    start = time.perf_counter()
    if which == "compact":
        res = c.compact(messages, force=True)
        out_msgs, archived = res.messages, res.archived
    elif which == "lossless":
        engine = ctxcompact.ContextEngine({"context": {"engine": "lossless"}}, compactor=c, store=store,
                                          session_id="bench")
        out_msgs = engine.compress(messages, force=True)
        archived = engine.last_archived
        engine.close()
    else:
        raise SystemExit(f"unknown case {which} (compact, lossless)")
    seconds = time.perf_counter() - start
    text = json.dumps(out_msgs, ensure_ascii=False, separators=(",", ":"))
    out = {
        "messages": len(out_msgs),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "archived": len(archived),
        "rss_after_mb": rss_mb(),
        "seconds": seconds,
        "rss_before_mb": before,
        "instance_mb": sum(i.memory_bytes() for i in c._pool._free) / 2**20 if c._pool else 0,
    }
    res = engine = out_msgs = archived = messages = None
    gc.collect()
    out["rss_after_gc_mb"] = rss_mb()
    print(json.dumps(out))

if __name__ == "__main__":
    main()
