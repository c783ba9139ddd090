"""Writes stores.json: the cross-runtime store fixture (docs/RECALL.md).

Each runtime's test writes these sessions into a store file with its own store,
has the other two runtimes write them too, and runs every search and expand below
on all three files: the same hits (ids, newest first), totals and originals. The
expected answers are computed here from the rule itself (every term an ASCII
case-insensitive substring of the row's text; newest first; totals counted to
max(limit, 100)), not by any store.  Run: python3 testdata/recall/gen_stores.py
"""

import json
import os
import random

rnd = random.Random(17)
WORDS = ["error", "failed", "tool", "output", "request", "traceback", "parser", "warning", "kelvin", "class"]
ODD = ["Straße", "\u212aelvin", "cla\u017fs", "naïve", "日本語", "50%_off", "a\\b", 'say "hi"']


def text(i):
    ws = [rnd.choice(WORDS) for _ in range(12)]
    if i % 7 == 0:
        ws.append("src/app.py")
    if i % 11 == 0:
        ws.append("foo.bar_baz")
    if i % 5 == 0:
        ws.append(rnd.choice(ODD))
    if rnd.random() < 0.2:
        ws = [w.upper() for w in ws]
    return " ".join(ws)


RANGES = {"alpha": 6, "beta": 3, "gamma": 2}
sessions = {s: [] for s in RANGES}
order = []  # (session, row) in insertion (rowid) order
# Round k archives range r<k> of every session that has one: the sessions interleave.
write_order = [[s for s in RANGES if k <= RANGES[s]] for k in range(1, 7)]
for k, round_ in enumerate(write_order, 1):
    for session in round_:
        rid = f"r{k}"
        rows = []
        count = 30 if session == "alpha" else 8
        for i in range(count):
            t = text(len(order) + i)
            msg = {"role": "tool", "tool_call_id": f"c{k}_{i}", "content": t}
            # The original JSON as a client wrote it (spacing kept byte for byte).
            rows.append({"id": f"{rid}.{i + 1}", "range_id": rid, "position": i + 1, "role": "tool",
                         "reason": "summarized", "json": json.dumps(msg, ensure_ascii=False, indent=None, separators=(", ", ": ")),
                         "text": f"tool {t}"})
        summary = f"Summary of {session} {rid}: worked on src/app.py"
        rows.append({"id": f"{rid}.summary", "range_id": rid, "position": 1, "role": "summary", "reason": "summary",
                     "json": json.dumps({"role": "user", "content": summary}), "text": summary})
        sessions[session].append({"range": {"id": rid, "from_index": 1, "to_index": count + 1, "summary": summary}, "rows": rows})
        order += [(session, r) for r in rows]


def lower(s):
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)


def split(q):
    # The core's recall.query for the queries below: spaces, "quoted phrases".
    out, i = [], 0
    while i < len(q):
        if q[i] == " ":
            i += 1
        elif q[i] == '"':
            j = q.find('"', i + 1)
            out.append(q[i + 1:j])
            i = j + 1
        else:
            j = i
            while j < len(q) and q[j] not in ' "':
                j += 1
            out.append(q[i:j])
            i = j
    seen, terms = set(), []
    for t in out:
        if t and lower(t) not in seen:
            seen.add(lower(t))
            terms.append(t)
    return terms


searches = []
QUERIES = ["src/app.py", "foo.bar_baz", "error", "error failed", "traceback src/app.py", "kelvin", "KELVIN",
           "\u212aelvin", "class", "Straße", "naïve", "日本語", "50%_off", "a\\b", "of", "summary", '"worked on"',
           "tool", "zz_nothing", "parser warning output", "PARSER"]
for session in sessions:
    for q in QUERIES:
        for limit in (10, 3, 50):
            terms = [lower(t) for t in split(q)]
            matches = [r for s, r in reversed(order) if s == session and all(t in lower(r["text"]) for t in terms)]
            searches.append({"session": session, "query": q, "limit": limit,
                             "hits": [r["id"] for r in matches[:limit]],
                             "total": min(len(matches), max(limit, 100))})
expands = []
for session in sessions:
    for rng in sessions[session]:
        rid = rng["range"]["id"]
        expands.append({"session": session, "id": rid, "messages": [r["json"] for r in rng["rows"] if r["reason"] != "summary"]})
    expands.append({"session": session, "id": "r1.3", "messages": [sessions[session][0]["rows"][2]["json"]]})
    expands.append({"session": session, "id": "r1.summary", "messages": [sessions[session][0]["rows"][-1]["json"]]})
    expands.append({"session": session, "id": "r99", "messages": []})

out = {
    "_comment": " ".join(__doc__.strip().split("\n\n")[1].split()),
    "write_order": write_order,
    "sessions": sessions,
    "searches": searches,
    "expands": expands,
}
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "stores.json"), "w", encoding="utf-8") as f:
    json.dump(out, f, ensure_ascii=False, indent=1)
    f.write("\n")
print(len(searches), "searches,", len(expands), "expands,", len(order), "rows")
