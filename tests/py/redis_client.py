"""A client for the redis test of nevermore: talks RESP over a socket (no redis module needed).

  redis_client.py PORT fill     writes, overwrites and deletes values of many sizes, lists and
                                hashes, checks every one read back, asks for a background save
                                (redis forks a child that writes the database) and waits for it
  redis_client.py PORT check    checks that a server started from that save holds the same data

The data are a deterministic function of the seed: both commands compute the same expected
state. Prints one line "ok ..." per step; any mismatch raises (non-zero exit).
"""

import random
import socket
import sys
import time

KEYS = 5000
ROUNDS = 4


class Redis:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.file = self.sock.makefile("rb")

    @staticmethod
    def encode(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def reply(self):
        line = self.file.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest
        if kind == b"-":
            raise RuntimeError("redis error: " + rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.file.read(n + 2)[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RuntimeError("unexpected reply %r" % line)

    def pipeline(self, commands):
        """Sends every command at once, then reads every reply."""
        replies = []
        for i in range(0, len(commands), 500):
            chunk = commands[i : i + 500]
            self.sock.sendall(b"".join(self.encode(c) for c in chunk))
            replies.extend(self.reply() for _ in chunk)
        return replies

    def call(self, *args):
        return self.pipeline([args])[0]


def value(key, round_, size):
    """A value whose bytes say which key and round made it."""
    stamp = b"%d:%d:" % (key, round_)
    return (stamp * (size // len(stamp) + 1))[:size]


def expected():
    """The strings, list and hash the fill leaves, from the same seed."""
    rng = random.Random(20261207)
    strings = {}
    steps = []
    for round_ in range(ROUNDS):
        sets = []
        for _ in range(KEYS):
            key = rng.randrange(KEYS)
            # Mostly small values, some of pages and a few large ones.
            size = rng.choice([rng.randrange(1, 64), rng.randrange(64, 1024), rng.randrange(1024, 20000)])
            if rng.random() < 0.01:
                size = rng.randrange(100000, 300000)
            strings[b"k%d" % key] = value(key, round_, size)
            sets.append((b"k%d" % key, strings[b"k%d" % key]))
        dels = [b"k%d" % rng.randrange(KEYS) for _ in range(KEYS // 4)]
        for d in dels:
            strings.pop(d, None)
        steps.append((sets, dels))
    items = [b"item-%d-%s" % (i, b"x" * rng.randrange(0, 200)) for i in range(20000)]
    fields = {b"f%d" % i: b"v%d-%s" % (i, b"y" * rng.randrange(0, 100)) for i in range(5000)}
    return steps, strings, items, fields


def check(r, strings, items, fields):
    keys = sorted(b"k%d" % k for k in range(KEYS))
    got = []
    for i in range(0, len(keys), 1000):
        got.extend(r.call("MGET", *keys[i : i + 1000]))
    bad = [k for k, v in zip(keys, got) if v != strings.get(k)]
    assert not bad, "%d keys differ, first %r" % (len(bad), bad[:3])
    assert r.call("DBSIZE") == len(strings) + 2, r.call("DBSIZE")
    assert r.call("LRANGE", "list", 0, -1) == items[::-1], "the list differs"
    flat = r.call("HGETALL", "hash")
    assert dict(zip(flat[::2], flat[1::2])) == fields, "the hash differs"
    print("ok %d strings, %d list items, %d fields" % (len(strings), len(items), len(fields)))


def main():
    port, what = int(sys.argv[1]), sys.argv[2]
    steps, strings, items, fields = expected()
    r = Redis(port)
    if what == "fill":
        for sets, dels in steps:
            replies = r.pipeline([("SET", k, v) for k, v in sets] + [("DEL", d) for d in dels])
            assert all(x == b"OK" for x in replies[: len(sets)]), "a SET failed"
        # A queue filled and emptied, a list and a hash.
        r.pipeline([("RPUSH", "queue", i) for i in items])
        assert r.pipeline([("LPOP", "queue") for _ in items]) == items, "the queue differs"
        r.pipeline([("LPUSH", "list", i) for i in items])
        r.pipeline([("HSET", "hash", f, v) for f, v in fields.items()])
        check(r, strings, items, fields)
        before = r.call("LASTSAVE")
        assert r.call("BGSAVE") in (b"Background saving started", b"Background saving scheduled")
        for _ in range(600):
            time.sleep(0.1)
            if r.call("LASTSAVE") != before and b"rdb_bgsave_in_progress:0" in r.call("INFO", "persistence"):
                break
        info = r.call("INFO", "persistence")
        assert b"rdb_last_bgsave_status:ok" in info, info
        print("ok saved")
    else:
        check(r, strings, items, fields)


main()
