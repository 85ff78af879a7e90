// Exercises the C++ standard containers (and so operator new/delete) under the allocator.
// Deterministic: prints per-part results and a final checksum; the test compares the output
// with the same program run without the allocator.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
    uint64_t next() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
    }
};

struct Sum {
    uint64_t h = 1469598103934665603ull;
    void add(uint64_t v) {
        for (int i = 0; i < 8; i++) {
            h ^= (v >> (8 * i)) & 0xff;
            h *= 1099511628211ull;
        }
    }
    void add(const std::string &s) {
        for (unsigned char c : s) {
            h ^= c;
            h *= 1099511628211ull;
        }
        add(uint64_t(s.size()));
    }
};

uint64_t vectors(uint64_t seed) {
    Rng r(seed);
    Sum sum;
    std::vector<uint32_t> v;
    for (int i = 0; i < 200000; i++) v.push_back(uint32_t(r.next()));
    std::sort(v.begin(), v.end());
    bool sorted = std::is_sorted(v.begin(), v.end());
    sum.add(sorted);
    for (size_t i = 0; i < v.size(); i += 997) sum.add(v[i]);
    std::vector<std::vector<int>> nested;
    for (int i = 0; i < 2000; i++) {
        nested.emplace_back(size_t(r.next() % 64), i);
        if (i % 3 == 0) nested[size_t(r.next() % nested.size())].shrink_to_fit();
    }
    uint64_t total = 0;
    for (auto &n : nested) {
        for (int x : n) total += uint64_t(x);
    }
    sum.add(total);
    return sum.h;
}

uint64_t maps(uint64_t seed) {
    Rng r(seed);
    Sum sum;
    std::map<std::string, int> words;
    for (int i = 0; i < 30000; i++) {
        std::string w = "w" + std::to_string(r.next() % 5000);
        words[w]++;
        if (i % 7 == 0) words.erase("w" + std::to_string(r.next() % 5000));
    }
    for (auto &kv : words) {
        sum.add(kv.first);
        sum.add(uint64_t(kv.second));
    }
    std::unordered_map<uint64_t, std::string> um;
    for (int i = 0; i < 30000; i++) {
        uint64_t k = r.next() % 20000;
        um[k] = std::string(size_t(k % 50), char('a' + k % 26));
        if (i % 5 == 0) um.erase(r.next() % 20000);
    }
    std::vector<uint64_t> keys;
    for (auto &kv : um) keys.push_back(kv.first);
    std::sort(keys.begin(), keys.end());
    for (uint64_t k : keys) {
        sum.add(k);
        sum.add(um[k]);
    }
    return sum.h;
}

uint64_t sequences(uint64_t seed) {
    Rng r(seed);
    Sum sum;
    std::list<std::string> l1, l2;
    for (int i = 0; i < 20000; i++) {
        (r.next() & 1 ? l1 : l2).push_back(std::to_string(r.next() % 100000));
    }
    l1.splice(l1.end(), l2);
    l1.remove_if([](const std::string &s) { return s.back() == '7'; });
    l1.sort();
    l1.unique();
    for (auto &s : l1) sum.add(s);
    std::deque<uint64_t> dq;
    for (int i = 0; i < 100000; i++) {
        uint64_t x = r.next();
        if (x % 3 == 0 && !dq.empty()) dq.pop_front();
        else if (x % 3 == 1) dq.push_front(x);
        else dq.push_back(x);
    }
    for (uint64_t x : dq) sum.add(x);
    return sum.h;
}

struct Node {
    uint64_t value;
    std::vector<std::shared_ptr<Node>> children;
    std::weak_ptr<Node> parent;
};

uint64_t shared(uint64_t seed) {
    Rng r(seed);
    Sum sum;
    std::vector<std::shared_ptr<Node>> all;
    auto root = std::make_shared<Node>();
    root->value = 1;
    all.push_back(root);
    for (int i = 0; i < 20000; i++) {
        auto parent = all[size_t(r.next() % all.size())];
        auto child = std::make_shared<Node>();
        child->value = r.next() % 1000;
        child->parent = parent;
        parent->children.push_back(child);
        all.push_back(child);
    }
    // Drop the flat list: the tree keeps the nodes alive through the root.
    all.clear();
    uint64_t count = 0, total = 0;
    std::vector<std::shared_ptr<Node>> stack{root};
    while (!stack.empty()) {
        auto n = stack.back();
        stack.pop_back();
        count++;
        total += n->value;
        auto p = n->parent.lock();
        if (p) total += p->value % 7;
        for (auto &c : n->children) stack.push_back(c);
    }
    sum.add(count);
    sum.add(total);
    std::weak_ptr<Node> w = root;
    root.reset();
    sum.add(uint64_t(w.expired()));
    return sum.h;
}

uint64_t strings(uint64_t seed) {
    Rng r(seed);
    Sum sum;
    std::string s;
    for (int i = 0; i < 20000; i++) {
        s += std::to_string(r.next() % 1000);
        if (s.size() > 5000) s = s.substr(s.size() / 2);
    }
    sum.add(s);
    std::vector<std::string> parts;
    for (int i = 0; i < 20000; i++) parts.push_back(std::string(size_t(r.next() % 100), 'x') + std::to_string(i));
    std::sort(parts.begin(), parts.end());
    for (size_t i = 0; i < parts.size(); i += 101) sum.add(parts[i]);
    return sum.h;
}

}  // namespace

int main() {
    const int threads = 4;
    std::vector<uint64_t> results(size_t(threads) * 5);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; t++) {
        pool.emplace_back([t, &results] {
            uint64_t seed = uint64_t(t) + 1;
            results[size_t(t) * 5 + 0] = vectors(seed);
            results[size_t(t) * 5 + 1] = maps(seed);
            results[size_t(t) * 5 + 2] = sequences(seed);
            results[size_t(t) * 5 + 3] = shared(seed);
            results[size_t(t) * 5 + 4] = strings(seed);
        });
    }
    for (auto &th : pool) th.join();
    const char *names[] = {"vector", "map", "sequence", "shared_ptr", "string"};
    Sum all;
    for (int t = 0; t < threads; t++) {
        for (int k = 0; k < 5; k++) {
            uint64_t v = results[size_t(t) * 5 + size_t(k)];
            std::printf("thread %d %s %016llx\n", t, names[k], (unsigned long long)v);
            all.add(v);
        }
    }
    std::printf("checksum %016llx\n", (unsigned long long)all.h);
    return 0;
}
