"""Allocation-heavy, multi-threaded workload for the real-program tests of nevermore.

Every thread builds nested data, round-trips it through JSON, fills and queries an in-memory
SQLite database and hashes known data. The output is deterministic: the test compares it with
the same script run without the allocator, and checks some lines against known constants.
Run with PYTHONMALLOC=malloc so that small objects go through malloc.
"""

import hashlib
import json
import random
import sqlite3
import sys
import threading

THREADS = 4
ROUNDS = 3
ROWS = 2000


def make_doc(rng, depth):
    """A nested document of dicts, lists, strings and numbers."""
    if depth == 0:
        kind = rng.randrange(4)
        if kind == 0:
            return rng.randrange(-10**9, 10**9)
        if kind == 1:
            return "".join(chr(rng.randrange(32, 127)) for _ in range(rng.randrange(0, 40)))
        if kind == 2:
            return rng.random() < 0.5
        return None
    if rng.random() < 0.5:
        return [make_doc(rng, depth - 1) for _ in range(rng.randrange(1, 6))]
    return {f"k{i}_{rng.randrange(1000)}": make_doc(rng, depth - 1) for i in range(rng.randrange(1, 6))}


def json_work(rng):
    digest = hashlib.sha256()
    for _ in range(20):
        doc = make_doc(rng, 5)
        text = json.dumps(doc, sort_keys=True)
        back = json.loads(text)
        if back != doc:
            raise AssertionError("JSON round trip changed the document")
        # Re-encoding the decoded document must give the same text.
        if json.dumps(back, sort_keys=True) != text:
            raise AssertionError("JSON re-encoding differs")
        digest.update(text.encode())
    return digest.hexdigest()


def sqlite_work(tid):
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, name TEXT, grp INTEGER)")
    con.executemany(
        "INSERT INTO t (n, name, grp) VALUES (?, ?, ?)",
        ((i, f"name-{tid}-{i:05d}", i % 10) for i in range(1, ROWS + 1)),
    )
    con.execute("CREATE INDEX t_name ON t (name)")
    count, total = con.execute("SELECT count(*), sum(n) FROM t").fetchone()
    groups = con.execute("SELECT grp, count(*), sum(n) FROM t GROUP BY grp ORDER BY grp").fetchall()
    last = con.execute("SELECT name FROM t ORDER BY name DESC LIMIT 1").fetchone()[0]
    con.execute("DELETE FROM t WHERE n % 2 = 0")
    odd = con.execute("SELECT count(*), sum(n) FROM t").fetchone()
    con.close()
    group_text = ",".join(f"{g}:{c}:{s}" for g, c, s in groups)
    return count, total, hashlib.md5(group_text.encode()).hexdigest(), last, odd


def hash_work(tid):
    data = bytes((i * 31 + tid) & 0xFF for i in range(1 << 16))
    return (
        hashlib.sha256(data).hexdigest(),
        hashlib.sha1(data).hexdigest(),
        hashlib.blake2b(data).hexdigest()[:32],
    )


def worker(tid, results):
    rng = random.Random(1000 + tid)
    lines = []
    for r in range(ROUNDS):
        lines.append(f"thread {tid} round {r} json {json_work(rng)}")
        count, total, groups, last, odd = sqlite_work(tid)
        lines.append(
            f"thread {tid} round {r} sqlite count={count} sum={total} groups={groups} "
            f"last={last} odd={odd[0]}:{odd[1]}"
        )
        sha256, sha1, blake = hash_work(tid)
        lines.append(f"thread {tid} round {r} hash {sha256} {sha1} {blake}")
    results[tid] = lines


def main():
    results = {}
    threads = [threading.Thread(target=worker, args=(t, results)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if sorted(results) != list(range(THREADS)):
        print("missing thread results", file=sys.stderr)
        return 1
    for tid in range(THREADS):
        for line in results[tid]:
            print(line)
    print(f"sha256(abc)={hashlib.sha256(b'abc').hexdigest()}")
    print(f"md5(abc)={hashlib.md5(b'abc').hexdigest()}")
    print(f"rows={ROWS} threads={THREADS} rounds={ROUNDS}")
    print("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
