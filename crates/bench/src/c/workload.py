# python: an allocation-heavy script, run with PYTHONMALLOC=malloc so every object reaches malloc.
import json
import sys

scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
n = max(1000, int(200000 * scale))


class Node:
    __slots__ = ("key", "value", "children")

    def __init__(self, key, value):
        self.key = key
        self.value = value
        self.children = []


def build_tree(n):
    nodes = [Node(i, str(i) * (1 + i % 7)) for i in range(n)]
    for i in range(1, n):
        nodes[(i - 1) // 4].children.append(nodes[i])
    return nodes[0]


def walk(root):
    total, stack = 0, [root]
    while stack:
        x = stack.pop()
        total += len(x.value)
        stack.extend(x.children)
    return total


checksum = 0
for rnd in range(3):
    d = {f"key-{i}-{rnd}": [i, str(i), (i, i * 2)] for i in range(n)}
    checksum += sum(len(v[1]) for v in d.values())
    text = json.dumps({k: v for k, v in list(d.items())[: n // 4]})
    checksum += len(json.loads(text))
    del d, text
    words = sorted(("w%x" % (i * 2654435761 % 1000003)) * (1 + i % 3) for i in range(n))
    checksum += len(" ".join(words))
    del words
    checksum += walk(build_tree(n // 2))
    s = set()
    for i in range(n):
        s.add(frozenset((i % 97, i % 89, i)))
    checksum += len(s)
print(f"RESULT checksum={checksum}")
