"""A client for the nginx test of nevermore.

  http_client.py PORT ROOT [noposts]
      4 threads, each on one kept-alive connection, fetch the files of ROOT in a random order
      (some compressed on the way, then decompressed), compare each with the file, and post
      bodies of up to 200 KB (which nginx buffers to disk) to /echo, unless told `noposts`

Prints "ok N requests, M compressed"; any difference raises (non-zero exit).
"""

import gzip
import http.client
import os
import random
import sys
import threading

THREADS = 4
REQUESTS = 150


def worker(port, root, names, seed, posts, counts, compressed, errors):
    try:
        rng = random.Random(seed)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        done = 0
        for _ in range(REQUESTS):
            if rng.random() < 0.1 and posts:
                body = bytes(rng.randrange(256) for _ in range(rng.choice([10, 20000, 200000])))
                conn.request("POST", "/echo?n=%d" % len(body), body=body)
                resp = conn.getresponse()
                text = resp.read()
                assert resp.status == 200 and text == b"POST /echo n=%d\n" % len(body), (resp.status, text)
            else:
                name = rng.choice(names)
                gz = rng.random() < 0.5
                conn.request("GET", "/" + name, headers={"Accept-Encoding": "gzip"} if gz else {})
                resp = conn.getresponse()
                data = resp.read()
                if resp.getheader("Content-Encoding") == "gzip":
                    data = gzip.decompress(data)
                    compressed.append(name)
                with open(os.path.join(root, name), "rb") as f:
                    want = f.read()
                assert resp.status == 200 and data == want, (name, resp.status, len(data), len(want))
            done += 1
        conn.close()
        counts.append(done)
    except Exception as e:  # reported by the main thread
        errors.append(repr(e))


def main():
    port, root = int(sys.argv[1]), sys.argv[2]
    posts = sys.argv[3:] != ["noposts"]
    names = sorted(os.listdir(root))
    counts, compressed, errors = [], [], []
    threads = [
        threading.Thread(target=worker, args=(port, root, names, seed, posts, counts, compressed, errors)) for seed in range(THREADS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    print("ok %d requests, %d compressed" % (sum(counts), len(compressed)))


main()
