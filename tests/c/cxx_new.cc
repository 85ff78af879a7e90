// C++ allocation: every operator new/delete variant, bad_alloc, over-aligned types and the
// standard containers.
//
// Usage: cxx_new              runs the conformance checks, prints OK
//        cxx_new aligned-near-max   aligned new of sizes just below SIZE_MAX (see below)
//        cxx_new handler-throw      exceptions thrown from a SIGFPE and a SIGSEGV handler, caught
//                             where the division and the read faulted (built with
//                             -fnon-call-exceptions): prints "HANDLER THROW OK 6"
//        cxx_new <misuse>     double-delete | double-delete-array | double-delete-aligned |
//                             delete-overflow | delete-interior | the sized deletes of
//                             the wrong size below | the mismatched pairs below: new-free |
//                             new-array-delete | malloc-delete | new-delete-array |
//                             new-realloc | big-new-array-free | aligned-new-array-delete
//                             (must be reported and aborted; mismatched pairs in detect mode)
#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <initializer_list>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            std::fprintf(stderr, "FAIL: ");                                                        \
            std::fprintf(stderr, __VA_ARGS__);                                                     \
            std::fprintf(stderr, " [line %d: %s]\n", __LINE__, #cond);                             \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static volatile std::size_t sink_size;
static std::size_t sz(std::size_t n) {
    sink_size = n;
    return sink_size;
}
static void *volatile sink_ptr;
static void *launder_ptr(void *p) {
    sink_ptr = p;
    return sink_ptr;
}

static bool aligned(const void *p, std::size_t a) { return (reinterpret_cast<std::uintptr_t>(p) & (a - 1)) == 0; }

static void touch(void *p, std::size_t n, unsigned char v) {
    if (n)
        std::memset(p, v, n);
}
static bool touched(const void *p, std::size_t n, unsigned char v) {
    const unsigned char *c = static_cast<const unsigned char *>(p);
    for (std::size_t i = 0; i < n; i++)
        if (c[i] != v)
            return false;
    return true;
}

struct alignas(64) Line {
    unsigned char b[64];
};
struct alignas(4096) Page {
    unsigned char b[4096];
};
struct alignas(1 << 20) Huge {
    unsigned char b[100];
};

static std::atomic<int> ctor_count, dtor_count;
struct Counted {
    int v;
    Counted() : v(7) { ctor_count++; }
    ~Counted() { dtor_count++; }
};

static void plain_variants() {
    static const std::size_t sizes[] = {0, 1, 8, 24, 100, 1000, 5000, 40000, 300000, 1 << 20};
    for (std::size_t n : sizes) {
        void *p = ::operator new(sz(n));
        CHECK(p != nullptr && aligned(p, 16), "operator new(%zu) = %p", n, p);
        touch(p, n, 1);
        ::operator delete(p);

        p = ::operator new(sz(n));
        touch(p, n, 2);
        ::operator delete(p, n);

        p = ::operator new[](sz(n));
        CHECK(p != nullptr && aligned(p, 16), "operator new[](%zu) = %p", n, p);
        touch(p, n, 3);
        ::operator delete[](p);

        p = ::operator new[](sz(n));
        touch(p, n, 4);
        ::operator delete[](p, n);

        p = ::operator new(sz(n), std::nothrow);
        CHECK(p != nullptr, "operator new(%zu, nothrow) = NULL", n);
        touch(p, n, 5);
        ::operator delete(p, std::nothrow);

        p = ::operator new[](sz(n), std::nothrow);
        CHECK(p != nullptr, "operator new[](%zu, nothrow) = NULL", n);
        touch(p, n, 6);
        ::operator delete[](p, std::nothrow);
    }
    // new of size 0 gives distinct pointers
    void *a = ::operator new(sz(0)), *b = ::operator new(sz(0));
    CHECK(a && b && a != b, "operator new(0) pointers not distinct: %p %p", a, b);
    ::operator delete(a);
    ::operator delete(b);
    // delete of nullptr is fine in every form
    ::operator delete(nullptr);
    ::operator delete[](nullptr);
    ::operator delete(nullptr, std::align_val_t(64));
    delete static_cast<int *>(nullptr);
    delete[] static_cast<int *>(nullptr);

    // expressions
    int *i = new int(42);
    CHECK(*i == 42, "new int");
    delete i;
    int *arr = new int[1000]();
    for (int k = 0; k < 1000; k++)
        CHECK(arr[k] == 0, "new int[]() not value-initialised at %d", k);
    delete[] arr;
    ctor_count = dtor_count = 0;
    Counted *cs = new Counted[77];
    CHECK(ctor_count == 77 && cs[76].v == 7, "new Counted[77]");
    delete[] cs;
    CHECK(dtor_count == 77, "delete[] Counted ran %d destructors", dtor_count.load());
}

static void aligned_variants() {
    for (int k = 0; k <= 24; k++) {
        std::size_t al = std::size_t(1) << k;
        std::align_val_t av{al};
        for (std::size_t n : {std::size_t(1), std::size_t(24), std::size_t(5000), std::size_t(300000)}) {
            if (al >= (1u << 22) && n > 24)
                continue;
            void *p = ::operator new(sz(n), av);
            CHECK(p != nullptr && aligned(p, al), "operator new(%zu, align %zu) = %p", n, al, p);
            touch(p, n, 7);
            ::operator delete(p, av);

            p = ::operator new(sz(n), av);
            touch(p, n, 8);
            ::operator delete(p, n, av);

            p = ::operator new[](sz(n), av);
            CHECK(p != nullptr && aligned(p, al), "operator new[](%zu, align %zu) = %p", n, al, p);
            touch(p, n, 9);
            ::operator delete[](p, av);

            p = ::operator new[](sz(n), av);
            touch(p, n, 10);
            ::operator delete[](p, n, av);

            p = ::operator new(sz(n), av, std::nothrow);
            CHECK(p != nullptr && aligned(p, al), "operator new(%zu, align %zu, nothrow) = %p", n, al, p);
            touch(p, n, 11);
            ::operator delete(p, av, std::nothrow);

            p = ::operator new[](sz(n), av, std::nothrow);
            CHECK(p != nullptr && aligned(p, al), "operator new[](%zu, align %zu, nothrow) = %p", n, al, p);
            touch(p, n, 12);
            ::operator delete[](p, av, std::nothrow);
        }
    }

    // Over-aligned types through new-expressions.
    std::vector<Line *> lines;
    for (int k = 0; k < 100; k++) {
        Line *l = new Line;
        CHECK(aligned(l, 64), "new Line misaligned: %p", (void *)l);
        touch(l, sizeof *l, (unsigned char)k);
        lines.push_back(l);
    }
    for (int k = 0; k < 100; k++) {
        CHECK(touched(lines[k], sizeof(Line), (unsigned char)k), "Line %d overwritten", k);
        delete lines[k];
    }
    Line *la = new Line[33];
    CHECK(aligned(la, 64), "new Line[33] misaligned");
    touch(la, sizeof(Line) * 33, 1);
    delete[] la;
    Page *pg = new Page;
    CHECK(aligned(pg, 4096), "new Page misaligned: %p", (void *)pg);
    touch(pg, sizeof *pg, 1);
    delete pg;
    Page *pga = new Page[5];
    CHECK(aligned(pga, 4096), "new Page[5] misaligned");
    touch(pga, sizeof(Page) * 5, 1);
    delete[] pga;
    Huge *h = new Huge;
    CHECK(aligned(h, 1 << 20), "new Huge (align 1 MiB) misaligned: %p", (void *)h);
    touch(h, sizeof *h, 1);
    delete h;
    Page *pn = new (std::nothrow) Page;
    CHECK(pn && aligned(pn, 4096), "new (nothrow) Page");
    delete pn;

    // Containers of over-aligned elements.
    std::vector<Line> vl(1000);
    CHECK(aligned(vl.data(), 64), "vector<Line> data misaligned");
    vl.resize(5000);
    CHECK(aligned(vl.data(), 64), "vector<Line> data misaligned after resize");
}

static void huge_requests() {
    static const std::size_t huge[] = {SIZE_MAX, SIZE_MAX - 64, std::size_t(1) << 62, std::size_t(1) << 48,
                                       std::size_t(1) << 63};
    for (std::size_t n : huge) {
        CHECK(::operator new(sz(n), std::nothrow) == nullptr, "nothrow new(%#zx) not nullptr", n);
        CHECK(::operator new[](sz(n), std::nothrow) == nullptr, "nothrow new[](%#zx) not nullptr", n);
        // libstdc++'s own aligned new rounds the size up to the alignment without an overflow
        // check, so sizes within one alignment of SIZE_MAX are left out of the aligned cases.
        bool near_max = n > SIZE_MAX - 8192;
        bool thrown = false;
        try {
            void *p = ::operator new(sz(n));
            CHECK(false, "operator new(%#zx) returned %p", n, p);
        } catch (const std::bad_alloc &) {
            thrown = true;
        }
        CHECK(thrown, "operator new(%#zx) did not throw bad_alloc", n);

        thrown = false;
        try {
            void *p = ::operator new[](sz(n));
            CHECK(false, "operator new[](%#zx) returned %p", n, p);
        } catch (const std::bad_alloc &) {
            thrown = true;
        }
        CHECK(thrown, "operator new[](%#zx) did not throw bad_alloc", n);

        if (near_max)
            continue;
        thrown = false;
        try {
            void *p = ::operator new(sz(n), std::align_val_t(64));
            CHECK(false, "operator new(%#zx, align 64) returned %p", n, p);
        } catch (const std::bad_alloc &) {
            thrown = true;
        }
        CHECK(thrown, "operator new(%#zx, align 64) did not throw bad_alloc", n);

        thrown = false;
        try {
            void *p = ::operator new[](sz(n), std::align_val_t(4096));
            CHECK(false, "operator new[](%#zx, align 4096) returned %p", n, p);
        } catch (const std::bad_alloc &) {
            thrown = true;
        }
        CHECK(thrown, "operator new[](%#zx, align 4096) did not throw bad_alloc", n);

        CHECK(::operator new(sz(n), std::align_val_t(256), std::nothrow) == nullptr,
              "nothrow aligned new(%#zx) not nullptr", n);
        CHECK(::operator new[](sz(n), std::align_val_t(256), std::nothrow) == nullptr,
              "nothrow aligned new[](%#zx) not nullptr", n);
    }
    // A new-expression of a huge array throws as well (bad_array_new_length is a bad_alloc).
    bool thrown = false;
    try {
        std::size_t count = sz(SIZE_MAX / 4);
        double *d = new double[count];
        CHECK(false, "new double[SIZE_MAX/4] returned %p", (void *)d);
    } catch (const std::bad_alloc &) {
        thrown = true;
    }
    CHECK(thrown, "new double[SIZE_MAX/4] did not throw");
    thrown = false;
    try {
        std::vector<char> v;
        v.reserve(sz(std::size_t(1) << 50));
    } catch (const std::bad_alloc &) {
        thrown = true;
    } catch (const std::length_error &) {
        thrown = true;
    }
    CHECK(thrown, "vector::reserve(2^50) did not throw");
}

static void containers() {
    std::vector<int> v;
    for (int k = 0; k < 200000; k++)
        v.push_back(k);
    for (int k = 0; k < 200000; k += 997)
        CHECK(v[k] == k, "vector[%d]", k);
    v.shrink_to_fit();

    std::map<int, std::string> m;
    for (int k = 0; k < 20000; k++)
        m[k * 7 % 20011] = std::string(k % 50 + 1, char('a' + k % 26));
    int n = 0;
    int prev = -1;
    for (auto &kv : m) {
        CHECK(kv.first > prev, "map order");
        prev = kv.first;
        n++;
    }
    CHECK(n == 20000, "map size %d", n);
    for (int k = 0; k < 20000; k += 2)
        m.erase(k * 7 % 20011);
    CHECK(m.size() == 10000, "map size after erase %zu", m.size());

    std::unordered_map<std::string, std::vector<int>> um;
    for (int k = 0; k < 20000; k++)
        um["key-" + std::to_string(k % 5000)].push_back(k);
    CHECK(um.size() == 5000, "unordered_map size %zu", um.size());
    CHECK(um["key-42"].size() == 4 && um["key-42"][3] == 15042, "unordered_map contents");
    um.clear();

    std::string s;
    for (int k = 0; k < 100000; k++)
        s += char('0' + k % 10);
    CHECK(s.size() == 100000 && s[12345] == '5', "string append");
    std::string t = s.substr(100, 50000) + s;
    CHECK(t.size() == 150000, "string concat");

    std::vector<std::shared_ptr<std::string>> sp;
    for (int k = 0; k < 5000; k++)
        sp.push_back(k % 2 ? std::make_shared<std::string>(100, 'x') : std::shared_ptr<std::string>(new std::string(k % 300, 'y')));
    std::vector<std::shared_ptr<std::string>> copy = sp;
    sp.clear();
    CHECK(copy[4999]->size() == 100 && copy[10]->size() == 10, "shared_ptr contents");
    std::weak_ptr<std::string> w = copy[1];
    copy.clear();
    CHECK(w.expired(), "weak_ptr not expired");

    std::unique_ptr<int[]> up(new int[12345]);
    up[12344] = 1;
    auto ul = std::make_unique<Line>();
    CHECK(aligned(ul.get(), 64), "make_unique<Line> misaligned");

    // Containers across threads: built in one thread, destroyed in another.
    std::vector<std::map<int, std::string> *> handed(4);
    std::vector<std::thread> th;
    for (int t2 = 0; t2 < 4; t2++)
        th.emplace_back([t2, &handed] {
            auto *mm = new std::map<int, std::string>;
            for (int k = 0; k < 5000; k++)
                (*mm)[k] = std::to_string(k * t2);
            handed[t2] = mm;
        });
    for (auto &x : th)
        x.join();
    th.clear();
    for (int t2 = 0; t2 < 4; t2++)
        th.emplace_back([t2, &handed] {
            auto *mm = handed[(t2 + 1) % 4];
            if (mm->size() != 5000 || (*mm)[10] != std::to_string(10 * ((t2 + 1) % 4)))
                std::fprintf(stderr, "FAIL: map handed to thread %d has bad contents\n", t2), std::exit(1);
            delete mm;
        });
    for (auto &x : th)
        x.join();
}

// Aligned new of sizes within one alignment of SIZE_MAX: bad_alloc / nullptr, never a block.
// (libstdc++'s own aligned operators fail this: they round the size up without an overflow
// check, so this mode is meant for the replacement operators only.)
static int aligned_near_max() {
    for (std::size_t k = 0; k < 70000; k += (k < 64 ? 1 : 97)) {
        std::size_t n = sz(SIZE_MAX - k);
        for (std::size_t al : {std::size_t(16), std::size_t(64), std::size_t(4096), std::size_t(1) << 16}) {
            void *p = ::operator new(n, std::align_val_t(al), std::nothrow);
            CHECK(p == nullptr, "operator new(SIZE_MAX - %zu, align %zu, nothrow) = %p", k, al, p);
            p = ::operator new[](n, std::align_val_t(al), std::nothrow);
            CHECK(p == nullptr, "operator new[](SIZE_MAX - %zu, align %zu, nothrow) = %p", k, al, p);
            bool thrown = false;
            try {
                p = ::operator new(n, std::align_val_t(al));
            } catch (const std::bad_alloc &) {
                thrown = true;
            }
            CHECK(thrown, "operator new(SIZE_MAX - %zu, align %zu) did not throw", k, al);
            thrown = false;
            try {
                p = ::operator new[](n, std::align_val_t(al));
            } catch (const std::bad_alloc &) {
                thrown = true;
            }
            CHECK(thrown, "operator new[](SIZE_MAX - %zu, align %zu) did not throw", k, al);
            if (failures > 10)
                break;
        }
        if (failures > 10)
            break;
    }
    if (failures) {
        std::fprintf(stderr, "FAIL: %d check(s) failed\n", failures);
        return 1;
    }
    std::printf("OK\n");
    return 0;
}

/* A base class without a virtual destructor: deleting a Derived through it gives the sized
 * operator delete the base's size. */
struct Base {
    long a;
    ~Base() { a = 0; }
};
struct Derived : Base {
    long more[4];
};

static int misuse(const char *what) {
    if (!std::strcmp(what, "double-delete")) {
        int *p = new int(5);
        delete p;
        delete static_cast<int *>(launder_ptr(p));
    } else if (!std::strcmp(what, "double-delete-array")) {
        char *p = new char[5000];
        delete[] p;
        delete[] static_cast<char *>(launder_ptr(p));
    } else if (!std::strcmp(what, "double-delete-aligned")) {
        Page *p = new Page;
        delete p;
        ::operator delete(launder_ptr(p), std::align_val_t(alignof(Page)));
    } else if (!std::strcmp(what, "delete-overflow")) {
        char *p = new char[100];
        std::memset(p, 1, 100);
        volatile char *q = static_cast<char *>(launder_ptr(p));
        q[100] = static_cast<char>(~q[100]);
        delete[] p;
    } else if (!std::strcmp(what, "delete-through-base")) {
        Base *b = static_cast<Base *>(launder_ptr(new Derived()));
        delete b;
    } else if (!std::strcmp(what, "delete-array-wrong-size")) {
        void *p = ::operator new[](300000);
        ::operator delete[](launder_ptr(p), 200000);
    } else if (!std::strcmp(what, "delete-aligned-wrong-size")) {
        void *p = ::operator new(sz(100), std::align_val_t(64));
        ::operator delete(launder_ptr(p), 96, std::align_val_t(64));
    } else if (!std::strcmp(what, "new-free")) {
        int *p = new int(7);
        std::free(launder_ptr(p));
    } else if (!std::strcmp(what, "new-array-delete")) {
        char *p = new char[sz(64)];
        delete static_cast<char *>(launder_ptr(p));
    } else if (!std::strcmp(what, "malloc-delete")) {
        void *p = std::malloc(sz(40));
        delete static_cast<long *>(launder_ptr(p));
    } else if (!std::strcmp(what, "new-delete-array")) {
        long *p = new long(3);
        delete[] static_cast<long *>(launder_ptr(p));
    } else if (!std::strcmp(what, "new-realloc")) {
        long *p = new long(3);
        sink_ptr = std::realloc(launder_ptr(p), sz(100));
    } else if (!std::strcmp(what, "big-new-array-free")) {
        char *p = new char[sz(300000)];
        std::free(launder_ptr(p));
    } else if (!std::strcmp(what, "aligned-new-array-delete")) {
        Page *p = new Page[2];
        ::operator delete(launder_ptr(p), std::align_val_t(alignof(Page)));
    } else if (!std::strcmp(what, "delete-interior")) {
        char *p = new char[100];
        ::operator delete[](launder_ptr(p + 16));
    } else {
        std::fprintf(stderr, "unknown case %s\n", what);
        return 2;
    }
    std::fprintf(stderr, "survived: %s\n", what);
    return 3;
}

// Exceptions thrown from signal handlers unwind through the frames between the handler and the
// signal's frame: the library's (its relay of the program's handlers, its fault handler).
static void throwing_handler(int sig) { throw std::runtime_error(sig == SIGFPE ? "division" : "null"); }
static volatile int zero_divisor = 0;
static int *volatile null_pointer = nullptr;
__attribute__((noinline)) static int divide(int a) { return a / zero_divisor; }
__attribute__((noinline)) static int read_null() { return *null_pointer; }

static int handler_throw() {
    struct sigaction sa = {};
    sa.sa_handler = throwing_handler;
    sa.sa_flags = SA_NODEFER;
    sigaction(SIGFPE, &sa, nullptr);
    sigaction(SIGSEGV, &sa, nullptr);
    int caught = 0;
    for (int i = 0; i < 3; i++) {
        try {
            divide(i + 1);
        } catch (const std::runtime_error &e) {
            caught += !std::strcmp(e.what(), "division");
        }
        try {
            read_null();
        } catch (const std::runtime_error &e) {
            caught += !std::strcmp(e.what(), "null");
        }
    }
    std::printf("HANDLER THROW OK %d\n", caught);
    return caught == 6 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc > 1 && !std::strcmp(argv[1], "aligned-near-max"))
        return aligned_near_max();
    if (argc > 1 && !std::strcmp(argv[1], "handler-throw"))
        return handler_throw();
    if (argc > 1)
        return misuse(argv[1]);
    plain_variants();
    aligned_variants();
    huge_requests();
    containers();
    if (failures) {
        std::fprintf(stderr, "FAIL: %d check(s) failed\n", failures);
        return 1;
    }
    std::printf("OK\n");
    return 0;
}
